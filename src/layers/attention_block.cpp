// Attention block implementation. K and V are projected into scratch, rotated,
// then stored into the (paged) cache, converted to its types.
#include "layers/attention_block.h"

#include <cmath>

namespace chimera::layers {

Result<AttentionWeights> bind_attention(const WeightBinder& b, const std::string& p, const AttentionConfig& c) {
  AttentionWeights w;
  CHIMERA_ASSIGN_OR_RETURN(w.wq, bind_linear(b, p + ".attn_q", c.n_embd, c.n_head * c.head_dim));
  CHIMERA_ASSIGN_OR_RETURN(w.wk, bind_linear(b, p + ".attn_k", c.n_embd, c.n_head_kv * c.head_dim));
  CHIMERA_ASSIGN_OR_RETURN(w.wv, bind_linear(b, p + ".attn_v", c.n_embd, c.n_head_kv * c.head_dim_v));
  CHIMERA_ASSIGN_OR_RETURN(w.wo, bind_linear(b, p + ".attn_output", c.n_head * c.head_dim_v, c.n_embd));
  return w;
}

void AttentionScratch::reserve(const AttentionConfig& c, int64_t max_tokens) {
  q.resize((size_t)(max_tokens * c.n_head * c.head_dim));
  attn.resize((size_t)(max_tokens * c.n_head * c.head_dim_v));
  k.resize((size_t)(max_tokens * c.n_head_kv * c.head_dim));
  v.resize((size_t)(max_tokens * c.n_head_kv * c.head_dim_v));
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

void attention_forward(const AttentionConfig& c, const AttentionWeights& w, const float* h, int64_t T, int64_t pos0,
                       KvCache& cache, AttentionScratch& s, float* out, ThreadPool* pool) {
  attention_forward(c, w, h, T, pos0, pos0 + T, cache, s, out, pool);  // keys of every token processed so far
}

void attention_forward(const AttentionConfig& c, const AttentionWeights& w, const float* h, int64_t T, int64_t pos0,
                       int64_t n_kv, KvCache& cache, AttentionScratch& s, float* out, ThreadPool* pool) {
  const int64_t nq = c.n_head * c.head_dim;
  const int64_t nk = c.n_head_kv * c.head_dim;
  const int64_t nv = c.n_head_kv * c.head_dim_v;
  float* q = s.q.data();
  float* k = s.k.data();
  float* v = s.v.data();
  apply_same_input({{&w.wq, q, nq}, {&w.wk, k, nk}, {&w.wv, v, nv}}, h, T, c.n_embd, s.packed, pool);
  rope_rows(c, q, k, T, pos0);
  cache.store(pos0, T, k, nk, v, nv);
  if (n_kv > pos0 + T) cache.allocate(n_kv);  // keys past this slice (diffusion LMs): stored earlier, or zeros
  kernels::attention(attention_params(c), q, T, nq, pos0, cache.k_rows(), cache.v_rows(), n_kv, s.attn.data(),
                     c.n_head * c.head_dim_v, pool);
  w.wo.apply(s.attn.data(), T, c.n_head * c.head_dim_v, out, c.n_embd, pool);
}

}  // namespace chimera::layers
