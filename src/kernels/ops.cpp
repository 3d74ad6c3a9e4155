// SIMD element-wise / row-wise ops (kernels/ops.h), written once with Highway
// and compiled for every x86/Arm target; HWY_DYNAMIC_DISPATCH picks the best
// target allowed by the active ISA (dispatch.cpp masks Highway's targets).
//
// Invariants: no allocation except rope tables wider than 2048 floats; tails
// are processed through a padded vector, so every element goes through the
// same instruction sequence whatever n is (results do not depend on where an
// element sits relative to a vector boundary). y may alias x where ops.h says so.
//
// Accumulation precision and tolerance vs ref/ops_ref (tests/kernels/ops_test.cpp):
//   rms_norm, layer_norm: sums in double (ggml semantics); |err| <= 4 ulp of |y|.
//   softmax: float exp (hwy Exp, <= 1 ulp), sum in double; |err| <= 1e-6 * max|y| + 4 ulp.
//   silu, silu_mul: x / (1 + Exp(-x)) (-x clamped to 100, where exp is already inf);
//                   |err| <= 8 ulp of |ref| + 1e-37.
//   relu_sqr_mul: exact (the reference's two multiplies in its order).
//   add, scale: exact; axpy: fused multiply-add, |err| <= 1 ulp of |a*x| + |y|.
//   dot: float, 4 independent vector accumulators; |err| <= (n/8 + 32) * 2^-24 * sum|a_i b_i|.
//   argmax: exact (lowest index on ties, NaN never wins, 0 if all NaN, -1 if n <= 0).
//   rope: cos/sin table built in scalar float exactly as ggml; rotation with
//         separate multiply and subtract (no FMA), so it equals the reference bit
//         for bit when the reference is not contracted.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ops.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

HWY_BEFORE_NAMESPACE();
namespace chimera::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

// The first `count` (< Lanes) floats of p, the rest `pad`.
template <class D>
HWY_INLINE hn::Vec<D> LoadPadded(D d, const float* p, size_t count, float pad) {
  HWY_ALIGN float buf[kMaxLanes];
  for (size_t i = 0; i < hn::Lanes(d); ++i) buf[i] = i < count ? p[i] : pad;
  return hn::Load(d, buf);
}

template <class D>
HWY_INLINE void StorePartial(D d, hn::Vec<D> v, float* p, size_t count) {
  HWY_ALIGN float buf[kMaxLanes];
  hn::Store(v, d, buf);
  for (size_t i = 0; i < count; ++i) p[i] = buf[i];
}

// Double accumulators for float vectors of DF: lanes are widened in halves.
#if HWY_TARGET == HWY_SCALAR
using DD = hn::Rebind<double, DF>;
#else
using DD = hn::Rebind<double, hn::Half<DF>>;
#endif

// Adds the lanes of v, widened to double, into (lo, hi).
template <class VD>
HWY_INLINE void AccumulateDouble(DF d, hn::Vec<DF> v, VD& lo, VD& hi) {
  const DD dd;
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  lo = hn::Add(lo, hn::PromoteTo(dd, v));
#else
  const hn::Half<DF> dh;
  lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(dh, v)));
  hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(dh, v)));
#endif
}

template <class D>
HWY_INLINE hn::Vec<D> Silu(D d, hn::Vec<D> x) {
  // exp(-x) for -x > 88.7 is inf in float; clamp inside hwy Exp's valid range.
  const auto e = hn::Exp(d, hn::Min(hn::Neg(x), hn::Set(d, 100.0f)));
  return hn::Div(x, hn::Add(hn::Set(d, 1.0f), e));
}

// Applies f(vector) -> vector over dst[i] for i < n, reading src arrays via
// the loader lambda; used by the element-wise ops so tails share the code path.
template <class F>
HWY_INLINE void ElementWise(int64_t n, float* out, const F& f) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  const size_t un = (size_t)n;
  for (; i + N <= un; i += N) hn::StoreU(f(d, i, N), d, out + i);
  if (i < un) StorePartial(d, f(d, i, un - i), out + i, un - i);
}

template <class D>
HWY_INLINE hn::Vec<D> Ld(D d, const float* p, size_t count) {
  return count == hn::Lanes(d) ? hn::LoadU(d, p) : LoadPadded(d, p, count, 0.0f);
}

