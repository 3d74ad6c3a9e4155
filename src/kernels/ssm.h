// State-space kernels for Mamba-1 / Mamba-2 mixers: the causal depthwise
// conv1d with carried state, the Mamba-1 selective scan, the Mamba-2 scan
// (sequential recurrence for decode and short prompts, chunked SSD matrix form
// for long prompts) and the gated grouped RMSNorm.
//
// Layout: activations are token rows (row t at p + t*ld); recurrent state is
// float32 and owned by the caller (layers/state.h):
//   conv state  [K-1][C]   the last K-1 raw (pre-conv) inputs, oldest row first
//   Mamba-1 SSM [D][N]     per channel d, state dim n
//   Mamba-2 SSM [H][P][N]  per head h, head channel p, state dim n
// Numerics follow llama.cpp's ggml CPU ops (ggml_ssm_conv, ggml_ssm_scan):
//   conv:    acc = sum_{j<K} w[j][c] * window[t+j][c] (oldest tap first), then
//            + bias, then silu — each step rounded to float.
//   Δ:       softplus(dt + dt_bias), softplus(v) = v > 20 ? v : logf(1 + expf(v)).
//   Mamba-1: h = h * exp(Δ·A[d][n]) + B[n] * (x·Δ);  y = Σ_n h·C[n]  (+ x·D)
//   Mamba-2: h = h * exp(Δ·A[h])   + B[g][n] * (x·Δ); y = Σ_n h·C[g][n] (+ x·D),
//            head h reads group g = h / (H/G) (repeat-interleave).
// The D skip is added as y + (x·D), exactly as llama.cpp's graph does after the
// scan; gating with silu(z) is left to the caller (Mamba-1: silu_mul; Mamba-2:
// gated_group_rms_norm, which gates before normalising).
//
// Threading: every kernel takes a [begin, end) range of channels (conv,
// Mamba-1) or heads (Mamba-2); each output element and state element belongs
// to exactly one index of that range and is computed in a fixed order, so
// results do not depend on how a thread pool splits the range.
//
// Tolerances vs the scalar references in ref/ssm_ref.h (tests/kernels/ssm_test.cpp):
//   conv1d:      |err| <= 4 ulp of sum|w·x| + |b| (FMA vs separate rounding).
//   scan1/scan2: |err| <= 1e-5 relative to max|y| per step, final state likewise
//                (vector exp <= 2 ulp, lane-wise reduction order).
//   SSD vs sequential scan: |err| <= 2e-4 · max|y| over 4096+ tokens (outputs
//                and final state); the chunked form reassociates the decay
//                products (exp of cumulative sums instead of products of exps).
#pragma once

#include <cstdint>

namespace chimera::kernels {

// ggml's softplus (threshold 20).
float softplus(float v);

// Causal depthwise conv over T tokens, channels [c0, c1) of C, kernel width K.
// x: T rows (stride ldx) of raw inputs; w: K rows of C taps (w[K-1] multiplies
// the newest input); b: C biases or null; state: (K-1) rows of C, read as the
// inputs before x and replaced by the last K-1 rows of [state ; x]. y: T rows
// (stride ldy) = silu(conv + b) when `silu`, else conv + b. y must not alias x.
void conv1d_causal(const float* x, int64_t ldx, int64_t T, const float* w, const float* b, int64_t C, int64_t K,
                   float* state, float* y, int64_t ldy, bool silu, int64_t c0, int64_t c1);

struct Scan1Args {
  int64_t T = 0, D = 0, N = 0;
  const float* x = nullptr;        // [T][D] post-conv activations, stride ldx
  int64_t ldx = 0;
  const float* dt = nullptr;       // [T][D] Δ before bias and softplus, stride lddt
  int64_t lddt = 0;
  const float* dt_bias = nullptr;  // [D] or null
  const float* A = nullptr;        // [D][N], negative
  const float* B = nullptr;        // [T][N], stride ldbc
  const float* C = nullptr;        // [T][N], stride ldbc
  int64_t ldbc = 0;
  const float* d_skip = nullptr;   // [D] or null
  float* state = nullptr;          // [D][N], in/out
  float* y = nullptr;              // [T][D], stride ldy
  int64_t ldy = 0;
};

// Mamba-1 selective scan, channels [d0, d1).
void ssm_scan1(const Scan1Args& a, int64_t d0, int64_t d1);

struct Scan2Args {
  int64_t T = 0, H = 0, P = 0, N = 0, G = 1;
  const float* x = nullptr;        // [T][H*P], stride ldx
  int64_t ldx = 0;
  const float* dt = nullptr;       // [T][H] before bias and softplus, stride lddt
  int64_t lddt = 0;
  const float* dt_bias = nullptr;  // [H] or null
  const float* A = nullptr;        // [H], negative (GGUF ssm_a = -exp(A_log))
  const float* B = nullptr;        // [T][G*N], stride ldbc
  const float* C = nullptr;        // [T][G*N], stride ldbc
  int64_t ldbc = 0;
  const float* d_skip = nullptr;   // [H] or null
  float* state = nullptr;          // [H][P][N], in/out
  float* y = nullptr;              // [T][H*P], stride ldy
  int64_t ldy = 0;
};

// Mamba-2 scan as the step-by-step recurrence, heads [h0, h1).
void ssm_scan2(const Scan2Args& a, int64_t h0, int64_t h1);

// Mamba-2 scan in the chunked SSD matrix form (chunks of `chunk` tokens:
// intra-chunk masked decay "attention", chunk state, inter-chunk recurrence,
// state -> output), heads [h0, h1). Same inputs/outputs as ssm_scan2. All four
// products are register-tiled GEMMs; C·Bᵀ is computed once per chunk and group
// and shared by the group's heads in [h0, h1), so give each thread a contiguous
// head range. Uses a per-thread scratch that grows once to
// O(chunk² + chunk·(N + P) + (h1-h0)·P·N) floats (the range's states, transposed).
void ssd_chunked(const Scan2Args& a, int64_t chunk, int64_t h0, int64_t h1);

// y = RMSNorm_per_group(y ⊙ silu(z)) ⊙ w over n = n_group·group_size values:
// the gate is applied first, then each group of group_size values is
// normalised with its own mean square (ggml rms_norm numerics) and scaled by w.
// z may be null (no gate). y is updated in place.
void gated_group_rms_norm(float* y, const float* z, const float* w, int64_t n, int64_t group_size, float eps);

}  // namespace chimera::kernels
