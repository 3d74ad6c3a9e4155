// Linear implementation.
#include "layers/linear.h"

#include "kernels/ops.h"

namespace chimera::layers {

void Linear::apply(const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy, ThreadPool* pool) const {
  kernels::matmul(w, x, m, ldx, y, ldy, pool);
  if (bias.present())
    for (int64_t i = 0; i < m; ++i) kernels::add(y + i * ldy, bias.ptr(), w.rows);
}

void apply_same_input(std::initializer_list<LinearOut> outs, const float* x, int64_t m, int64_t ldx,
                      AlignedBuffer<uint8_t>& packed, ThreadPool* pool) {
  bool biased = false;
  for (const LinearOut& o : outs) biased |= o.l->bias.present();
  if (biased || (int64_t)outs.size() > kernels::kGroupedMatmulMaxTasks) {
    for (const LinearOut& o : outs) o.l->apply(x, m, ldx, o.y, o.ldy, pool);
    return;
  }
  kernels::GroupedMatmulTask tasks[kernels::kGroupedMatmulMaxTasks];
  int64_t n = 0;
  for (const LinearOut& o : outs) tasks[n++] = {o.l->w, x, m, ldx, o.y, o.ldy};
  const size_t need = kernels::grouped_matmul_scratch_bytes(tasks, n);
  if (packed.size() < need) packed.resize(need);
  kernels::grouped_matmul(tasks, n, packed.data(), pool);
}

Result<Linear> bind_linear(const WeightBinder& b, const std::string& name, int64_t in, int64_t out) {
  Linear l;
  CHIMERA_ASSIGN_OR_RETURN(l.w, b.matrix(name + ".weight", in, out));
  CHIMERA_ASSIGN_OR_RETURN(l.bias, b.optional_vector(name + ".bias", out));
  return l;
}

}  // namespace chimera::layers
