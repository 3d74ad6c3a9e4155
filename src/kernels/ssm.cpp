// SIMD state-space kernels (kernels/ssm.h), written once with Highway and
// compiled for every x86/Arm target; HWY_DYNAMIC_DISPATCH picks the best target
// the active ISA allows (dispatch.cpp masks Highway's targets).
//
// Vectorisation: conv1d runs across channels (each lane one channel, the taps
// an FMA chain in a fixed order); the scans run across the state dimension N
// (one channel / head row at a time; Mamba-2 keeps a head row hot in L1 while
// the tokens stream past, Mamba-1 takes 64 channels per token so that their
// softplus(dt) is one vector pass). Tails go through padded vectors, so every element follows the
// same instruction sequence wherever it sits: results do not depend on the
// channel / head range a thread is given.
//
// SSD (ssd_chunked): per head and chunk of L tokens, with Δ_s = softplus(dt_s),
// a_s = Δ_s·A and Λ_l = Σ_{k<=l} a_k (accumulated in double):
//   y_l  = Σ_{s<=l} (C_l·B_s) e^{Λ_l-Λ_s} Δ_s x_s  +  e^{Λ_l} (H·C_l)  +  D x_l
//   H   <- e^{Λ_{L-1}} H + Σ_s e^{Λ_{L-1}-Λ_s} Δ_s x_s ⊗ B_s
// The decay exponents are differences of double cumulative sums rounded once to
// float, so no exp of a large positive number is ever taken. Every term is a
// GEMM on a register-tiled 4-row x 2-vector micro-kernel (see SsdImpl); C·Bᵀ is
// computed once per chunk and group and shared by the group's heads.
// Scratch: thread_local vectors that grow once per thread (no per-call allocation
// after warm-up).
#include "kernels/ssm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/gemv_prefetch.h"  // gemv_prefetch
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

// Channel blocks of kConvBlock, token by token inside a block: each input row
// segment is read once, contiguously (walking one channel vector down all T
// rows at the row stride of the in-projection, 34 KB for mamba2-1.3b, missed
// the cache at every token), and the block's taps stay in L1. Every output is
// the same FMA chain as before, whatever the block or channel range.
constexpr int64_t kConvBlock = 512;

void Conv1dImpl(const float* x, int64_t ldx, int64_t T, const float* w, const float* b, int64_t C, int64_t K,
                float* state, float* y, int64_t ldy, bool silu, int64_t c0, int64_t c1) {
  const DF d;
  const int64_t NL = (int64_t)hn::Lanes(d);
  const int64_t S = K - 1;
  for (int64_t cb = c0; cb < c1; cb += kConvBlock) {
    const int64_t ce = std::min(c1, cb + kConvBlock);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t c = cb; c < ce; c += NL) {
        const size_t cnt = (size_t)std::min(NL, ce - c);
        const auto bias = b ? LoadN(d, b + c, cnt) : hn::Zero(d);
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
    }
  }
  // The carried state: the last S rows of [state; x] (row r reads row r + T,
  // not yet overwritten when T < S).
  for (int64_t r = 0; r < S; ++r) {
    const int64_t src = r + T;
    const float* p = src < S ? state + src * C : x + (src - S) * ldx;
    for (int64_t c = c0; c < c1; c += NL) {
      const size_t cnt = (size_t)std::min(NL, c1 - c);
      StoreN(d, LoadN(d, p + c, cnt), state + r * C + c, cnt);
    }
  }
}

// softplus(v) = v > 20 ? v : log(1 + e^v) (ggml's threshold), lane by lane.
HWY_INLINE hn::Vec<DF> SoftplusV(DF d, hn::Vec<DF> v) {
  const auto lp = hn::Log(d, hn::Add(hn::Set(d, 1.0f), hn::Exp(d, hn::Min(v, hn::Set(d, 20.0f)))));
  return hn::IfThenElse(hn::Gt(v, hn::Set(d, 20.0f)), v, lp);
}

// Channels in blocks of kScan1Block: per token, the block's Δ = softplus(dt + bias)
// are computed as vectors first (no libm call inside the channel loop, whose
// vector constants then stay in registers), then each channel's state row is
// updated as before. Each lane's value depends only on its own channel, so the
// bits do not depend on where a thread's range starts.
constexpr int64_t kScan1Block = 64;

