// Dense projections: y = x · Wᵀ (+ b) for a block of activation rows, the one
// primitive every layer uses for its weights.
#pragma once

#include <initializer_list>

#include "core/memory.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "layers/weights.h"

namespace chimera::layers {

struct Linear {
  kernels::WeightView w;
  Vec bias;  // optional
  bool present() const { return w.data != nullptr; }
  int64_t in() const { return w.cols; }
  int64_t out() const { return w.rows; }
  // y[m][out] (row stride ldy) = x[m][in] (row stride ldx) · Wᵀ + b
  void apply(const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy, ThreadPool* pool) const;
};

// One projection of a shared input: y[m][l.out()] with row stride ldy.
struct LinearOut {
  const Linear* l = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
};

// Several projections of the same activations (q/k/v, gate/up). Without
// biases they run as one grouped job (kernels::grouped_matmul: activations
// packed once per kernel layout, one pool wake-up for all); otherwise one
// apply() each. Bit-identical either way. `packed` grows on demand.
void apply_same_input(std::initializer_list<LinearOut> outs, const float* x, int64_t m, int64_t ldx,
                      AlignedBuffer<uint8_t>& packed, ThreadPool* pool);

// Binds name + ".weight" (required) and name + ".bias" (optional).
Result<Linear> bind_linear(const WeightBinder& b, const std::string& name, int64_t in, int64_t out);

}  // namespace chimera::layers
