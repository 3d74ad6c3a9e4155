// Differential attention forward (see diff_attention.h). Work is split over
// (query row, query pair) items; each item hands its keys (position order, as
// ring / chunk runs) to kernels::diff_attention_pair with a per-thread score
// buffer.
#include "layers/diff_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "format/gguf/tensor_names.h"
#include "kernels/diff_attention.h"
#include "kernels/ops.h"

namespace chimera::layers {

namespace tn = format::tn;

Result<DiffAttentionWeights> bind_diff_attention(const WeightBinder& b, const std::string& prefix,
                                                 const DiffAttentionConfig& c) {
  DiffAttentionWeights w;
  const int64_t hd = c.head_dim;
  if (c.cross) {
    CHIMERA_ASSIGN_OR_RETURN(w.qkv, bind_linear(b, tn::linear(prefix, tn::kAttnQ), c.n_embd, c.n_head * hd));
  } else {
    CHIMERA_ASSIGN_OR_RETURN(
        w.qkv, bind_linear(b, tn::linear(prefix, tn::kAttnQkv), c.n_embd, (c.n_head + 2 * c.n_head_kv) * hd));
  }
  CHIMERA_ASSIGN_OR_RETURN(w.out, bind_linear(b, tn::linear(prefix, tn::kAttnOutput), c.n_head * hd, c.n_embd));
  CHIMERA_ASSIGN_OR_RETURN(w.sub_norm, b.vector(tn::in(prefix, tn::kAttnSubNorm), 2 * hd));
  Vec l[4];
  const char* names[4] = {tn::kAttnLambdaQ1, tn::kAttnLambdaK1, tn::kAttnLambdaQ2,
                          tn::kAttnLambdaK2};
  for (int i = 0; i < 4; ++i) {
    CHIMERA_ASSIGN_OR_RETURN(l[i], b.vector(tn::in(prefix, names[i]), hd));
  }
  float d1 = 0.f, d2 = 0.f;
  for (int64_t j = 0; j < hd; ++j) {
    d1 += l[0].ptr()[j] * l[1].ptr()[j];
    d2 += l[2].ptr()[j] * l[3].ptr()[j];
  }
  w.lambda = std::exp(d1) - std::exp(d2) + c.lambda_init;
  return w;
}

void DiffAttentionScratch::reserve(const DiffAttentionConfig& c, int64_t T) {
  qkv.resize((size_t)(T * (c.n_head + 2 * c.n_head_kv) * c.head_dim));
  o.resize((size_t)(T * c.n_head * c.head_dim));
}

namespace {

// Runs the kernel for every (query row, query pair); runs_of(t, g, runs) fills
// at most max_runs key runs (position order) of row t and KV pair g, returns their count.
template <class RunsOf>
void attend(const DiffAttentionConfig& c, const DiffAttentionWeights& w, const float* q, int64_t ldq, int64_t T,
            float* o, ThreadPool* pool, int64_t max_keys, int64_t max_runs, const RunsOf& runs_of) {
  const int64_t hd = c.head_dim, H = c.n_head, nq = H * hd;
  const int64_t pairs = H / 2, rep = H / c.n_head_kv;
  kernels::DiffAttentionParams kp;
  kp.head_dim = hd;
  kp.scale = 1.0f / std::sqrt((float)hd);
  kp.lambda = w.lambda;
  kp.eps = c.eps;
  kp.out_scale = 1.0f - c.lambda_init;
  kp.sub_norm = w.sub_norm.ptr();
  parallel_range(pool, T * pairs, 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> scores;
    if (scores.size() < (size_t)(2 * max_keys)) scores.resize((size_t)(2 * max_keys));
    thread_local std::vector<kernels::KvRun> runs_buf;
    if (runs_buf.size() < (size_t)max_runs) runs_buf.resize((size_t)max_runs);
    kernels::KvRun* runs = runs_buf.data();
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t t = it / pairs, p = it % pairs;
      const int n_runs = runs_of(t, p / rep, runs);
      kernels::diff_attention_pair(kp, q + t * ldq + 2 * p * hd, runs, n_runs, scores.data(), o + t * nq + 2 * p * hd);
    }
  });
}

}  // namespace

int64_t diff_attention_qkv_width(const DiffAttentionConfig& c) {
  const int64_t nq = c.n_head * c.head_dim, nkv = c.n_head_kv * c.head_dim;
  return c.cross ? nq : nq + 2 * nkv;
}