void Scan1Impl(const Scan1Args& a, int64_t d0, int64_t d1) {
  const DF d;
  const size_t NL = hn::Lanes(d), N = (size_t)a.N;
  HWY_ALIGN float dsp[kScan1Block];
  for (int64_t cb = d0; cb < d1; cb += kScan1Block) {
    const int64_t nc = std::min(kScan1Block, d1 - cb);
    for (int64_t t = 0; t < a.T; ++t) {
      for (int64_t j = 0; j < nc; j += (int64_t)NL) {
        const size_t c = (size_t)std::min<int64_t>((int64_t)NL, nc - j);
        auto v = LoadN(d, a.dt + t * a.lddt + cb + j, c);
        if (a.dt_bias) v = hn::Add(v, LoadN(d, a.dt_bias + cb + j, c));
        StoreN(d, SoftplusV(d, v), dsp + j, c);
      }
      const float* B = a.B + t * a.ldbc;
      const float* Cv = a.C + t * a.ldbc;
      for (int64_t ch = cb; ch < cb + nc; ++ch) {
        float* s = a.state + ch * a.N;
        const float* A = a.A + ch * a.N;
        const float dv = dsp[ch - cb];
        const float xv = a.x[t * a.ldx + ch];
        const auto vdsp = hn::Set(d, dv), vxdt = hn::Set(d, xv * dv);
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
}

// One Mamba-2 state step s·dA + B·(x·dt) as fma(B, x·dt, s·dA): the form GCC's
// contraction gave the plain expression. Written out, every loop shape gets
// the same bits (targets without FMA emulate MulAdd as multiply then add, as
// the plain expression was compiled there).
HWY_INLINE hn::Vec<DF> StateStep(DF, hn::Vec<DF> s, hn::Vec<DF> vdA, hn::Vec<DF> b, hn::Vec<DF> vxdt) {
  return hn::MulAdd(b, vxdt, hn::Mul(s, vdA));
}

// y + x·D[h] (D optional), fused the same way.
HWY_INLINE float SkipAdd(DF d, float y, float x, const float* d_skip, int64_t h) {
  if (!d_skip) return y;
  return hn::GetLane(hn::MulAdd(hn::Set(d, x), hn::Set(d, d_skip[h]), hn::Set(d, y)));
}

// How far ahead of the state rows being updated the scan prefetches, in bytes
// (16 rows of N = 128). A decode step of 8 sequences streams 8 × 2 MiB of
// mamba2-1.3b state per layer from DRAM (the step's whole 128 MiB does not stay
// in the L3); the hardware prefetchers alone left the loop at ~60 % of a plain
// read-modify-write pass over the same bytes (Zen 5, docs/PERFORMANCE.md,
// session 16).
constexpr uintptr_t kScan2PrefetchBytes = 8192;

// R state rows p .. p+R-1 of head h over all T tokens: R independent FMA
// chains sharing the B/C loads, whole vectors first and the partial one last.
// Every row gets the same operations in the same order whatever R is (the
// one-row loop's), so the bits do not depend on how a head's rows are grouped.
// The R rows are R·N consecutive floats; the same span kScan2PrefetchBytes
// further on (clipped to `end`, the thread's last head) is prefetched first.
template <int R>
HWY_INLINE void Scan2Rows(const Scan2Args& a, int64_t h, int64_t p, const float* dsp_buf, const float* dA_buf,
                          const uint8_t* end) {
  const DF d;
  const size_t NL = hn::Lanes(d), N = (size_t)a.N;
  const int64_t g = h / (a.H / a.G);
  float* s0 = a.state + (h * a.P + p) * a.N;
  gemv_prefetch(reinterpret_cast<uintptr_t>(s0) + kScan2PrefetchBytes, R * N * sizeof(float), end);
  for (int64_t t = 0; t < a.T; ++t) {
    const float* xr = a.x + t * a.ldx + h * a.P + p;
    const float dsp = dsp_buf[t];
    const auto vdA = hn::Set(d, dA_buf[t]);
    const float* B = a.B + t * a.ldbc + g * a.N;
    const float* Cv = a.C + t * a.ldbc + g * a.N;
    hn::Vec<DF> vx[R], sum[R];
    for (int i = 0; i < R; ++i) {
      vx[i] = hn::Set(d, xr[i] * dsp);
      sum[i] = hn::Zero(d);
    }
    size_t n = 0;
    for (; n + NL <= N; n += NL) {
      const auto vb = hn::LoadU(d, B + n), vc = hn::LoadU(d, Cv + n);
      for (int i = 0; i < R; ++i) {
        float* s = s0 + (size_t)i * N + n;
        const auto st = StateStep(d, hn::LoadU(d, s), vdA, vb, vx[i]);
        sum[i] = hn::MulAdd(st, vc, sum[i]);
        hn::StoreU(st, d, s);
      }
    }
    if (n < N) {
      const size_t c = N - n;
      const auto vb = LoadN(d, B + n, c), vc = LoadN(d, Cv + n, c);
      for (int i = 0; i < R; ++i) {
        float* s = s0 + (size_t)i * N + n;
        const auto st = StateStep(d, LoadN(d, s, c), vdA, vb, vx[i]);
        sum[i] = hn::MulAdd(st, vc, sum[i]);
        StoreN(d, st, s, c);
      }
    }
    float* yr = a.y + t * a.ldy + h * a.P + p;
    for (int i = 0; i < R; ++i) yr[i] = SkipAdd(d, hn::GetLane(hn::SumOfLanes(d, sum[i])), xr[i], a.d_skip, h);
  }
}

// Per head: Δ and exp(Δ·A) of every token, then the head's rows four at a
// time (four chains hide the FMA latency; in a multi-token call the rows stay
// in L1 while the tokens pass) and the rest one at a time.
void Scan2Impl(const Scan2Args& a, int64_t h0, int64_t h1) {
  const int64_t P = a.P;
  thread_local std::vector<float> dsp_buf, dA_buf;
  if ((int64_t)dsp_buf.size() < a.T) {
    dsp_buf.resize((size_t)a.T);
    dA_buf.resize((size_t)a.T);
  }
  const uint8_t* end = reinterpret_cast<const uint8_t*>(a.state + h1 * P * a.N);
  for (int64_t h = h0; h < h1; ++h) {
    for (int64_t t = 0; t < a.T; ++t) {
      float dtv = a.dt[t * a.lddt + h];
      if (a.dt_bias) dtv = dtv + a.dt_bias[h];
      dsp_buf[(size_t)t] = softplus(dtv);
      dA_buf[(size_t)t] = std::exp(dsp_buf[(size_t)t] * a.A[h]);
    }
    int64_t p = 0;
    for (; p + 4 <= P; p += 4) Scan2Rows<4>(a, h, p, dsp_buf.data(), dA_buf.data(), end);
    for (; p < P; ++p) Scan2Rows<1>(a, h, p, dsp_buf.data(), dA_buf.data(), end);
  }
}

// ---- SSD: register-tiled GEMM building block --------------------------------
//
// Out[i][j] (+)= Σ_k A[i][k]·B[k][j] over row tiles of kMr rows × 2 vectors of
// columns. The k loop is an FMA chain per output element in ascending k, so an
// element's value does not depend on where its tile sits. Rows past M read a
// zero row and are not stored; columns past the tile width use masked loads.
constexpr size_t kMr = 4;

enum class Tri {
  kNone,       // full M x ncols x K
  kLimitK,     // row tile starting at i0 uses k < min(K, i0 + kMr) (A is zero past the diagonal)
  kLimitCols,  // row tile starting at i0 computes columns j < min(ncols, i0 + kMr) (lower triangle)
};

HWY_INLINE hn::Vec<DF> LoadCols(DF d, const float* p, size_t n, size_t NL) {
  if (n >= NL) return hn::LoadU(d, p);
  return hn::MaskedLoad(hn::FirstN(d, n), d, p);
}

HWY_INLINE void StoreCols(DF d, hn::Vec<DF> v, float* p, size_t n, size_t NL) {
  if (n >= NL) return hn::StoreU(v, d, p);
  hn::BlendedStore(v, hn::FirstN(d, n), d, p);
}

// One kMr x (2 vectors) tile: rows a[r] (k-contiguous), B rows at B + k*ldb,
// output rows c[r] (null: not stored), nc <= 2*NL columns.
HWY_INLINE void GemmTile(DF d, size_t K, const float* const* a, const float* B, size_t ldb, float* const* c, size_t nc,
                         bool accumulate) {
  const size_t NL = hn::Lanes(d);
  const size_t n0 = std::min(nc, NL), n1 = nc > NL ? nc - NL : 0;
  auto v00 = hn::Zero(d), v01 = hn::Zero(d), v10 = hn::Zero(d), v11 = hn::Zero(d);
  auto v20 = hn::Zero(d), v21 = hn::Zero(d), v30 = hn::Zero(d), v31 = hn::Zero(d);
  if (accumulate) {
    if (c[0]) v00 = LoadCols(d, c[0], n0, NL), v01 = n1 ? LoadCols(d, c[0] + NL, n1, NL) : v01;
    if (c[1]) v10 = LoadCols(d, c[1], n0, NL), v11 = n1 ? LoadCols(d, c[1] + NL, n1, NL) : v11;
    if (c[2]) v20 = LoadCols(d, c[2], n0, NL), v21 = n1 ? LoadCols(d, c[2] + NL, n1, NL) : v21;
    if (c[3]) v30 = LoadCols(d, c[3], n0, NL), v31 = n1 ? LoadCols(d, c[3] + NL, n1, NL) : v31;
  }
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
  if (n1 == NL) {
    for (size_t k = 0; k < K; ++k) {
      const float* bk = B + k * ldb;
      const auto b0 = hn::LoadU(d, bk), b1 = hn::LoadU(d, bk + NL);
      const auto x0 = hn::Set(d, a0[k]), x1 = hn::Set(d, a1[k]);
      v00 = hn::MulAdd(x0, b0, v00), v01 = hn::MulAdd(x0, b1, v01);
      v10 = hn::MulAdd(x1, b0, v10), v11 = hn::MulAdd(x1, b1, v11);
      const auto x2 = hn::Set(d, a2[k]), x3 = hn::Set(d, a3[k]);
      v20 = hn::MulAdd(x2, b0, v20), v21 = hn::MulAdd(x2, b1, v21);
      v30 = hn::MulAdd(x3, b0, v30), v31 = hn::MulAdd(x3, b1, v31);
    }
  } else {
    const auto m0 = hn::FirstN(d, n0), m1 = hn::FirstN(d, n1);
    for (size_t k = 0; k < K; ++k) {
      const float* bk = B + k * ldb;
      const auto b0 = hn::MaskedLoad(m0, d, bk);
      const auto b1 = n1 ? hn::MaskedLoad(m1, d, bk + NL) : hn::Zero(d);
      const auto x0 = hn::Set(d, a0[k]), x1 = hn::Set(d, a1[k]);
      v00 = hn::MulAdd(x0, b0, v00), v01 = hn::MulAdd(x0, b1, v01);
      v10 = hn::MulAdd(x1, b0, v10), v11 = hn::MulAdd(x1, b1, v11);
      const auto x2 = hn::Set(d, a2[k]), x3 = hn::Set(d, a3[k]);
      v20 = hn::MulAdd(x2, b0, v20), v21 = hn::MulAdd(x2, b1, v21);
      v30 = hn::MulAdd(x3, b0, v30), v31 = hn::MulAdd(x3, b1, v31);
    }
  }
  if (c[0]) StoreCols(d, v00, c[0], n0, NL), n1 ? StoreCols(d, v01, c[0] + NL, n1, NL) : void();
  if (c[1]) StoreCols(d, v10, c[1], n0, NL), n1 ? StoreCols(d, v11, c[1] + NL, n1, NL) : void();
  if (c[2]) StoreCols(d, v20, c[2], n0, NL), n1 ? StoreCols(d, v21, c[2] + NL, n1, NL) : void();
  if (c[3]) StoreCols(d, v30, c[3], n0, NL), n1 ? StoreCols(d, v31, c[3] + NL, n1, NL) : void();
}

// Out (M x ncols, ldc) (+)= A (M x K, lda) · B (K x ncols, ldb); `zeros` holds
// at least K zeros (the A row of a missing tail row).
static void Gemm(size_t M, size_t ncols, size_t K, const float* A, size_t lda, const float* B, size_t ldb, float* out,
          size_t ldc, bool accumulate, Tri tri, const float* zeros) {
  const DF d;
  const size_t W = 2 * hn::Lanes(d);
  for (size_t i0 = 0; i0 < M; i0 += kMr) {
    const float* a[kMr];
    float* c[kMr];
    for (size_t r = 0; r < kMr; ++r) {
      const bool in = i0 + r < M;
      a[r] = in ? A + (i0 + r) * lda : zeros;
      c[r] = in ? out + (i0 + r) * ldc : nullptr;
    }
    const size_t lim = i0 + kMr;
    const size_t kk = tri == Tri::kLimitK ? std::min(K, lim) : K;
    const size_t nn = tri == Tri::kLimitCols ? std::min(ncols, lim) : ncols;
    for (size_t j = 0; j < nn; j += W) {
      float* cj[kMr] = {c[0] ? c[0] + j : nullptr, c[1] ? c[1] + j : nullptr, c[2] ? c[2] + j : nullptr,
                        c[3] ? c[3] + j : nullptr};
      GemmTile(d, kk, a, B + j, ldb, cj, std::min(W, nn - j), accumulate);
    }
  }
}

// SSD in matrix form. Loop order: chunk, then heads; the group's C·Bᵀ (and Bᵀ)
// is built once per chunk and shared by the heads of the group. The carried
// state of every head in [h0, h1) is kept transposed (Hᵀ: [N][P]) in scratch
// for the whole call, so all four products are plain row-major GEMMs:
//   CB   (L x L, lower)  = C  (L x N) · Bᵀ (N x L)              per group
//   Y    (L x P)         = diag(e^Λ) · C (L x N) · Hᵀ (N x P) + D·X
//   Y   += M (L x L, lower) · X (L x P),  M[l][s] = CB[l][s]·e^{Λ_l-Λ_s}·Δ_s
//   Hᵀ   = e^{Λ_{L-1}} Hᵀ + Bᵀ (N x L) · Xw (L x P),  Xw[s] = e^{Λ_{L-1}-Λ_s}·Δ_s·X[s]
void SsdImpl(const Scan2Args& a, int64_t chunk, int64_t h0, int64_t h1) {
  const DF d;
  const size_t NL = hn::Lanes(d), N = (size_t)a.N, P = (size_t)a.P;
  const int64_t hpg = a.H / a.G;
  if (chunk < 1) chunk = 1;
  const size_t Q = (size_t)chunk, nh = (size_t)(h1 - h0), PN = P * N;
  thread_local std::vector<double> lam;
  thread_local std::vector<float> dts, ev, cb, bt, m, xw, ht, zeros, tmp;
  auto grow = [](auto& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  grow(lam, Q), grow(dts, Q + NL), grow(ev, Q), grow(cb, Q * Q), grow(bt, N * Q), grow(m, Q * Q + NL);
  grow(xw, Q * P), grow(ht, nh * PN), grow(tmp, Q + NL);
  if (zeros.size() < std::max(Q, N)) zeros.assign(std::max(Q, N), 0.0f);

  // State in: H [P][N] -> Hᵀ [N][P].
  for (size_t i = 0; i < nh; ++i) {
    const float* H = a.state + (h0 + (int64_t)i) * a.P * a.N;
    float* T = ht.data() + i * PN;
    for (size_t p = 0; p < P; ++p)
      for (size_t n = 0; n < N; ++n) T[n * P + p] = H[p * N + n];
  }

  for (int64_t t0 = 0; t0 < a.T; t0 += chunk) {
    const size_t L = (size_t)std::min(chunk, a.T - t0);
    const float* Xc = a.x + t0 * a.ldx;
    const float* Bc = a.B + t0 * a.ldbc;
    const float* Cc = a.C + t0 * a.ldbc;
    float* Yc = a.y + t0 * a.ldy;
    int64_t g_cur = -1;
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t g = h / hpg;
      const float* Bg = Bc + g * a.N;
      const float* Cg = Cc + g * a.N;
      if (g != g_cur) {
        g_cur = g;
        for (size_t s = 0; s < L; ++s)
          for (size_t n = 0; n < N; ++n) bt[n * Q + s] = Bg[s * (size_t)a.ldbc + n];
        Gemm(L, L, N, Cg, (size_t)a.ldbc, bt.data(), Q, cb.data(), Q, false, Tri::kLimitCols, zeros.data());
      }
      // Per-head decays.
      double cum = 0.0;
      for (size_t l = 0; l < L; ++l) {
        float dtv = a.dt[(t0 + (int64_t)l) * a.lddt + h];
        if (a.dt_bias) dtv = dtv + a.dt_bias[h];
        dts[l] = softplus(dtv);
        cum += (double)(dts[l] * a.A[h]);
        lam[l] = cum;
      }
      for (size_t l = 0; l < L; ++l) tmp[l] = (float)lam[l];
      for (size_t l = 0; l < L; l += NL) {
        const size_t c = std::min(NL, L - l);
        StoreN(d, hn::Exp(d, LoadN(d, tmp.data() + l, c)), ev.data() + l, c);
      }
      // M (lower triangle; zero up to the row tile's diagonal block edge).
      for (size_t l = 0; l < L; ++l) {
        float* ml = m.data() + l * Q;
        for (size_t s = 0; s <= l; ++s) ml[s] = (float)(lam[l] - lam[s]);
        for (size_t s = 0; s <= l; s += NL) {
          const size_t c = std::min(NL, l + 1 - s);
          const auto e = hn::Exp(d, LoadN(d, ml + s, c));
          StoreN(d, hn::Mul(hn::Mul(LoadN(d, cb.data() + l * Q + s, c), e), LoadN(d, dts.data() + s, c)), ml + s, c);
        }
        const size_t edge = std::min(L, (l / kMr + 1) * kMr);
        for (size_t s = l + 1; s < edge; ++s) ml[s] = 0.0f;
      }
      const size_t hi = (size_t)(h - h0);
      float* Ht = ht.data() + hi * PN;
      const float* Xh = Xc + h * a.P;
      float* Yh = Yc + h * a.P;
      // Inter-chunk: Y = e^Λ ⊙ (C · Hᵀ) + D·x.
      Gemm(L, P, N, Cg, (size_t)a.ldbc, Ht, P, Yh, (size_t)a.ldy, false, Tri::kNone, zeros.data());
      const auto vD = hn::Set(d, a.d_skip ? a.d_skip[h] : 0.0f);
      for (size_t l = 0; l < L; ++l) {
        const auto vE = hn::Set(d, ev[l]);
        float* yl = Yh + l * (size_t)a.ldy;
        const float* xl = Xh + l * (size_t)a.ldx;
        for (size_t p = 0; p < P; p += NL) {
          const size_t c = std::min(NL, P - p);
          StoreN(d, hn::MulAdd(vD, LoadN(d, xl + p, c), hn::Mul(vE, LoadN(d, yl + p, c))), yl + p, c);
        }
      }
      // Intra-chunk: Y += M · X.
      Gemm(L, P, L, m.data(), Q, Xh, (size_t)a.ldx, Yh, (size_t)a.ldy, true, Tri::kLimitK, zeros.data());
      // State: Hᵀ = e^{Λ_end} Hᵀ + Bᵀ · Xw.
      const double lend = lam[L - 1];
      for (size_t s = 0; s < L; ++s) {
        const auto w = hn::Set(d, std::exp((float)(lend - lam[s])) * dts[s]);
        const float* xs = Xh + s * (size_t)a.ldx;
        float* o = xw.data() + s * P;
        for (size_t p = 0; p < P; p += NL) {
          const size_t c = std::min(NL, P - p);
          StoreN(d, hn::Mul(w, LoadN(d, xs + p, c)), o + p, c);
        }
      }
      const auto dend = hn::Set(d, ev[L - 1]);
      for (size_t i = 0; i < PN; i += NL) {
        const size_t c = std::min(NL, PN - i);
        StoreN(d, hn::Mul(LoadN(d, Ht + i, c), dend), Ht + i, c);
      }
      Gemm(N, P, L, bt.data(), Q, xw.data(), P, Ht, P, true, Tri::kNone, zeros.data());
    }
  }

  // State out: Hᵀ -> H.
  for (size_t i = 0; i < nh; ++i) {
    float* H = a.state + (h0 + (int64_t)i) * a.P * a.N;
    const float* T = ht.data() + i * PN;
    for (size_t p = 0; p < P; ++p)
      for (size_t n = 0; n < N; ++n) H[p * N + n] = T[n * P + p];
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
