// Gated memory unit (SambaY / Phi-4-mini-flash).
//   GMU(x_t, M_t) = gmu_out( M_t ⊙ silu(gmu_in · x_t) )       stateless
// M_t is the memory layer's pre-gate scan output y_t = scan + D ⊙ x (before
// y ⊙ silu(z)) for the same token; every GMU layer reads the same M.
// The memory itself comes from mamba1_forward's optional `memory` output.
#pragma once

#include "layers/linear.h"
#include "layers/mamba.h"

namespace chimera::layers {

struct GmuWeights {
  Linear in, out;  // in: [n_embd] -> [d_inner]; out: [d_inner] -> [n_embd]
};

Result<GmuWeights> bind_gmu(const WeightBinder& b, const std::string& prefix, int64_t n_embd, int64_t d_inner);

// out[T][n_embd] = GMU(h, memory); tmp holds T·d_inner floats. out may alias h.
void gmu_forward(const GmuWeights& w, const float* h, const float* memory, int64_t T, int64_t n_embd,
                 int64_t d_inner, float* tmp, float* out, ThreadPool* pool);

}  // namespace chimera::layers