void diff_attention_core(const DiffAttentionConfig& c, const DiffAttentionWeights& w, const float* qkv, int64_t T,
                         int64_t pos0, KvCache& kv, float* o, ThreadPool* pool) {
  const int64_t hd = c.head_dim, nq = c.n_head * hd, nkv = c.n_head_kv * hd;
  const int64_t ld = diff_attention_qkv_width(c);
  if (!c.cross) kv.store(pos0, T, qkv + nq, ld, qkv + nq + nkv, ld);
  const int64_t W = c.window, B = KvCache::kBlockRows;
  const int64_t max_keys = W > 0 ? std::min(W, pos0 + T) : pos0 + T;
  // One run per cache block the keys span.
  attend(c, w, qkv, ld, T, o, pool, max_keys, (max_keys + B - 1) / B + 1,
         [&](int64_t t, int64_t g, kernels::KvRun* runs) {
           const int64_t pos = pos0 + t;
           int n = 0;
           for (int64_t j = W > 0 ? std::max<int64_t>(0, pos - W + 1) : 0; j <= pos; n++) {
             const int64_t cnt = std::min(pos + 1, (j / B + 1) * B) - j;
             runs[n] = {kv.k_row(j) + 2 * g * hd, kv.v_row(j) + 2 * g * hd, nkv, nkv, cnt};
             j += cnt;
           }
           return n;
         });
}

void diff_attention_core(const DiffAttentionConfig& c, const DiffAttentionWeights& w, const float* qkv, int64_t T,
                         int64_t pos0, RingKvCache& ring, float* o, ThreadPool* pool) {
  const int64_t hd = c.head_dim, nq = c.n_head * hd, nkv = c.n_head_kv * hd;
  const int64_t ld = nq + 2 * nkv;
  const int64_t W = c.window, R = ring.rows();
  const float* K = ring.k();
  const float* V = ring.v();
  attend(c, w, qkv, ld, T, o, pool, std::min(W, pos0 + T), 3, [&](int64_t t, int64_t g, kernels::KvRun* runs) {
    const int64_t pos = pos0 + t, off = 2 * g * hd;
    const int64_t lo = std::max<int64_t>(0, pos - W + 1);
    int n = 0;
    // Earlier positions lo … pos0−1 from the ring: rows (lo % R) … wrapping at most once.
    if (lo < pos0) {
      const int64_t r0 = ring.row_of(lo), cnt = pos0 - lo;
      const int64_t first = std::min(cnt, R - r0);
      runs[n++] = {K + r0 * nkv + off, V + r0 * nkv + off, nkv, nkv, first};
      if (cnt > first) runs[n++] = {K + off, V + off, nkv, nkv, cnt - first};
    }
    // Positions max(lo, pos0) … pos from this chunk's projection.
    const int64_t t0 = std::max(lo, pos0) - pos0;
    runs[n++] = {qkv + t0 * ld + nq + off, qkv + t0 * ld + nq + nkv + off, ld, ld, t - t0 + 1};
    return n;
  });
  // The ring keeps the last min(T, R) rows of this chunk.
  for (int64_t t = std::max<int64_t>(0, T - R); t < T; ++t) {
    std::memcpy(ring.k_row(pos0 + t), qkv + t * ld + nq, sizeof(float) * (size_t)nkv);
    std::memcpy(ring.v_row(pos0 + t), qkv + t * ld + nq + nkv, sizeof(float) * (size_t)nkv);
  }
}

void diff_attention_forward(const DiffAttentionConfig& c, const DiffAttentionWeights& w, const float* h, int64_t T,
                            int64_t pos0, KvCache& kv, DiffAttentionScratch& s, float* out, ThreadPool* pool) {
  w.qkv.apply(h, T, c.n_embd, s.qkv.data(), diff_attention_qkv_width(c), pool);
  diff_attention_core(c, w, s.qkv.data(), T, pos0, kv, s.o.data(), pool);
  w.out.apply(s.o.data(), T, c.n_head * c.head_dim, out, c.n_embd, pool);
}

void diff_attention_forward(const DiffAttentionConfig& c, const DiffAttentionWeights& w, const float* h, int64_t T,
                            int64_t pos0, RingKvCache& ring, DiffAttentionScratch& s, float* out, ThreadPool* pool) {
  w.qkv.apply(h, T, c.n_embd, s.qkv.data(), diff_attention_qkv_width(c), pool);
  diff_attention_core(c, w, s.qkv.data(), T, pos0, ring, s.o.data(), pool);
  w.out.apply(s.o.data(), T, c.n_head * c.head_dim, out, c.n_embd, pool);
}

}  // namespace chimera::layers