void RmsNormImpl(const float* x, const float* w, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  const DF d;
  const DD dd;
  auto lo = hn::Zero(dd), hi = hn::Zero(dd);
  const size_t N = hn::Lanes(d), un = (size_t)n;
  size_t i = 0;
  for (; i + N <= un; i += N) {
    const auto v = hn::LoadU(d, x + i);
    AccumulateDouble(d, hn::Mul(v, v), lo, hi);
  }
  if (i < un) {
    const auto v = LoadPadded(d, x + i, un - i, 0.0f);
    AccumulateDouble(d, hn::Mul(v, v), lo, hi);
  }
  const double sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(lo, hi)));
  const float mean = (float)(sum / (double)n);
  const auto vs = hn::Set(d, 1.0f / std::sqrt(mean + eps));
  ElementWise(n, y, [&](DF d, size_t j, size_t c) {
    const auto v = hn::Mul(Ld(d, x + j, c), vs);
    return w ? hn::Mul(v, Ld(d, w + j, c)) : v;
  });
}

void LayerNormImpl(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  const DF d;
  const DD dd;
  const size_t N = hn::Lanes(d), un = (size_t)n;
  auto lo = hn::Zero(dd), hi = hn::Zero(dd);
  for (size_t i = 0; i < un; i += N) AccumulateDouble(d, Ld(d, x + i, std::min(N, un - i)), lo, hi);
  const float mean = (float)(hn::GetLane(hn::SumOfLanes(dd, hn::Add(lo, hi))) / (double)n);
  const auto vm = hn::Set(d, mean);
  lo = hn::Zero(dd);
  hi = hn::Zero(dd);
  for (size_t i = 0; i < un; i += N) {
    const size_t c = std::min(N, un - i);
    // Padding lanes hold mean so they contribute (mean - mean)^2 = 0.
    const auto v = hn::Sub(c == N ? hn::LoadU(d, x + i) : LoadPadded(d, x + i, c, mean), vm);
    AccumulateDouble(d, hn::Mul(v, v), lo, hi);
  }
  const float var = (float)(hn::GetLane(hn::SumOfLanes(dd, hn::Add(lo, hi))) / (double)n);
  const auto vs = hn::Set(d, 1.0f / std::sqrt(var + eps));
  ElementWise(n, y, [&](DF d, size_t j, size_t c) {
    auto v = hn::Mul(hn::Sub(Ld(d, x + j, c), vm), vs);
    if (w) v = hn::Mul(v, Ld(d, w + j, c));
    if (b) v = hn::Add(v, Ld(d, b + j, c));
    return v;
  });
}

void SoftmaxImpl(float* x, int64_t n) {
  if (n <= 0) return;
  const DF d;
  const DD dd;
  const size_t N = hn::Lanes(d), un = (size_t)n;
  auto vmax = hn::Set(d, -INFINITY);
  size_t i = 0;
  for (; i + N <= un; i += N) vmax = hn::Max(vmax, hn::LoadU(d, x + i));
  if (i < un) vmax = hn::Max(vmax, LoadPadded(d, x + i, un - i, -INFINITY));
  const auto vm = hn::Set(d, hn::GetLane(hn::MaxOfLanes(d, vmax)));
  auto lo = hn::Zero(dd), hi = hn::Zero(dd);
  for (i = 0; i + N <= un; i += N) {
    const auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vm));
    hn::StoreU(e, d, x + i);
    AccumulateDouble(d, e, lo, hi);
  }
  if (i < un) {
    // Padding is -inf: Exp(-inf) = 0 adds nothing to the sum.
    const auto e = hn::Exp(d, hn::Sub(LoadPadded(d, x + i, un - i, -INFINITY), vm));
    StorePartial(d, e, x + i, un - i);
    AccumulateDouble(d, e, lo, hi);
  }
  const double sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(lo, hi)));
  const auto inv = hn::Set(d, (float)(1.0 / sum));
  ElementWise(n, x, [&](DF d, size_t j, size_t c) { return hn::Mul(Ld(d, x + j, c), inv); });
}

void SiluMulImpl(const float* gate, const float* up, float* out, int64_t n) {
  ElementWise(n, out, [&](DF d, size_t j, size_t c) { return hn::Mul(Silu(d, Ld(d, gate + j, c)), Ld(d, up + j, c)); });
}

// r = g where g > 0, else +0 (NaN and -0 included, as the reference).
void ReluSqrMulImpl(const float* gate, const float* up, float* out, int64_t n) {
  ElementWise(n, out, [&](DF d, size_t j, size_t c) {
    const auto g = Ld(d, gate + j, c);
    const auto r = hn::IfThenElseZero(hn::Gt(g, hn::Zero(d)), g);
    return hn::Mul(hn::Mul(r, r), Ld(d, up + j, c));
  });
}

