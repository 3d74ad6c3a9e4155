// Self-attention block with a KV cache: q/k/v projections (optional biases),
// optional RoPE on q and k, K/V rows written to the cache at their positions,
// scaled dot-product attention (causal or not, optional window), output
// projection. Handles any number of tokens per call, so batched prefill,
// chunked prefill and single-token decode run the same code.
#pragma once

#include "core/memory.h"
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "layers/linear.h"
#include "layers/state.h"

namespace chimera::layers {

struct AttentionConfig {
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;   // key/query head size
  int64_t head_dim_v = 0; // value head size
  bool use_rope = true;
  kernels::RopeParams rope;
  float scale = 0.f;      // 0 => 1/sqrt(head_dim)
  bool causal = true;
  int64_t window = 0;
  KvSpec kv_spec() const { return {n_head_kv * head_dim, n_head_kv * head_dim_v, head_dim, head_dim_v}; }
};

struct AttentionWeights {
  Linear wq, wk, wv, wo;
};

Result<AttentionWeights> bind_attention(const WeightBinder& b, const std::string& prefix, const AttentionConfig& c);

// Scratch for one call of up to max_tokens rows.
struct AttentionScratch {
  AlignedBuffer<float> q, attn;
  AlignedBuffer<float> k, v;  // K/V rows on their way into a non-f32 cache
  AlignedBuffer<uint8_t> packed;  // activation packing of the fused q/k/v job (grows on demand)
  void reserve(const AttentionConfig& c, int64_t max_tokens);
};

// The kernel parameters of this attention (scale 1/sqrt(head_dim) unless set).
kernels::AttentionParams attention_params(const AttentionConfig& c);

// RoPE (when c uses it) on T rows of q [T][n_head*head_dim] and k
// [T][n_head_kv*head_dim] at positions pos0, pos0+1, ...
void rope_rows(const AttentionConfig& c, float* q, float* k, int64_t T, int64_t pos0);

// out[T][n_embd] = Attention(h[T][n_embd]) for tokens at positions pos0..pos0+T-1.
void attention_forward(const AttentionConfig& c, const AttentionWeights& w, const float* h, int64_t T, int64_t pos0,
                       KvCache& cache, AttentionScratch& s, float* out, ThreadPool* pool);

// Partial-canvas variant (masked diffusion LMs, Fast-dLLM caches): the T query
// rows at positions pos0..pos0+T-1 write their K/V into the cache there and
// attend to keys [0, n_kv) (n_kv >= pos0 + T; with c.causal only keys <= the
// query position count). Cache rows outside [pos0, pos0+T) must already hold the
// K/V of those positions from earlier calls. n_kv == pos0 + T is exactly the
// function above.
void attention_forward(const AttentionConfig& c, const AttentionWeights& w, const float* h, int64_t T, int64_t pos0,
                       int64_t n_kv, KvCache& cache, AttentionScratch& s, float* out, ThreadPool* pool);

}  // namespace chimera::layers
