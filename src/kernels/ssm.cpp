// SIMD state-space kernels (kernels/ssm.h), written once with Highway and
// compiled for every x86/Arm target; HWY_DYNAMIC_DISPATCH picks the best target
// the active ISA allows (dispatch.cpp masks Highway's targets).
//
// Vectorisation: conv1d runs across channels (each lane one channel, the taps
// an FMA chain in a fixed order); the scans run across the state dimension N
// (one channel / head row at a time, its state row hot in L1 while the tokens
// stream past). Tails go through padded vectors, so every element follows the
// same instruction sequence wherever it sits: results do not depend on the
// channel / head range a thread is given.
//
// SSD (ssd_chunked): per head and chunk of L tokens, with Δ_s = softplus(dt_s),
// a_s = Δ_s·A and Λ_l = Σ_{k<=l} a_k (accumulated in double):
//   y_l  = Σ_{s<=l} (C_l·B_s) e^{Λ_l-Λ_s} Δ_s x_s  +  e^{Λ_l} (H·C_l)  +  D x_l
//   H   <- e^{Λ_{L-1}} H + Σ_s e^{Λ_{L-1}-Λ_s} Δ_s x_s ⊗ B_s
// The decay exponents are differences of double cumulative sums rounded once to
// float, so no exp of a large positive number is ever taken.
// Scratch: thread_local vectors that grow once per thread (no per-call allocation
// after warm-up).
#include "kernels/ssm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ssm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

HWY_BEFORE_NAMESPACE();
namespace chimera::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

HWY_INLINE hn::Vec<DF> LoadN(DF d, const float* p, size_t count) {
  if (count == hn::Lanes(d)) return hn::LoadU(d, p);
  HWY_ALIGN float buf[kMaxLanes] = {};
  for (size_t i = 0; i < count; ++i) buf[i] = p[i];
  return hn::Load(d, buf);
}

HWY_INLINE void StoreN(DF d, hn::Vec<DF> v, float* p, size_t count) {
  if (count == hn::Lanes(d)) return hn::StoreU(v, d, p);
  HWY_ALIGN float buf[kMaxLanes];
  hn::Store(v, d, buf);
  for (size_t i = 0; i < count; ++i) p[i] = buf[i];
}

HWY_INLINE hn::Vec<DF> Silu(DF d, hn::Vec<DF> x) {
  const auto e = hn::Exp(d, hn::Min(hn::Neg(x), hn::Set(d, 100.0f)));
  return hn::Div(x, hn::Add(hn::Set(d, 1.0f), e));
}

// Σ a[i]·b[i] over n floats: one vector accumulator, lanes reduced at the end.
HWY_INLINE float Dot(const float* a, const float* b, size_t n) {
  const DF d;
  const size_t NL = hn::Lanes(d);
  auto acc = hn::Zero(d);
  for (size_t i = 0; i < n; i += NL) {
    const size_t c = std::min(NL, n - i);
    acc = hn::MulAdd(LoadN(d, a + i, c), LoadN(d, b + i, c), acc);
  }
  return hn::GetLane(hn::SumOfLanes(d, acc));
}

void Conv1dImpl(const float* x, int64_t ldx, int64_t T, const float* w, const float* b, int64_t C, int64_t K,
                float* state, float* y, int64_t ldy, bool silu, int64_t c0, int64_t c1) {
  const DF d;
  const int64_t NL = (int64_t)hn::Lanes(d);
  const int64_t S = K - 1;
  for (int64_t c = c0; c < c1; c += NL) {
    const size_t cnt = (size_t)std::min(NL, c1 - c);
    const auto bias = b ? LoadN(d, b + c, cnt) : hn::Zero(d);
    for (int64_t t = 0; t < T; ++t) {
      auto acc = hn::Zero(d);
      for (int64_t j = 0; j < K; ++j) {
        const int64_t r = t + j;
        const float* src = r < S ? state + r * C + c : x + (r - S) * ldx + c;
        acc = hn::MulAdd(LoadN(d, src, cnt), LoadN(d, w + j * C + c, cnt), acc);
      }
      acc = hn::Add(acc, bias);
      if (silu) acc = Silu(d, acc);
      StoreN(d, acc, y + t * ldy + c, cnt);
    }
    for (int64_t r = 0; r < S; ++r) {
      const int64_t src = r + T;
      const float* p = src < S ? state + src * C + c : x + (src - S) * ldx + c;
      StoreN(d, LoadN(d, p, cnt), state + r * C + c, cnt);
    }
  }
}

