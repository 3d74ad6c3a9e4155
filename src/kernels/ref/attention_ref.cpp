// Scalar reference attention: a direct transcription of the formula in
// attention_ref.h, one (query, head) at a time, with double accumulators.
#include "kernels/ref/attention_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace chimera::kernels::ref {

void attention_key_range(const AttentionParams& p, int64_t pos, int64_t n_kv, int64_t* lo, int64_t* hi) {
  int64_t h = p.causal ? std::min(n_kv, pos + 1) : n_kv;
  int64_t l = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
  if (h < 0) h = 0;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

void attention(const AttentionParams& p, const float* q, int64_t n_q, int64_t ldq, int64_t q_pos0,
               const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t n_kv, float* out,
               int64_t ldo) {
  const int64_t hd = p.head_dim;
  const int64_t rep = p.n_head / p.n_head_kv;
  std::vector<float> s;
  std::vector<double> acc(hd);
  for (int64_t i = 0; i < n_q; ++i) {
    int64_t lo, hi;
    attention_key_range(p, q_pos0 + i, n_kv, &lo, &hi);
    for (int64_t h = 0; h < p.n_head; ++h) {
      const float* qh = q + i * ldq + h * hd;
      const int64_t g = h / rep;
      float* o = out + i * ldo + h * hd;
      s.assign(hi - lo, 0.f);
      float mx = -INFINITY;
      for (int64_t j = lo; j < hi; ++j) {
        const float* kj = k + j * ldk + g * hd;
        double d = 0;
        for (int64_t c = 0; c < hd; ++c) d += (double)qh[c] * (double)kj[c];
        float sj = (float)d * p.scale;
        if (p.softcap > 0.f) sj = p.softcap * std::tanh(sj / p.softcap);
        s[j - lo] = sj;
        mx = std::max(mx, sj);
      }
      double sum = 0;
      for (auto& e : s) {
        e = std::exp(e - mx);
        sum += e;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = lo; j < hi; ++j) {
        const float* vj = v + j * ldv + g * hd;
        const double pj = (double)s[j - lo] / sum;
        for (int64_t c = 0; c < hd; ++c) acc[c] += pj * (double)vj[c];
      }
      for (int64_t c = 0; c < hd; ++c) o[c] = (float)acc[c];
    }
  }
}

}  // namespace chimera::kernels::ref
