// Attention block implementation. K and V are projected into scratch, rotated,
// then stored into the (paged) cache, converted to its types.
#include "layers/attention_block.h"

#include <cmath>

#include "format/gguf/tensor_names.h"

namespace chimera::layers {

namespace tn = format::tn;

Result<AttentionWeights> bind_attention(const WeightBinder& b, const std::string& p, const AttentionConfig& c) {
  AttentionWeights w;
  CHIMERA_ASSIGN_OR_RETURN(w.wq, bind_linear(b, tn::linear(p, tn::kAttnQ), c.n_embd, c.n_head * c.head_dim));
  CHIMERA_ASSIGN_OR_RETURN(w.wk, bind_linear(b, tn::linear(p, tn::kAttnK), c.n_embd, c.n_head_kv * c.head_dim));
  CHIMERA_ASSIGN_OR_RETURN(w.wv, bind_linear(b, tn::linear(p, tn::kAttnV), c.n_embd, c.n_head_kv * c.head_dim_v));
  CHIMERA_ASSIGN_OR_RETURN(w.wo, bind_linear(b, tn::linear(p, tn::kAttnOutput), c.n_head * c.head_dim_v, c.n_embd));
  return w;
}

void AttentionScratch::reserve(const AttentionConfig& c, int64_t max_rows) {
  auto grow = [](AlignedBuffer<float>& b, int64_t n) {
    if ((int64_t)b.size() < n) b.resize((size_t)n);
  };
  grow(q, max_rows * c.n_head * c.head_dim);
  grow(attn, max_rows * c.n_head * c.head_dim_v);
  grow(k, max_rows * c.n_head_kv * c.head_dim);
  grow(v, max_rows * c.n_head_kv * c.head_dim_v);
}

kernels::AttentionParams attention_params(const AttentionConfig& c) {
  kernels::AttentionParams ap;
  ap.n_head = c.n_head;
  ap.n_head_kv = c.n_head_kv;
  ap.head_dim = c.head_dim;
  ap.scale = c.scale != 0.f ? c.scale : 1.0f / std::sqrt((float)c.head_dim);
  ap.causal = c.causal;
  ap.window = c.window;
  return ap;
}

void rope_rows(const AttentionConfig& c, float* q, float* k, int64_t T, int64_t pos0) {
  if (!c.use_rope) return;
  const int64_t nq = c.n_head * c.head_dim, nk = c.n_head_kv * c.head_dim;
  for (int64_t t = 0; t < T; ++t) {
    kernels::rope(q + t * nq, c.n_head, c.head_dim, pos0 + t, c.rope);
    kernels::rope(k + t * nk, c.n_head_kv, c.head_dim, pos0 + t, c.rope);
  }
}

namespace {

// Everything after the projections: per span RoPE, the K/V store into the
// (paged) cache and the kernel.
void spans_attention(const AttentionConfig& c, float* q, float* k, const float* v,
                     std::span<const AttentionSpan> spans, size_t layer, float* attn, ThreadPool* pool) {
  const int64_t nq = c.n_head * c.head_dim;
  const int64_t nk = c.n_head_kv * c.head_dim;
  const int64_t nv = c.n_head_kv * c.head_dim_v;
  const int64_t no = c.n_head * c.head_dim_v;
  for (const AttentionSpan& sp : spans) {
    const AttentionConfig& cs = sp.cfg ? *sp.cfg : c;
    KvCache& cache = *sp.state->kv(layer);
    float* qs = q + sp.row * nq;
    float* ks = k + sp.row * nk;
    rope_rows(cs, qs, ks, sp.T, sp.pos0);
    cache.store(sp.pos0, sp.T, ks, nk, v + sp.row * nv, nv);
    if (sp.n_kv > sp.pos0 + sp.T) cache.allocate(sp.n_kv);  // keys past this slice (diffusion LMs): stored earlier, or zeros
    kernels::attention(attention_params(cs), qs, sp.T, nq, sp.pos0, cache.k_rows(), cache.v_rows(), sp.n_kv,
                       attn + sp.row * no, no, pool);
  }
}

}  // namespace

void attention_core(const AttentionConfig& c, float* q, float* k, const float* v, std::span<const AttentionSpan> spans,
                    size_t layer, float* attn, ThreadPool* pool) {
  spans_attention(c, q, k, v, spans, layer, attn, pool);
}

void attention_forward(const AttentionConfig& c, const AttentionWeights& w, const float* h, int64_t rows,
                       std::span<const AttentionSpan> spans, size_t layer, AttentionScratch& s, float* out,
                       ThreadPool* pool) {
  const int64_t nq = c.n_head * c.head_dim;
  const int64_t nk = c.n_head_kv * c.head_dim;
  const int64_t nv = c.n_head_kv * c.head_dim_v;
  const int64_t no = c.n_head * c.head_dim_v;
  float* q = s.q.data();
  float* k = s.k.data();
  float* v = s.v.data();
  apply_same_input({{&w.wq, q, nq}, {&w.wk, k, nk}, {&w.wv, v, nv}}, h, rows, c.n_embd, s.packed, pool);
  spans_attention(c, q, k, v, spans, layer, s.attn.data(), pool);
  w.wo.apply(s.attn.data(), rows, no, out, c.n_embd, pool);
}

}  // namespace chimera::layers