void Scan1Impl(const Scan1Args& a, int64_t d0, int64_t d1) {
  const DF d;
  const size_t NL = hn::Lanes(d), N = (size_t)a.N;
  for (int64_t ch = d0; ch < d1; ++ch) {
    float* s = a.state + ch * a.N;
    const float* A = a.A + ch * a.N;
    const float bias = a.dt_bias ? a.dt_bias[ch] : 0.0f;
    for (int64_t t = 0; t < a.T; ++t) {
      float dtv = a.dt[t * a.lddt + ch];
      if (a.dt_bias) dtv = dtv + bias;
      const float dsp = softplus(dtv);
      const float xv = a.x[t * a.ldx + ch];
      const auto vdsp = hn::Set(d, dsp), vxdt = hn::Set(d, xv * dsp);
      const float* B = a.B + t * a.ldbc;
      const float* Cv = a.C + t * a.ldbc;
      auto sum = hn::Zero(d);
      for (size_t n = 0; n < N; n += NL) {
        const size_t c = std::min(NL, N - n);
        const auto dA = hn::Exp(d, hn::Mul(vdsp, LoadN(d, A + n, c)));
        const auto st = hn::Add(hn::Mul(LoadN(d, s + n, c), dA), hn::Mul(LoadN(d, B + n, c), vxdt));
        sum = hn::MulAdd(st, LoadN(d, Cv + n, c), sum);
        StoreN(d, st, s + n, c);
      }
      float yv = hn::GetLane(hn::SumOfLanes(d, sum));
      if (a.d_skip) yv = yv + xv * a.d_skip[ch];
      a.y[t * a.ldy + ch] = yv;
    }
  }
}

void Scan2Impl(const Scan2Args& a, int64_t h0, int64_t h1) {
  const DF d;
  const size_t NL = hn::Lanes(d), N = (size_t)a.N;
  const int64_t P = a.P, hpg = a.H / a.G;
  thread_local std::vector<float> dsp_buf, dA_buf;
  if ((int64_t)dsp_buf.size() < a.T) {
    dsp_buf.resize((size_t)a.T);
    dA_buf.resize((size_t)a.T);
  }
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t g = h / hpg;
    for (int64_t t = 0; t < a.T; ++t) {
      float dtv = a.dt[t * a.lddt + h];
      if (a.dt_bias) dtv = dtv + a.dt_bias[h];
      dsp_buf[(size_t)t] = softplus(dtv);
      dA_buf[(size_t)t] = std::exp(dsp_buf[(size_t)t] * a.A[h]);
    }
    for (int64_t p = 0; p < P; ++p) {
      float* s = a.state + (h * P + p) * a.N;
      for (int64_t t = 0; t < a.T; ++t) {
        const float xv = a.x[t * a.ldx + h * P + p];
        const auto vdA = hn::Set(d, dA_buf[(size_t)t]), vxdt = hn::Set(d, xv * dsp_buf[(size_t)t]);
        const float* B = a.B + t * a.ldbc + g * a.N;
        const float* Cv = a.C + t * a.ldbc + g * a.N;
        auto sum = hn::Zero(d);
        for (size_t n = 0; n < N; n += NL) {
          const size_t c = std::min(NL, N - n);
          const auto st = hn::Add(hn::Mul(LoadN(d, s + n, c), vdA), hn::Mul(LoadN(d, B + n, c), vxdt));
          sum = hn::MulAdd(st, LoadN(d, Cv + n, c), sum);
          StoreN(d, st, s + n, c);
        }
        float yv = hn::GetLane(hn::SumOfLanes(d, sum));
        if (a.d_skip) yv = yv + xv * a.d_skip[h];
        a.y[t * a.ldy + h * P + p] = yv;
      }
    }
  }
}

