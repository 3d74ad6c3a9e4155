// Gated memory unit (SambaY / Phi-4-mini-flash) and the Mamba-1 forward that
// produces its memory.
//   GMU(x_t, M_t) = gmu_out( M_t ⊙ silu(gmu_in · x_t) )       stateless
// M_t is the memory layer's pre-gate scan output y_t = scan + D ⊙ x (before
// y ⊙ silu(z)) for the same token; every GMU layer reads the same M.
// mamba1_memory_forward is mamba1_forward (layers/mamba.h) that also copies the
// pre-gate y of each row into `memory` ([T][d_inner]); same kernels, same
// order, so its output equals mamba1_forward's bit for bit.
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

void mamba1_memory_forward(const Mamba1Config& c, const Mamba1Weights& w, const float* h, int64_t T,
                           RecurrentState& st, Mamba1Scratch& s, float* memory, float* out, ThreadPool* pool);

}  // namespace chimera::layers