void SiluImpl(float* x, int64_t n) {
  ElementWise(n, x, [&](DF d, size_t j, size_t c) { return Silu(d, Ld(d, x + j, c)); });
}

void AddImpl(float* y, const float* x, int64_t n) {
  ElementWise(n, y, [&](DF d, size_t j, size_t c) { return hn::Add(Ld(d, y + j, c), Ld(d, x + j, c)); });
}

void AxpyImpl(float a, const float* x, float* y, int64_t n) {
  const DF d0;
  const auto va = hn::Set(d0, a);
  ElementWise(n, y, [&](DF d, size_t j, size_t c) { return hn::MulAdd(va, Ld(d, x + j, c), Ld(d, y + j, c)); });
}

void ScaleImpl(float* x, float a, int64_t n) {
  const DF d0;
  const auto va = hn::Set(d0, a);
  ElementWise(n, x, [&](DF d, size_t j, size_t c) { return hn::Mul(Ld(d, x + j, c), va); });
}

float DotImpl(const float* a, const float* b, int64_t n) {
  const DF d;
  const size_t N = hn::Lanes(d), un = n > 0 ? (size_t)n : 0;
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * N <= un; i += 4 * N) {
    s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
    s1 = hn::MulAdd(hn::LoadU(d, a + i + N), hn::LoadU(d, b + i + N), s1);
    s2 = hn::MulAdd(hn::LoadU(d, a + i + 2 * N), hn::LoadU(d, b + i + 2 * N), s2);
    s3 = hn::MulAdd(hn::LoadU(d, a + i + 3 * N), hn::LoadU(d, b + i + 3 * N), s3);
  }
  for (; i + N <= un; i += N) s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
  if (i < un) s1 = hn::MulAdd(LoadPadded(d, a + i, un - i, 0.f), LoadPadded(d, b + i, un - i, 0.f), s1);
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
}

int64_t ArgmaxImpl(const float* x, int64_t n) {
  if (n <= 0) return -1;
  const DF d;
  const size_t N = hn::Lanes(d), un = (size_t)n;
  const auto ninf = hn::Set(d, -INFINITY);
  auto vmax = ninf;
  size_t i = 0;
  // Pass 1: the largest non-NaN value (NaN lanes are replaced by -inf).
  for (; i + N <= un; i += N) {
    const auto v = hn::LoadU(d, x + i);
    vmax = hn::Max(vmax, hn::IfThenElse(hn::Eq(v, v), v, ninf));
  }
  float mx = hn::GetLane(hn::MaxOfLanes(d, vmax));
  for (; i < un; ++i) mx = x[i] > mx ? x[i] : mx;  // false for NaN
  // Pass 2: its first occurrence (NaN never compares equal).
  const auto vm = hn::Set(d, mx);
  for (i = 0; i + N <= un; i += N) {
    const auto m = hn::Eq(hn::LoadU(d, x + i), vm);
    if (!hn::AllFalse(d, m)) return (int64_t)(i + (size_t)hn::FindFirstTrue(d, m));
  }
  for (; i < un; ++i) {
    if (x[i] == mx) return (int64_t)i;
  }
  return 0;  // every value is NaN
}

