// Scalar double-precision reference of the fused differential attention.
#include "kernels/ref/diff_attention_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace chimera::kernels::ref {

void diff_attention_pair(const DiffAttentionParams& p, const float* q, const KvRun* runs, int n_runs, float* out) {
  const int64_t hd = p.head_dim;
  std::vector<double> s1, s2;
  std::vector<const float*> vrows;
  for (int r = 0; r < n_runs; ++r) {
    for (int64_t j = 0; j < runs[r].n; ++j) {
      const float* k = runs[r].k + j * runs[r].ldk;
      double d1 = 0, d2 = 0;
      for (int64_t i = 0; i < hd; ++i) {
        d1 += (double)q[i] * k[i];
        d2 += (double)q[hd + i] * k[hd + i];
      }
      s1.push_back(d1 * p.scale);
      s2.push_back(d2 * p.scale);
      vrows.push_back(runs[r].v + j * runs[r].ldv);
    }
  }
  const size_t n = s1.size();
  if (n == 0) {
    std::fill(out, out + 2 * hd, 0.f);
    return;
  }
  auto softmax = [](std::vector<double>& s) {
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (double& x : s) x /= sum;
  };
  softmax(s1);
  softmax(s2);
  std::vector<double> o((size_t)(2 * hd), 0.0);
  for (size_t j = 0; j < n; ++j) {
    const double w = s1[j] - (double)p.lambda * s2[j];
    for (int64_t i = 0; i < 2 * hd; ++i) o[(size_t)i] += w * vrows[j][i];
  }
  double ss = 0;
  for (double x : o) ss += x * x;
  const double inv = 1.0 / std::sqrt(ss / (double)(2 * hd) + (double)p.eps);
  for (int64_t i = 0; i < 2 * hd; ++i) out[i] = (float)(o[(size_t)i] * inv * p.sub_norm[i] * p.out_scale);
}

}  // namespace chimera::kernels::ref
