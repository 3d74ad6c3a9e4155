// Differential attention (Phi-4-mini-flash / SambaY; ARCHITECTURES.md §1.4),
// no positional encoding. Heads pair as (2p, 2p+1); query pair p reads KV pair
// g = p / (H / KVH); the pair's two V heads are concatenated (width 2·hd):
//   A1 = softmax(s·q1·k1ᵀ), A2 = softmax(s·q2·k2ᵀ), s = 1/sqrt(hd)
//   O  = A1·V − λ·A2·V;  O = RMSNorm(O; sub_norm, 1e-5) · (1 − λ_init)
//   λ  = exp(λq1·λk1) − exp(λq2·λk2) + λ_init,  λ_init = 0.8 − 0.6·exp(−0.3·layer)
// Self layers project q|k|v (attn_qkv): full layers (window 0) append K/V rows
// to their KvCache; sliding-window layers keep a RingKvCache of W rows and read
// the keys of the current chunk straight from the projection, so a chunk longer
// than the window is fine, then store its last min(T, W) rows in the ring.
// Cross layers project Q only (attn_q) and read another layer's KvCache. A
// query at position p sees keys max(0, p − W + 1) … p (W = window; 0 = unbounded).
// The per-(row, pair) core is kernels::diff_attention_pair (fused, SIMD).
// Invariants: fp32 throughout; every query row is computed independently and
// the kernel does not depend on how its keys are split between ring and chunk,
// so batch / chunk / step and thread counts agree bit for bit.
#pragma once

#include "core/memory.h"
#include "layers/linear.h"
#include "layers/state.h"

namespace chimera::layers {

struct DiffAttentionConfig {
  int64_t n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t window = 0;  // 0: full causal
  bool cross = false;  // Q only; K/V from another layer's cache
  float lambda_init = 0.f;
  float eps = 1e-5f;
  KvSpec kv_spec() const { return {n_head_kv * head_dim, n_head_kv * head_dim}; }
  RingKvSpec ring_spec() const { return {n_head_kv * head_dim, n_head_kv * head_dim, window}; }
};

struct DiffAttentionWeights {
  Linear qkv;  // self: [n_embd] -> [(H + 2·KVH)·hd]; cross: [n_embd] -> [H·hd]
  Linear out;
  Vec sub_norm;      // [2·hd]
  float lambda = 0;  // λ (full), computed at load
};

Result<DiffAttentionWeights> bind_diff_attention(const WeightBinder& b, const std::string& prefix,
                                                 const DiffAttentionConfig& c);

struct DiffAttentionScratch {
  AlignedBuffer<float> qkv, o;
  void reserve(const DiffAttentionConfig& c, int64_t max_tokens);
};

// out[T][n_embd] for rows h[T] at positions pos0.. . Full self layers write K/V
// rows pos0..pos0+T-1 into `kv` first; cross layers only read `kv` (rows 0..pos
// of each query must already be there). out may alias h.
void diff_attention_forward(const DiffAttentionConfig& c, const DiffAttentionWeights& w, const float* h, int64_t T,
                            int64_t pos0, KvCache& kv, DiffAttentionScratch& s, float* out, ThreadPool* pool);

// Sliding-window self layer (c.window > 0) on its ring: the ring must hold the
// keys of positions max(0, pos0 − W + 1) … pos0 − 1 (it does after pos0 tokens).
void diff_attention_forward(const DiffAttentionConfig& c, const DiffAttentionWeights& w, const float* h, int64_t T,
                            int64_t pos0, RingKvCache& ring, DiffAttentionScratch& s, float* out, ThreadPool* pool);

// The same in stages, for fused multi-sequence micro-batches: the q|k|v (or
// cross q) projection and the output projection run once over the rows of all
// sequences (w.qkv / w.out .apply), the core below per sequence.
// qkv: T rows of diff_attention_qkv_width(c) floats (w.qkv's output) at
// positions pos0..; o: T rows of n_head·head_dim floats. K/V rows are stored
// as diff_attention_forward stores them.
int64_t diff_attention_qkv_width(const DiffAttentionConfig& c);
void diff_attention_core(const DiffAttentionConfig& c, const DiffAttentionWeights& w, const float* qkv, int64_t T,
                         int64_t pos0, KvCache& kv, float* o, ThreadPool* pool);
void diff_attention_core(const DiffAttentionConfig& c, const DiffAttentionWeights& w, const float* qkv, int64_t T,
                         int64_t pos0, RingKvCache& ring, float* o, ThreadPool* pool);

}  // namespace chimera::layers
