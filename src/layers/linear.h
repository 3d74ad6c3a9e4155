// Dense projections: y = x · Wᵀ (+ b) for a block of activation rows, the one
// primitive every layer uses for its weights.
#pragma once

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

// Binds name + ".weight" (required) and name + ".bias" (optional).
Result<Linear> bind_linear(const WeightBinder& b, const std::string& name, int64_t in, int64_t out);

}  // namespace chimera::layers
