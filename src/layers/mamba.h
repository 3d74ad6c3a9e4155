// Mamba-1 mixer (llama.cpp arch "mamba"; also the building block for other
// Mamba-1 hybrids) and the weight helpers shared with the Mamba-2 mixer.
//
//   [x | z] = ssm_in · h                          x, z: d_inner each
//   x = silu(conv1d(x; conv state) + conv_b)      causal depthwise, width K
//   [dt_low | B | C] = ssm_x · x                  dt_rank | N | N
//   (FalconMamba: dt_low, B, C each RMS-normalised without weight)
//   dt = ssm_dt · dt_low  (bias ssm_dt.bias added inside the scan, before softplus)
//   y = selective_scan(x, dt, A = ssm_a, B, C; SSM state) + D ⊙ x
//   out = ssm_out · (y ⊙ silu(z))
//
// State per sequence (layers/state.h RecurrentSpec): conv [K-1][d_inner],
// SSM [d_inner][N], float32. The GGUF stores ssm_a already as -exp(A_log).
// Any number of tokens per call (prefill, chunked prefill, decode are one
// code path); kernels are row-independent so the three agree.
#pragma once

#include <functional>
#include <initializer_list>
#include <span>
#include <string>

#include "core/memory.h"
#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
#include "layers/linear.h"
#include "layers/state.h"
#include "layers/weights.h"

namespace chimera::layers {

// A float32/F16/BF16 tensor of exactly the ggml shape `ne` (trailing 1s
// optional), widened to float32. Error names the tensor when it is missing or
// has another shape.
Result<Vec> bind_f32_tensor(const format::GgufFile& g, const std::string& name, std::initializer_list<int64_t> ne);

// Depthwise conv weights: `<prefix>.ssm_conv1d.weight` [K, C] transposed to
// tap-major [K][C] (what kernels::conv1d_causal reads) and the bias [C]
// (required unless bias_optional).
struct Conv1dWeights {
  Vec w;  // [K][C]
  Vec b;  // [C] or empty
};
Result<Conv1dWeights> bind_conv1d(const format::GgufFile& g, const std::string& prefix, int64_t channels, int64_t K,
                                  bool bias_optional);

struct Mamba1Config {
  int64_t n_embd = 0;
  int64_t d_inner = 0;
  int64_t d_state = 0;   // N
  int64_t d_conv = 0;    // K
  int64_t dt_rank = 0;
  bool dt_b_c_rms = false;
  float eps = 1e-5f;     // for dt_b_c_rms
  RecurrentSpec state_spec() const { return {d_inner, d_conv - 1, d_inner * d_state}; }
};

struct Mamba1Weights {
  Linear in, x_proj, dt_proj, out;
  Conv1dWeights conv;
  Vec dt_bias, A, D;  // [d_inner], [d_inner][N], [d_inner]
};

Result<Mamba1Weights> bind_mamba1(const WeightBinder& b, const format::GgufFile& g, const std::string& prefix,
                                  const Mamba1Config& c);

struct Mamba1Scratch {
  AlignedBuffer<float> xz, xc, xdb, dt, y;
  void reserve(const Mamba1Config& c, int64_t max_tokens);
};

// One sequence's share of a fused multi-sequence mixer step: rows
// [row, row + T) of the step's activations, mixed on that sequence's state.
struct MixerSegment {
  int64_t row = 0;
  int64_t T = 0;
  RecurrentState* state = nullptr;
};

// out[rows][n_embd] = Mamba1(h[rows][n_embd]) for several sequences at once:
// the projections (ssm_in, ssm_x, ssm_dt, ssm_out) run once over all rows,
// the conv and the scan per segment on its own state (advanced). Segments
// cover disjoint rows; rows <= the scratch's max_tokens. Each segment's
// result is bit-identical to mamba1_forward on its rows alone (matmul rows and
// scan channels are computed independently of their neighbours). out may
// alias h. `memory` as in mamba1_forward, [rows][d_inner].
void mamba1_forward_segments(const Mamba1Config& c, const Mamba1Weights& w, const float* h, int64_t rows,
                             std::span<const MixerSegment> segs, Mamba1Scratch& s, float* out, ThreadPool* pool,
                             float* memory = nullptr);

// out[T][n_embd] = Mamba1(h[T][n_embd]), advancing the layer's state. out may alias h.
// When `memory` is given, the pre-gate scan output y (scan + D ⊙ x, before
// y ⊙ silu(z)) of each row is also copied there ([T][d_inner]) — SambaY's
// memory-producing layer; the output is the same either way. One segment of
// mamba1_forward_segments.
void mamba1_forward(const Mamba1Config& c, const Mamba1Weights& w, const float* h, int64_t T, RecurrentState& st,
                    Mamba1Scratch& s, float* out, ThreadPool* pool, float* memory = nullptr);

}  // namespace chimera::layers
