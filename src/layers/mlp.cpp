// Gated MLP implementation.
#include "layers/mlp.h"

#include "format/gguf/tensor_names.h"
#include "kernels/ops.h"

namespace chimera::layers {

namespace tn = format::tn;

Result<GatedMlp> bind_gated_mlp(const WeightBinder& b, const std::string& p, int64_t n_embd, int64_t n_ff) {
  GatedMlp m;
  CHIMERA_ASSIGN_OR_RETURN(m.gate, bind_linear(b, tn::linear(p, tn::kFfnGate), n_embd, n_ff));
  CHIMERA_ASSIGN_OR_RETURN(m.up, bind_linear(b, tn::linear(p, tn::kFfnUp), n_embd, n_ff));
  CHIMERA_ASSIGN_OR_RETURN(m.down, bind_linear(b, tn::linear(p, tn::kFfnDown), n_ff, n_embd));
  return m;
}

void gated_mlp_forward(const GatedMlp& m, const float* h, int64_t T, int64_t n_embd, MlpScratch& s, float* out,
                       ThreadPool* pool) {
  const int64_t ff = m.n_ff();
  apply_same_input({{&m.gate, s.g.data(), ff}, {&m.up, s.u.data(), ff}}, h, T, n_embd, s.packed, pool);
  kernels::silu_mul(s.g.data(), s.u.data(), s.g.data(), T * ff);
  m.down.apply(s.g.data(), T, ff, out, n_embd, pool);
}

}  // namespace chimera::layers