void SsdImpl(const Scan2Args& a, int64_t chunk, int64_t h0, int64_t h1) {
  const DF d;
  const size_t NL = hn::Lanes(d), N = (size_t)a.N, P = (size_t)a.P;
  const int64_t hpg = a.H / a.G;
  if (chunk < 1) chunk = 1;
  const size_t Q = (size_t)chunk;
  thread_local std::vector<double> lam;
  thread_local std::vector<float> dts, m, yrow;
  if (lam.size() < Q) lam.resize(Q);
  if (dts.size() < Q) dts.resize(Q);
  if (m.size() < Q + NL) m.resize(Q + NL);
  if (yrow.size() < P + NL) yrow.resize(P + NL);
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t g = h / hpg;
    float* Hs = a.state + h * a.P * a.N;
    const float dsk = a.d_skip ? a.d_skip[h] : 0.0f;
    for (int64_t t0 = 0; t0 < a.T; t0 += chunk) {
      const size_t L = (size_t)std::min(chunk, a.T - t0);
      double cum = 0.0;
      for (size_t l = 0; l < L; ++l) {
        float dtv = a.dt[(t0 + (int64_t)l) * a.lddt + h];
        if (a.dt_bias) dtv = dtv + a.dt_bias[h];
        dts[l] = softplus(dtv);
        cum += (double)(dts[l] * a.A[h]);
        lam[l] = cum;
      }
      auto xrow = [&](size_t l) { return a.x + (t0 + (int64_t)l) * a.ldx + h * a.P; };
      auto brow = [&](size_t l) { return a.B + (t0 + (int64_t)l) * a.ldbc + g * a.N; };
      auto crow = [&](size_t l) { return a.C + (t0 + (int64_t)l) * a.ldbc + g * a.N; };
      for (size_t l = 0; l < L; ++l) {
        const float* Cl = crow(l);
        // m[s] = (C_l·B_s) · exp(Λ_l − Λ_s) · Δ_s for s <= l.
        for (size_t s = 0; s <= l; ++s) m[s] = (float)(lam[l] - lam[s]);
        for (size_t s = 0; s <= l; s += NL) {
          const size_t c = std::min(NL, l + 1 - s);
          StoreN(d, hn::Mul(hn::Exp(d, LoadN(d, m.data() + s, c)), LoadN(d, dts.data() + s, c)), m.data() + s, c);
        }
        for (size_t s = 0; s <= l; ++s) m[s] = Dot(Cl, brow(s), N) * m[s];
        // Diagonal block: y = Σ_s m[s] x_s.
        for (size_t p = 0; p < P; p += NL) {
          const size_t c = std::min(NL, P - p);
          auto acc = hn::Zero(d);
          for (size_t s = 0; s <= l; ++s) acc = hn::MulAdd(hn::Set(d, m[s]), LoadN(d, xrow(s) + p, c), acc);
          StoreN(d, acc, yrow.data() + p, c);
        }
        // Carried state and D skip.
        const float eo = std::exp((float)lam[l]);
        const float* xl = xrow(l);
        float* yo = a.y + (t0 + (int64_t)l) * a.ldy + h * a.P;
        for (size_t p = 0; p < P; ++p) {
          float v = yrow[p] + eo * Dot(Hs + p * N, Cl, N);
          if (a.d_skip) v = v + xl[p] * dsk;
          yo[p] = v;
        }
      }
      // Chunk state folded into the carried state.
      const auto dend = hn::Set(d, std::exp((float)lam[L - 1]));
      for (size_t i = 0; i < P * N; i += NL) {
        const size_t c = std::min(NL, P * N - i);
        StoreN(d, hn::Mul(LoadN(d, Hs + i, c), dend), Hs + i, c);
      }
      for (size_t s = 0; s < L; ++s) {
        const float w = std::exp((float)(lam[L - 1] - lam[s])) * dts[s];
        const float* xs = xrow(s);
        const float* Bs = brow(s);
        for (size_t p = 0; p < P; ++p) {
          const auto u = hn::Set(d, w * xs[p]);
          float* hp = Hs + p * N;
          for (size_t n = 0; n < N; n += NL) {
            const size_t c = std::min(NL, N - n);
            StoreN(d, hn::MulAdd(u, LoadN(d, Bs + n, c), LoadN(d, hp + n, c)), hp + n, c);
          }
        }
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace chimera::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace chimera::kernels {

HWY_EXPORT(Conv1dImpl);
HWY_EXPORT(Scan1Impl);
HWY_EXPORT(Scan2Impl);
HWY_EXPORT(SsdImpl);

float softplus(float v) { return v > 20.0f ? v : std::log(1.0f + std::exp(v)); }

void conv1d_causal(const float* x, int64_t ldx, int64_t T, const float* w, const float* b, int64_t C, int64_t K,
                   float* state, float* y, int64_t ldy, bool silu, int64_t c0, int64_t c1) {
  if (T <= 0 || c1 <= c0 || K < 1) return;
  HWY_DYNAMIC_DISPATCH(Conv1dImpl)(x, ldx, T, w, b, C, K, state, y, ldy, silu, c0, c1);
}

void ssm_scan1(const Scan1Args& a, int64_t d0, int64_t d1) {
  if (a.T > 0 && d1 > d0) HWY_DYNAMIC_DISPATCH(Scan1Impl)(a, d0, d1);
}

void ssm_scan2(const Scan2Args& a, int64_t h0, int64_t h1) {
  if (a.T > 0 && h1 > h0) HWY_DYNAMIC_DISPATCH(Scan2Impl)(a, h0, h1);
}

void ssd_chunked(const Scan2Args& a, int64_t chunk, int64_t h0, int64_t h1) {
  if (a.T > 0 && h1 > h0) HWY_DYNAMIC_DISPATCH(SsdImpl)(a, chunk, h0, h1);
}

void gated_group_rms_norm(float* y, const float* z, const float* w, int64_t n, int64_t group_size, float eps) {
  if (z) silu_mul(z, y, y, n);
  for (int64_t g0 = 0; g0 + group_size <= n; g0 += group_size)
    rms_norm(y + g0, w ? w + g0 : nullptr, y + g0, group_size, eps);
}

}  // namespace chimera::kernels
#endif  // HWY_ONCE
