// Mamba-2 mixer (llama.cpp archs "mamba2" and the recurrent layers of
// "granitehybrid"), in llama.cpp's op order:
//
//   [z | xBC | dt] = ssm_in · h                 d_inner | d_inner + 2·G·N | H
//   xBC = silu(conv1d(xBC; conv state) + conv_b) the conv also runs over B and C
//   [x | B | C] = xBC                            x: [H][P], B, C: [G][N]
//   y = scan(x, dt + dt_bias, A = ssm_a, B, C; SSM state) + D ⊙ x   (D, A per head)
//   y = RMSNorm_grouped(y ⊙ silu(z)) ⊙ ssm_norm  gate first, G groups of d_inner/G
//   out = ssm_out · y
//
// Head h reads B/C group h / (H/G). State per sequence: conv [K-1][d_inner+2GN],
// SSM [H][P][N], float32. Prompts of at least ssd_min_tokens rows run the
// chunked SSD kernel (chunks of ssd_chunk), shorter calls and decode the
// sequential recurrence; both keep the same state layout, so a sequence may mix
// them freely (they agree to ~1e-6 relative; tests/kernels/ssm_test.cpp).
#pragma once

#include <string>

#include "layers/mamba.h"

namespace chimera::layers {

struct Mamba2Config {
  int64_t n_embd = 0;
  int64_t d_inner = 0;
  int64_t d_state = 0;   // N
  int64_t d_conv = 0;    // K
  int64_t n_head = 0;    // H (GGUF ssm.time_step_rank)
  int64_t n_group = 1;   // G
  float eps = 1e-5f;     // grouped RMSNorm
  // The matrix-form SSD beats the recurrence from ~8 tokens on (bench/ssm_bench.cpp:
  // 1.4x at 8, 2.6x at 32, ~6x at 512, ~10x at 2048 tokens at Granite / Mamba-2
  // shapes, 1 thread). Prompts shorter than 128 tokens still take the recurrence
  // so that short prompts give identical bits in batch, chunk and step modes
  // (tests/models/hybrid_state_test.cpp, golden cross-mode checks); the scan is
  // a few % of a layer's time there.
  int64_t ssd_min_tokens = 128;
  int64_t ssd_chunk = 64;
  int64_t head_dim() const { return d_inner / n_head; }
  int64_t conv_dim() const { return d_inner + 2 * n_group * d_state; }
  int64_t d_in_proj() const { return 2 * d_inner + 2 * n_group * d_state + n_head; }
  RecurrentSpec state_spec() const { return {conv_dim(), d_conv - 1, d_inner * d_state}; }
  Status validate() const;
};

struct Mamba2Weights {
  Linear in, out;
  Conv1dWeights conv;
  Vec dt_bias, A, D, norm;  // [H], [H], [H], [d_inner]
};

// conv bias optional (granitehybrid); everything else required.
Result<Mamba2Weights> bind_mamba2(const WeightBinder& b, const format::GgufFile& g, const std::string& prefix,
                                  const Mamba2Config& c, bool conv_bias_optional);

struct Mamba2Scratch {
  AlignedBuffer<float> zxbcdt, xbc, y;
  void reserve(const Mamba2Config& c, int64_t max_tokens);
};

// out[rows][n_embd] = Mamba2(h[rows][n_embd]) for several sequences at once
// (MixerSegment, layers/mamba.h): ssm_in and ssm_out run once over all rows;
// the conv and the scan per segment on its own state (advanced), each picking
// SSD or the sequential recurrence by its own T. Bit-identical per segment to
// mamba2_forward on its rows alone. out may alias h.
void mamba2_forward_segments(const Mamba2Config& c, const Mamba2Weights& w, const float* h, int64_t rows,
                             std::span<const MixerSegment> segs, Mamba2Scratch& s, float* out, ThreadPool* pool);

// out[T][n_embd] = Mamba2(h[T][n_embd]), advancing the layer's state. out may
// alias h. One segment of mamba2_forward_segments.
void mamba2_forward(const Mamba2Config& c, const Mamba2Weights& w, const float* h, int64_t T, RecurrentState& st,
                    Mamba2Scratch& s, float* out, ThreadPool* pool);

}  // namespace chimera::layers
