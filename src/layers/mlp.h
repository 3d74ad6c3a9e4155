// Feed-forward blocks. Gated (SwiGLU): down(silu(gate·x) ⊙ up·x).
#pragma once

#include "core/memory.h"
#include "layers/linear.h"

namespace chimera::layers {

struct GatedMlp {
  Linear gate, up, down;
  int64_t n_ff() const { return up.out(); }
};

Result<GatedMlp> bind_gated_mlp(const WeightBinder& b, const std::string& prefix, int64_t n_embd, int64_t n_ff);

struct MlpScratch {
  AlignedBuffer<float> g, u;
  AlignedBuffer<uint8_t> packed;  // activation packing of the fused gate/up job (grows on demand)
  void reserve(int64_t n_ff, int64_t max_tokens) {
    g.resize((size_t)(n_ff * max_tokens));
    u.resize((size_t)(n_ff * max_tokens));
  }
};

// out[T][n_embd] = MLP(h[T][n_embd]). Without biases, gate and up run as one
// grouped job (kernels::grouped_matmul): the activations are packed once and the
// pool is woken once for both; results are bit-identical to two matmuls.
void gated_mlp_forward(const GatedMlp& m, const float* h, int64_t T, int64_t n_embd, MlpScratch& s, float* out,
                       ThreadPool* pool);

}  // namespace chimera::layers
