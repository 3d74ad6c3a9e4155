// Gated memory unit and the memory-producing Mamba-1 forward (see gmu.h).
#include "layers/gmu.h"

#include <cstring>

#include "format/gguf/tensor_names.h"
#include "kernels/ops.h"
#include "kernels/ssm.h"

namespace chimera::layers {

namespace tn = format::tn;

Result<GmuWeights> bind_gmu(const WeightBinder& b, const std::string& prefix, int64_t n_embd, int64_t d_inner) {
  GmuWeights w;
  CHIMERA_ASSIGN_OR_RETURN(w.in, bind_linear(b, tn::linear(prefix, tn::kGmuIn), n_embd, d_inner));
  CHIMERA_ASSIGN_OR_RETURN(w.out, bind_linear(b, tn::linear(prefix, tn::kGmuOut), d_inner, n_embd));
  return w;
}

void gmu_forward(const GmuWeights& w, const float* h, const float* memory, int64_t T, int64_t n_embd,
                 int64_t d_inner, float* tmp, float* out, ThreadPool* pool) {
  w.in.apply(h, T, n_embd, tmp, d_inner, pool);
  for (int64_t t = 0; t < T; ++t) kernels::silu_mul(tmp + t * d_inner, memory + t * d_inner, tmp + t * d_inner, d_inner);
  w.out.apply(tmp, T, d_inner, out, n_embd, pool);
}

}  // namespace chimera::layers
