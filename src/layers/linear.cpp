// Linear implementation.
#include "layers/linear.h"

#include "kernels/ops.h"

namespace chimera::layers {

void Linear::apply(const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy, ThreadPool* pool) const {
  kernels::matmul(w, x, m, ldx, y, ldy, pool);
  if (bias.present())
    for (int64_t i = 0; i < m; ++i) kernels::add(y + i * ldy, bias.ptr(), w.rows);
}

Result<Linear> bind_linear(const WeightBinder& b, const std::string& name, int64_t in, int64_t out) {
  Linear l;
  CHIMERA_ASSIGN_OR_RETURN(l.w, b.matrix(name + ".weight", in, out));
  CHIMERA_ASSIGN_OR_RETURN(l.bias, b.optional_vector(name + ".bias", out));
  return l;
}

}  // namespace chimera::layers
