// Differential attention forward (see diff_attention.h). Work is split over
// (query row, query pair) items; each item keeps its scores in a per-thread
// buffer and sums keys in ascending order.
#include "layers/diff_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/ops.h"
#include "layers/mamba.h"

namespace chimera::layers {

Result<DiffAttentionWeights> bind_diff_attention(const WeightBinder& b, const std::string& prefix,
                                                 const DiffAttentionConfig& c) {
  DiffAttentionWeights w;
  const int64_t hd = c.head_dim;
  if (c.cross) {
    CHIMERA_ASSIGN_OR_RETURN(w.qkv, bind_linear(b, prefix + ".attn_q", c.n_embd, c.n_head * hd));
  } else {
    CHIMERA_ASSIGN_OR_RETURN(w.qkv, bind_linear(b, prefix + ".attn_qkv", c.n_embd, (c.n_head + 2 * c.n_head_kv) * hd));
  }
  CHIMERA_ASSIGN_OR_RETURN(w.out, bind_linear(b, prefix + ".attn_output", c.n_head * hd, c.n_embd));
  CHIMERA_ASSIGN_OR_RETURN(w.sub_norm, b.vector(prefix + ".attn_sub_norm.weight", 2 * hd));
  Vec l[4];
  const char* names[4] = {"q1", "k1", "q2", "k2"};
  for (int i = 0; i < 4; ++i) {
    CHIMERA_ASSIGN_OR_RETURN(l[i], b.vector(prefix + ".attn_lambda_" + names[i] + ".weight", hd));
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

void diff_attention_forward(const DiffAttentionConfig& c, const DiffAttentionWeights& w, const float* h, int64_t T,
                            int64_t pos0, KvCache& kv, DiffAttentionScratch& s, float* out, ThreadPool* pool) {
  const int64_t hd = c.head_dim, H = c.n_head, KVH = c.n_head_kv;
  const int64_t nq = H * hd, nkv = KVH * hd;
  const int64_t ld = c.cross ? nq : nq + 2 * nkv;
  float* qkv = s.qkv.data();
  w.qkv.apply(h, T, c.n_embd, qkv, ld, pool);
  if (!c.cross) {
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(kv.k_row(pos0 + t), qkv + t * ld + nq, sizeof(float) * (size_t)nkv);
      std::memcpy(kv.v_row(pos0 + t), qkv + t * ld + nq + nkv, sizeof(float) * (size_t)nkv);
    }
  }
  const int64_t pairs = H / 2, rep = H / KVH;
  const float scale = 1.0f / std::sqrt((float)hd);
  const float lam = w.lambda, post = 1.0f - c.lambda_init;
  const float* K = kv.k();
  const float* V = kv.v();
  float* o = s.o.data();
  parallel_range(pool, T * pairs, 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> s1, s2, acc;
    acc.resize((size_t)(2 * hd));
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t t = it / pairs, p = it % pairs, g = p / rep;
      const int64_t pos = pos0 + t;
      const int64_t k0 = c.window > 0 ? std::max<int64_t>(0, pos - c.window + 1) : 0;
      const int64_t nk = pos - k0 + 1;
      s1.resize((size_t)nk);
      s2.resize((size_t)nk);
      const float* q1 = qkv + t * ld + 2 * p * hd;
      const float* q2 = q1 + hd;
      for (int64_t j = 0; j < nk; ++j) {
        const float* kr = K + (k0 + j) * nkv + 2 * g * hd;
        s1[(size_t)j] = scale * kernels::dot(q1, kr, hd);
        s2[(size_t)j] = scale * kernels::dot(q2, kr + hd, hd);
      }
      kernels::softmax(s1.data(), nk);
      kernels::softmax(s2.data(), nk);
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t j = 0; j < nk; ++j) {
        const float* vr = V + (k0 + j) * nkv + 2 * g * hd;
        kernels::axpy(s1[(size_t)j] - lam * s2[(size_t)j], vr, acc.data(), 2 * hd);
      }
      float* orow = o + t * nq + 2 * p * hd;
      kernels::rms_norm(acc.data(), w.sub_norm.ptr(), orow, 2 * hd, c.eps);
      kernels::scale(orow, post, 2 * hd);
    }
  });
  w.out.apply(o, T, nq, out, c.n_embd, pool);
}

}  // namespace chimera::layers
