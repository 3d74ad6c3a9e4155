// Self-attention block with a KV cache: q/k/v projections (optional biases),
// optional RoPE on q and k, K/V rows written to the cache at their positions,
// scaled dot-product attention (causal or not, optional window), output
// projection. Handles any number of rows of any number of sequences per call,
// so batched prefill, chunked prefill, single-token decode and fused
// multi-sequence steps run the same code.
#pragma once

#include <span>

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

// Scratch of one call: q / attention rows, K/V rows on their way into the
// caches, and the activation packing of the fused q/k/v job.
struct AttentionScratch {
  AlignedBuffer<float> q, attn;
  AlignedBuffer<float> k, v;
  AlignedBuffer<uint8_t> packed;  // grows on demand
  // Room for max_rows rows of c; grows only, so one scratch serves layers of
  // different shapes.
  void reserve(const AttentionConfig& c, int64_t max_rows);
};

// The kernel parameters of this attention (scale 1/sqrt(head_dim) unless set).
kernels::AttentionParams attention_params(const AttentionConfig& c);

// RoPE (when c uses it) on T rows of q [T][n_head*head_dim] and k
// [T][n_head_kv*head_dim] at positions pos0, pos0+1, ...
void rope_rows(const AttentionConfig& c, float* q, float* k, int64_t T, int64_t pos0);

// One sequence's rows in an attention call over the rows of several
// sequences (a lone sequence is one span).
struct AttentionSpan {
  SequenceState* state = nullptr;  // the layer's KV cache is state->kv(layer)
  int64_t row = 0;                 // first row within the call's rows
  int64_t T = 0;                   // rows
  int64_t pos0 = 0;                // position of the first row
  // Keys attended: [0, n_kv), n_kv >= pos0 + T (with c.causal a query sees
  // only keys up to its own position). A decoder step attends to every token so far
  // (pos0 + T); masked diffusion LMs (Fast-dLLM caches) run a slice of the
  // canvas against K/V that earlier calls left in the cache outside
  // [pos0, pos0 + T).
  int64_t n_kv = 0;
  const AttentionConfig* cfg = nullptr;  // RoPE + kernel settings of this sequence (null: the call's c)
};

// The attention block: out[rows][n_embd] = Attention(h[rows][n_embd]) (out
// may alias h). The q/k/v and output projections run once over all rows;
// per span, RoPE at its positions, its K/V rows stored in its layer's cache
// at pos0.. (converted to the cache's types), and the attention kernel over
// keys [0, n_kv). Rows are independent in the projections, so a sequence's
// results do not depend on the other spans. A span's cfg (PhiMoE's LongRoPE
// factors follow each sequence's length) changes its RoPE and kernel only;
// the projection shapes come from c. s must be reserved for c and rows.
void attention_forward(const AttentionConfig& c, const AttentionWeights& w, const float* h, int64_t rows,
                       std::span<const AttentionSpan> spans, size_t layer, AttentionScratch& s, float* out,
                       ThreadPool* pool);

// attention_forward after its q/k/v projections, for blocks that project
// differently (BitNet's scaled projections and sub-norm): q [rows][n_head *
// head_dim], k [rows][n_head_kv * head_dim] (RoPE'd in place), v [rows]
// [n_head_kv * head_dim_v] -> attention rows attn [rows][n_head * head_dim_v],
// before the output projection.
void attention_core(const AttentionConfig& c, float* q, float* k, const float* v, std::span<const AttentionSpan> spans,
                    size_t layer, float* attn, ThreadPool* pool);

}  // namespace chimera::layers
