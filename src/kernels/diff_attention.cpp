// Fused differential attention for one query head pair (kernels/diff_attention.h),
// Highway SIMD with runtime dispatch. Three passes over the key sequence:
//   1. both scores of each key: s1 = scale·dot(q1, k1), s2 = scale·dot(q2, k2),
//      four independent FMA chains (two per dot), fixed reduction tree;
//   2. kernels::softmax on each score row (float exp, double sum), then the
//      combined weight w_j = A1_j − λ·A2_j written over the first row;
//   3. o = Σ_j w_j·v_j over the 2·hd value columns, up to four vectors of
//      columns kept in registers per sweep, keys in position order;
// then the sub-norm: sum of squares in double, out = o·(inv_rms·out_scale)·g.
// Every step works key by key in position order with per-key results that do
// not depend on neighbours, so how the keys are split into runs never changes
// the result (batch / chunk / step agree bit for bit).
//
// Precision vs ref::diff_attention_pair (double everywhere): float dots and
// float accumulation of Σ w_j v_j; |out − ref| ≤ 5e-5·max|out_ref| + 5e-5 for q,
// k, v in [−1, 1], scale 1/sqrt(hd), hd ≤ 128, up to ~1000 keys, λ ≤ 1
// (tests/kernels/diff_attention_test.cpp). The sub-norm divides by the rms of
// o, which can be small when A1 ≈ λ·A2 — the bound is relative to the output.
#include "kernels/diff_attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/diff_attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace chimera::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// s1 = dot(q1, k1), s2 = dot(q2, k2); hd % Lanes(d) == 0.
template <class D>
HWY_INLINE void Dot2(D d, const float* HWY_RESTRICT q1, const float* HWY_RESTRICT q2, const float* HWY_RESTRICT k1,
                     const float* HWY_RESTRICT k2, size_t hd, float* s1, float* s2) {
  const size_t N = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), b0 = hn::Zero(d), b1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * N <= hd; i += 2 * N) {
    a0 = hn::MulAdd(hn::LoadU(d, q1 + i), hn::LoadU(d, k1 + i), a0);
    b0 = hn::MulAdd(hn::LoadU(d, q2 + i), hn::LoadU(d, k2 + i), b0);
    a1 = hn::MulAdd(hn::LoadU(d, q1 + i + N), hn::LoadU(d, k1 + i + N), a1);
    b1 = hn::MulAdd(hn::LoadU(d, q2 + i + N), hn::LoadU(d, k2 + i + N), b1);
  }
  if (i < hd) {
    a0 = hn::MulAdd(hn::LoadU(d, q1 + i), hn::LoadU(d, k1 + i), a0);
    b0 = hn::MulAdd(hn::LoadU(d, q2 + i), hn::LoadU(d, k2 + i), b0);
  }
  *s1 = hn::GetLane(hn::SumOfLanes(d, hn::Add(a0, a1)));
  *s2 = hn::GetLane(hn::SumOfLanes(d, hn::Add(b0, b1)));
}

// o[0 .. NV·N) = Σ_j w_j · v_j[col ..], keys of every run in order.
template <int NV, class D>
HWY_INLINE void AccumulateV(D d, const float* HWY_RESTRICT w, const KvRun* runs, int n_runs, size_t col,
                            float* HWY_RESTRICT o) {
  const size_t N = hn::Lanes(d);
  hn::Vec<D> acc[NV];
  for (int t = 0; t < NV; ++t) acc[t] = hn::Zero(d);
  for (int r = 0; r < n_runs; ++r) {
    const float* v = runs[r].v + col;
    const size_t ldv = (size_t)runs[r].ldv;
    for (int64_t j = 0; j < runs[r].n; ++j) {
      const auto wj = hn::Set(d, *w++);
      const float* vj = v + (size_t)j * ldv;
      for (int t = 0; t < NV; ++t) acc[t] = hn::MulAdd(wj, hn::LoadU(d, vj + t * N), acc[t]);
    }
  }
  for (int t = 0; t < NV; ++t) hn::StoreU(acc[t], d, o + t * N);
}

template <class D>
HWY_NOINLINE void Run(D d, const DiffAttentionParams& p, const float* q, const KvRun* runs, int n_runs,
                      float* scores, float* out) {
  const size_t hd = (size_t)p.head_dim, N = hn::Lanes(d);
  int64_t n = 0;
  for (int r = 0; r < n_runs; ++r) n += std::max<int64_t>(0, runs[r].n);
  if (n == 0) {
    std::fill(out, out + 2 * hd, 0.f);
    return;
  }
  float* s1 = scores;
  float* s2 = scores + n;
  // Pass 1: scores.
  int64_t m = 0;
  for (int r = 0; r < n_runs; ++r) {
    const float* k = runs[r].k;
    for (int64_t j = 0; j < runs[r].n; ++j, ++m) {
      const float* kj = k + j * runs[r].ldk;
      Dot2(d, q, q + hd, kj, kj + hd, hd, s1 + m, s2 + m);
      s1[m] *= p.scale;
      s2[m] *= p.scale;
    }
  }
  // Pass 2: the two softmaxes and the λ-combination.
  softmax(s1, n);
  softmax(s2, n);
  const float lam = p.lambda;
  for (int64_t j = 0; j < n; ++j) s1[j] -= lam * s2[j];
  // Pass 3: weighted sum of V over 2·hd columns.
  const size_t width = 2 * hd;
  size_t c = 0;
  for (; c + 4 * N <= width; c += 4 * N) AccumulateV<4>(d, s1, runs, n_runs, c, out + c);
  for (; c < width; c += N) AccumulateV<1>(d, s1, runs, n_runs, c, out + c);
  // Sub-norm (RMSNorm over 2·hd) and the output scale.
  double ss = 0;
  for (size_t i = 0; i < width; ++i) ss += (double)out[i] * out[i];
  const float f = (float)(1.0 / std::sqrt(ss / (double)width + (double)p.eps)) * p.out_scale;
  const auto vf = hn::Set(d, f);
  for (size_t i = 0; i < width; i += N)
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, out + i), vf), hn::LoadU(d, p.sub_norm + i)), d, out + i);
}

// The widest vector whose lane count divides head_dim.
void DiffAttentionPairImpl(const DiffAttentionParams& p, const float* q, const KvRun* runs, int n_runs,
                           float* scores, float* out) {
  const size_t hd = (size_t)p.head_dim;
  const hn::ScalableTag<float> d;
  if (hd % hn::Lanes(d) == 0) return Run(d, p, q, runs, n_runs, scores, out);
#if HWY_TARGET != HWY_SCALAR
  const hn::CappedTag<float, 8> d8;
  if (hd % hn::Lanes(d8) == 0) return Run(d8, p, q, runs, n_runs, scores, out);
  const hn::CappedTag<float, 4> d4;
  if (hd % hn::Lanes(d4) == 0) return Run(d4, p, q, runs, n_runs, scores, out);
#endif
  const hn::CappedTag<float, 1> d1;
  Run(d1, p, q, runs, n_runs, scores, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace chimera::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace chimera::kernels {

HWY_EXPORT(DiffAttentionPairImpl);

void diff_attention_pair(const DiffAttentionParams& p, const float* q, const KvRun* runs, int n_runs, float* scores,
                         float* out) {
  if (p.head_dim <= 0) return;
  HWY_DYNAMIC_DISPATCH(DiffAttentionPairImpl)(p, q, runs, n_runs, scores, out);
}

}  // namespace chimera::kernels
#endif  // HWY_ONCE