// Rotates pairs with a table from rope_cache; dims >= n_rot are untouched.
void RopeApplyImpl(float* x, int64_t n_heads, int64_t head_dim, const float* cs, int64_t n_rot, bool neox) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t half = (size_t)n_rot / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    size_t i = 0;
    for (; i + N <= half; i += N) {
      hn::Vec<DF> c, s, x0, x1;
      hn::LoadInterleaved2(d, cs + 2 * i, c, s);
      if (neox) {
        x0 = hn::LoadU(d, xh + i);
        x1 = hn::LoadU(d, xh + half + i);
      } else {
        hn::LoadInterleaved2(d, xh + 2 * i, x0, x1);
      }
      // Separate multiply and subtract/add: the same rounding as ggml's scalar loop.
      const auto y0 = hn::Sub(hn::Mul(x0, c), hn::Mul(x1, s));
      const auto y1 = hn::Add(hn::Mul(x0, s), hn::Mul(x1, c));
      if (neox) {
        hn::StoreU(y0, d, xh + i);
        hn::StoreU(y1, d, xh + half + i);
      } else {
        hn::StoreInterleaved2(y0, y1, d, xh + 2 * i);
      }
    }
    for (; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      float* p0 = neox ? xh + i : xh + 2 * i;
      float* p1 = neox ? xh + half + i : xh + 2 * i + 1;
      const float x0 = *p0, x1 = *p1;
      *p0 = x0 * c - x1 * s;
      *p1 = x0 * s + x1 * c;
    }
  }
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace chimera::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace chimera::kernels {

HWY_EXPORT(RmsNormImpl);
HWY_EXPORT(LayerNormImpl);
HWY_EXPORT(SoftmaxImpl);
HWY_EXPORT(SiluMulImpl);
HWY_EXPORT(ReluSqrMulImpl);
HWY_EXPORT(SiluImpl);
HWY_EXPORT(AddImpl);
HWY_EXPORT(AxpyImpl);
HWY_EXPORT(ScaleImpl);
HWY_EXPORT(DotImpl);
HWY_EXPORT(ArgmaxImpl);
HWY_EXPORT(RopeApplyImpl);
HWY_EXPORT(TargetNameImpl);

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  HWY_DYNAMIC_DISPATCH(RmsNormImpl)(x, w, y, n, eps);
}
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  HWY_DYNAMIC_DISPATCH(LayerNormImpl)(x, w, b, y, n, eps);
}
void softmax(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(SoftmaxImpl)(x, n); }
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(SiluMulImpl)(gate, up, out, n);
}
void relu_sqr_mul(const float* gate, const float* up, float* out, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(ReluSqrMulImpl)(gate, up, out, n);
}
void silu(float* x, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(SiluImpl)(x, n);
}
void add(float* y, const float* x, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(AddImpl)(y, x, n);
}
void axpy(float a, const float* x, float* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(AxpyImpl)(a, x, y, n);
}
void scale(float* x, float a, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(ScaleImpl)(x, a, n);
}
float dot(const float* a, const float* b, int64_t n) { return HWY_DYNAMIC_DISPATCH(DotImpl)(a, b, n); }
int64_t argmax(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(ArgmaxImpl)(x, n); }
const char* ops_simd_target() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

namespace {
float yarn_corr_dim(int64_t n_dims, int64_t n_ctx_orig, float n_turns, float base) {
  return (float)n_dims * logf((float)n_ctx_orig / (n_turns * 2 * (float)M_PI)) / (2 * logf(base));
}
}  // namespace

void rope_cache(int64_t pos, const RopeParams& p, float* cs) {
  const int64_t n_rot = p.n_rot;
  if (n_rot <= 0) return;
  const float theta_scale = powf(p.freq_base, -2.0f / (float)n_rot);
  // ggml_rope_yarn_corr_dims (only read when ext_factor != 0).
  float lo = 0.f, hi = 0.f;
  if (p.ext_factor != 0.0f) {
    lo = fmaxf(0.0f, floorf(yarn_corr_dim(n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    hi = fminf((float)(n_rot - 1), ceilf(yarn_corr_dim(n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base)));
  }
  const float yarn_mscale = p.attn_factor * (1.0f + 0.1f * logf(1.0f / p.freq_scale));
  float theta = (float)pos;
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const float extrap = p.freq_factors ? theta / p.freq_factors[i] : theta;
    const float interp = p.freq_scale * extrap;
    float th = interp, mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float ramp = 1.0f - fminf(1.0f, fmaxf(0.0f, ((float)i - lo) / fmaxf(0.001f, hi - lo)));
      const float mix = ramp * p.ext_factor;
      th = interp * (1 - mix) + extrap * mix;
      mscale = yarn_mscale;
    }
    cs[2 * i] = cosf(th) * mscale;
    cs[2 * i + 1] = sinf(th) * mscale;
    theta *= theta_scale;
  }
}

void rope_apply(float* x, int64_t n_heads, int64_t head_dim, const float* cs, const RopeParams& p) {
  if (p.n_rot <= 0 || n_heads <= 0) return;
  HWY_DYNAMIC_DISPATCH(RopeApplyImpl)(x, n_heads, head_dim, cs, p.n_rot, p.mode == RopeMode::kNeox);
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, const RopeParams& p) {
  if (p.n_rot <= 0 || n_heads <= 0) return;
  float stack[2048];
  thread_local std::vector<float> heap;
  float* cs = stack;
  if (p.n_rot > 2048) {
    heap.resize((size_t)p.n_rot);
    cs = heap.data();
  }
  rope_cache(pos, p, cs);
  rope_apply(x, n_heads, head_dim, cs, p);
}

}  // namespace chimera::kernels
#endif  // HWY_ONCE
