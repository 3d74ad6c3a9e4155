// Scaled dot-product attention over an f32, f16 or Q8_0 KV cache (kernels/attention.h),
// Highway SIMD with runtime dispatch, two passes per query vector:
//   1. s_j = scale * dot(q, k_j) over the visible keys (optional softcap), kept
//      in a per-thread score buffer; then softmax over the row (kernels::softmax:
//      max-subtracted float exp, double sum, multiplied by float(1/sum)) — the
//      same order of operations as llama.cpp's non-flash path (KQ, scale/mask,
//      soft_max, then V * softmax);
//   2. out = sum_j p_j * v_j, accumulated in float registers with FMAs in key
//      order, over chunks of keys that stay in L1 (and never cross a block of
//      a paged cache: a chunk only decides when the running sums go through
//      `out`, which is exact, so chunk boundaries never change a bit).
// Paged K / V (KvRows::blocks) are read through a block table: every key row
// is addressed on its own (Dot4 takes four row pointers), so the arithmetic
// per key and the accumulation order are those of contiguous rows.
// Work units are (block of query rows, KV head, block of the heads sharing it),
// so K/V rows are loaded once for every query vector in the unit (GQA and
// prefill reuse); units are taken from an atomic counter, largest first.
// Q8_0 rows that several query vectors of a unit read are dequantized to f32
// once per unit into a per-thread buffer (exact), not once per query vector;
// f16 rows are widened in registers as they are read (a copy measured no faster).
//
// Invariants: every output element is a function of its own (query, head) only
// — dot products use the same accumulator layout whether computed one key or
// four keys at a time, and every per-row vector pass is relative to the row
// start — so results are bit-identical for any unit shape, thread count or
// schedule. The hot path does not allocate once the per-thread buffers have
// grown to the largest shape seen. A query row that sees no key gets zeros.
//
// Precision / tolerance vs ref::attention (tests/kernels/attention_test.cpp):
// float dot products (FMA, two accumulators, fixed reduction tree), softmax sum
// in double, float PV accumulation in key order; against the double reference
// |out - ref| <= 3e-5 for q, k, v in [-1, 1], scale 1/sqrt(head_dim),
// head_dim <= 128, n_kv <= ~1500 (outputs are bounded by max|v| = 1).
#include "kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "core/fp16.h"
#include "quant/legacy_blocks.h"
#include "kernels/ops.h"

#ifndef CHIMERA_KERNELS_ATTENTION_ONCE_
#define CHIMERA_KERNELS_ATTENTION_ONCE_
namespace chimera::kernels::attn_detail {
// K / V rows as a block table (contiguous rows are one block of 2^62 rows).
struct Table {
  const void* const* blocks;
  int shift;   // log2(rows per block)
  int64_t ld;  // elements per row
};
// Everything a unit needs; shared by all Highway targets.
struct Task {
  const AttentionParams* p;
  const float* q;
  int64_t ldq, q_pos0;
  Table k, v;
  KvType k_type, v_type;
  int64_t n_kv;
  float* out;
  int64_t ldo;
};
// One unit: query rows [r0, r1), KV head g, query heads [h0, h1) of that group.
// scores holds (r1-r0)*(h1-h0) rows of `span` floats; lo/hi the same count.
struct Unit {
  int64_t r0, r1, g, h0, h1;
};
// A Q8_0 block of the KV cache (quant::block_q8_0's layout).
struct Q8Block {
  uint16_t d;
  int8_t qs[32];
};
static_assert(sizeof(Q8Block) == 34);
inline float f16_bits_to_f32(uint16_t h) { return f16_to_f32(h); }
// Elements per storage unit of a row pointer of type T.
template <class T>
constexpr int64_t kKvUnit = std::is_same_v<T, Q8Block> ? 32 : 1;
// Row pointers of one KV head (element offset `off` into every row), in
// storage units of T.
template <class T>
struct RowsOf {
  const void* const* blocks;
  int shift;
  int64_t mask, ld, off;  // ld, off in units of T
  RowsOf(const Table& t, int64_t off_elems)
      : blocks(t.blocks),
        shift(t.shift),
        mask((int64_t(1) << t.shift) - 1),
        ld(t.ld / kKvUnit<T>),
        off(off_elems / kKvUnit<T>) {}
  const T* operator()(int64_t j) const { return static_cast<const T*>(blocks[j >> shift]) + (j & mask) * ld + off; }
  // First row of the block after the one holding row j.
  int64_t block_end(int64_t j) const { return ((j >> shift) + 1) << shift; }
};
// Keys per pass-2 chunk (their V rows stay in L1 while every query vector of
// the unit accumulates them).
inline int64_t pv_chunk_keys(int64_t hd) { return std::max<int64_t>(16, 6144 / hd); }
// Floats of the per-thread buffer that Q8_0 K / V rows are dequantized into
// once per unit (RunUnit): four K rows, or one pass-2 chunk of V.
inline int64_t widened_floats(int64_t hd) { return std::max<int64_t>(4, pv_chunk_keys(hd)) * hd; }
inline void key_range(const AttentionParams& p, int64_t pos, int64_t n_kv, int64_t* lo, int64_t* hi) {
  int64_t h = p.causal ? std::min(n_kv, pos + 1) : n_kv;
  int64_t l = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
  h = std::max<int64_t>(h, 0);
  *lo = std::min(l, h);
  *hi = h;
}
}  // namespace chimera::kernels::attn_detail
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

HWY_BEFORE_NAMESPACE();
namespace chimera::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using attn_detail::Task;
using attn_detail::Unit;

// Elements i.. of a K / V row as one f32 vector, widened exactly. Row
// pointers are in storage units (KvUnit): elements, or 32-element Q8_0 blocks
// (a vector never straddles a block: lane counts divide 32 and i is a
// multiple of the lane count).
template <class D>
HWY_INLINE hn::Vec<D> LoadKv(D d, const float* HWY_RESTRICT p, size_t i) {
  return hn::LoadU(d, p + i);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadKv(D d, const hwy::float16_t* HWY_RESTRICT p, size_t i) {
  const hn::Rebind<hwy::float16_t, D> dh;
  return hn::PromoteTo(d, hn::LoadU(dh, p + i));
}
template <class D>
HWY_INLINE hn::Vec<D> LoadKv(D d, const attn_detail::Q8Block* HWY_RESTRICT p, size_t i) {
  const attn_detail::Q8Block& b = p[i / 32];
  const hn::Rebind<int8_t, D> d8;
  const hn::Rebind<int32_t, D> d32;
  const hn::Vec<D> q = hn::ConvertTo(d, hn::PromoteTo(d32, hn::LoadU(d8, b.qs + i % 32)));
  return hn::Mul(q, hn::Set(d, attn_detail::f16_bits_to_f32(b.d)));
}

// Horizontal sums of four vectors into out[0..4). One fixed tree for every
// slot (pairwise within 128-bit blocks, then the blocks folded by halves), so
// Reduce4(x, x, x, x)[0] equals Reduce4(x, b, c, e)[0] bit for bit. Needs
// about a third of the shuffles of four separate SumOfLanes.
#if HWY_TARGET != HWY_SCALAR  // the scalar target has no block shuffles
template <class D>
HWY_INLINE void FoldStore4(D d, hn::Vec<D> s, float* out) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    FoldStore4(dh, hn::Add(hn::LowerHalf(dh, s), hn::UpperHalf(dh, s)), out);
  } else {
    hn::StoreU(s, d, out);
  }
}
#endif

template <class D, class V = hn::Vec<D>>
HWY_INLINE void Reduce4(D d, V a, V b, V c, V e, float* HWY_RESTRICT out) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (hn::MaxLanes(D()) >= 4) {
    const hn::Repartition<uint64_t, D> du;
    const V ab = hn::Add(hn::InterleaveLower(d, a, b), hn::InterleaveUpper(d, a, b));  // a02 b02 a13 b13
    const V ce = hn::Add(hn::InterleaveLower(d, c, e), hn::InterleaveUpper(d, c, e));
    const auto ab64 = hn::BitCast(du, ab), ce64 = hn::BitCast(du, ce);
    const V s = hn::Add(hn::BitCast(d, hn::InterleaveLower(du, ab64, ce64)),
                        hn::BitCast(d, hn::InterleaveUpper(du, ab64, ce64)));  // a b c e per block
    FoldStore4(d, s, out);
    return;
  }
#endif
  {
    out[0] = hn::GetLane(hn::SumOfLanes(d, a));
    out[1] = hn::GetLane(hn::SumOfLanes(d, b));
    out[2] = hn::GetLane(hn::SumOfLanes(d, c));
    out[3] = hn::GetLane(hn::SumOfLanes(d, e));
  }
}

// dot(q, k) with two accumulators (even / odd vectors); hd % Lanes(d) == 0.
template <class D, class TK>
HWY_INLINE float Dot1(D d, const float* HWY_RESTRICT q, const TK* HWY_RESTRICT k, size_t hd) {
  const size_t N = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * N <= hd; i += 2 * N) {
    a0 = hn::MulAdd(hn::LoadU(d, q + i), LoadKv(d, k, i), a0);
    a1 = hn::MulAdd(hn::LoadU(d, q + i + N), LoadKv(d, k, i + N), a1);
  }
  if (i < hd) a0 = hn::MulAdd(hn::LoadU(d, q + i), LoadKv(d, k, i), a0);
  const auto s = hn::Add(a0, a1);
  float r[4];
  Reduce4(d, s, s, s, s, r);
  return r[0];
}

// Four keys k, k1, k2, k3 at once, bit-identical to four Dot1 calls.
template <class D, class TK>
HWY_INLINE void Dot4(D d, const float* HWY_RESTRICT q, const TK* HWY_RESTRICT k, const TK* HWY_RESTRICT k1,
                     const TK* HWY_RESTRICT k2, const TK* HWY_RESTRICT k3, size_t hd, float* HWY_RESTRICT s) {
  const size_t N = hn::Lanes(d);
  auto a0 = hn::Zero(d), b0 = hn::Zero(d), c0 = hn::Zero(d), e0 = hn::Zero(d);
  auto a1 = hn::Zero(d), b1 = hn::Zero(d), c1 = hn::Zero(d), e1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * N <= hd; i += 2 * N) {
    const auto q0 = hn::LoadU(d, q + i), q1 = hn::LoadU(d, q + i + N);
    a0 = hn::MulAdd(q0, LoadKv(d, k, i), a0);
    b0 = hn::MulAdd(q0, LoadKv(d, k1, i), b0);
    c0 = hn::MulAdd(q0, LoadKv(d, k2, i), c0);
    e0 = hn::MulAdd(q0, LoadKv(d, k3, i), e0);
    a1 = hn::MulAdd(q1, LoadKv(d, k, i + N), a1);
    b1 = hn::MulAdd(q1, LoadKv(d, k1, i + N), b1);
    c1 = hn::MulAdd(q1, LoadKv(d, k2, i + N), c1);
    e1 = hn::MulAdd(q1, LoadKv(d, k3, i + N), e1);
  }
  if (i < hd) {
    const auto q0 = hn::LoadU(d, q + i);
    a0 = hn::MulAdd(q0, LoadKv(d, k, i), a0);
    b0 = hn::MulAdd(q0, LoadKv(d, k1, i), b0);
    c0 = hn::MulAdd(q0, LoadKv(d, k2, i), c0);
    e0 = hn::MulAdd(q0, LoadKv(d, k3, i), e0);
  }
  Reduce4(d, hn::Add(a0, a1), hn::Add(b0, b1), hn::Add(c0, c1), hn::Add(e0, e1), s);
}

// s = softcap * tanh(s / softcap) over a row; the tail goes through a padded
// vector so each element sees the same instructions wherever the row starts.
template <class D>
HWY_INLINE void Softcap(D d, float* s, size_t n, float cap) {
  const size_t N = hn::Lanes(d);
  const auto vc = hn::Set(d, cap);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Mul(vc, hn::Tanh(d, hn::Div(hn::LoadU(d, s + i), vc))), d, s + i);
  }
  if (i < n) {
    HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)] = {};
    for (size_t j = 0; j < n - i; ++j) buf[j] = s[i + j];
    hn::Store(hn::Mul(vc, hn::Tanh(d, hn::Div(hn::Load(d, buf), vc))), d, buf);
    for (size_t j = 0; j < n - i; ++j) s[i + j] = buf[j];
  }
}

// acc[0..NV) += p * v[0..NV*N) for each visible key, then stored to o.
// (v: row of key 0 in storage units, c0: first element, ldv: row stride in units.)
template <int NV, class D, class TV>
HWY_INLINE void AccumulatePV(D d, const float* HWY_RESTRICT prow, const TV* HWY_RESTRICT v, size_t c0, size_t ldv,
                             int64_t n, float* HWY_RESTRICT o) {
  const size_t N = hn::Lanes(d);
  hn::Vec<D> acc[NV];
  for (int t = 0; t < NV; ++t) acc[t] = hn::LoadU(d, o + t * N);
  for (int64_t j = 0; j < n; ++j) {
    const auto pj = hn::Set(d, prow[j]);
    const TV* vj = v + (size_t)j * ldv;
    for (int t = 0; t < NV; ++t) acc[t] = hn::MulAdd(pj, LoadKv(d, vj, c0 + t * N), acc[t]);
  }
  for (int t = 0; t < NV; ++t) hn::StoreU(acc[t], d, o + t * N);
}

// Fetches the cache lines of row j of `rows` (bytes of one head's row) into
// L1. A head's K / V rows are `ld` apart (every KV head of a position is one
// row), so a unit reads 2 lines (f16, head_dim 64) of each 1-4 KiB: a stride
// the hardware prefetchers follow only within a page, which left decode at
// long depth (a cache larger than L3) waiting on DRAM latency.
template <class T>
HWY_INLINE void PrefetchRow(const attn_detail::RowsOf<T>& rows, int64_t j, size_t bytes) {
  const uint8_t* r = reinterpret_cast<const uint8_t*>(rows(j));
  for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(r + o);
  __builtin_prefetch(r + bytes - 1);
}

// Rows [j0, j0 + n) of `rows` widened to f32 (exactly) into out, hd floats
// apart; hd % Lanes(d) == 0.
template <class D, class T>
HWY_INLINE void WidenRows(D d, const attn_detail::RowsOf<T>& rows, int64_t j0, int64_t n, size_t hd,
                          float* HWY_RESTRICT out) {
  const size_t N = hn::Lanes(d);
  for (int64_t j = 0; j < n; ++j) {
    const T* r = rows(j0 + j);
    float* o = out + (size_t)j * hd;
    for (size_t i = 0; i < hd; i += N) hn::StoreU(LoadKv(d, r, i), d, o + i);
  }
}

// widened: attn_detail::widened_floats(head_dim) floats of scratch. Where
// several query vectors share a Q8_0 K or V row, the row is dequantized to
// f32 once into it and every query vector reads the f32 copy: the same values
// (the dequantization is exact in f32: q * d) through the same FMAs, so the
// bits are those of dequantizing the row for each query vector, at 1/M of the
// work (decode with GQA: M = the heads of a group).
template <class TK, class TV, class D>
HWY_NOINLINE void RunUnit(D d, const Task& t, const Unit& u, float* scores, int64_t* lo, int64_t* hi,
                          float* widened) {
  const AttentionParams& p = *t.p;
  const size_t hd = (size_t)p.head_dim;
  const size_t N = hn::Lanes(d);
  const int64_t nh = u.h1 - u.h0;
  const int64_t M = (u.r1 - u.r0) * nh;
  int64_t jmin = t.n_kv, jmax = 0;
  for (int64_t r = u.r0; r < u.r1; ++r) {
    int64_t l, h;
    attn_detail::key_range(p, t.q_pos0 + r, t.n_kv, &l, &h);
    for (int64_t m = (r - u.r0) * nh; m < (r - u.r0 + 1) * nh; ++m) {
      lo[m] = l;
      hi[m] = h;
    }
    if (l < h) {
      jmin = std::min(jmin, l);
      jmax = std::max(jmax, h);
    }
  }
  auto qrow = [&](int64_t m) { return t.q + (u.r0 + m / nh) * t.ldq + (u.h0 + m % nh) * (int64_t)hd; };
  auto orow = [&](int64_t m) { return t.out + (u.r0 + m / nh) * t.ldo + (u.h0 + m % nh) * (int64_t)hd; };
  for (int64_t m = 0; m < M; ++m) std::fill(orow(m), orow(m) + hd, 0.0f);
  if (jmin >= jmax) return;
  const int64_t span = jmax - jmin;
  // Rows of KV head g (pointers in storage units, kKvUnit).
  const attn_detail::RowsOf<TK> krow(t.k, u.g * (int64_t)hd);
  const attn_detail::RowsOf<TV> vrow(t.v, u.g * (int64_t)hd);

  // Pass 1: scores, four keys at a time where all four are visible (keys
  // j..je-1, row(c) the pointer to key c's row of head g).
  auto scores_of = [&](int64_t j, int64_t je, auto row) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(row(j))>>;
    const T* k4[4] = {row(j), nullptr, nullptr, nullptr};
    if (je - j == 4)
      for (int c = 1; c < 4; ++c) k4[c] = row(j + c);
    for (int64_t m = 0; m < M; ++m) {
      float* srow = scores + m * span;  // index j - jmin
      const float* qm = qrow(m);
      if (j >= lo[m] && je - j == 4 && je <= hi[m]) {
        Dot4(d, qm, k4[0], k4[1], k4[2], k4[3], hd, srow + (j - jmin));
        for (int64_t c = j; c < je; ++c) srow[c - jmin] *= p.scale;
      } else {
        for (int64_t c = std::max(j, lo[m]); c < std::min(je, hi[m]); ++c) {
          srow[c - jmin] = Dot1(d, qm, row(c), hd) * p.scale;
        }
      }
    }
  };
  // Only Q8_0 rows are widened: an f16 row is one exact PromoteTo per vector
  // (F16C's vcvtph2ps from memory), and copying it first measured no faster
  // (BM_AttentionDecodeTypedKv, 8192 keys: f16 within the busy machine's
  // noise; Q8_0 on 1 thread 8.6-10.9 ms CPU widened vs 11.2-15.1 ms not).
  const bool widen_k = std::is_same_v<TK, attn_detail::Q8Block> && M > 1;
  const bool widen_v = std::is_same_v<TV, attn_detail::Q8Block> && M > 1;
  // Bytes of one head's K / V row, and how far ahead pass 1 fetches K rows.
  const size_t kbytes = hd / attn_detail::kKvUnit<TK> * sizeof(TK);
  const size_t vbytes = hd / attn_detail::kKvUnit<TV> * sizeof(TV);
  constexpr int64_t kAheadKeys = 32;
  for (int64_t j = jmin; j < jmax; j += 4) {
    const int64_t je = std::min(j + 4, jmax);
    for (int64_t c = j + kAheadKeys; c < std::min(je + kAheadKeys, jmax); ++c) PrefetchRow(krow, c, kbytes);
    if (widen_k) {
      WidenRows(d, krow, j, je - j, hd, widened);
      scores_of(j, je, [&](int64_t c) -> const float* { return widened + (size_t)(c - j) * hd; });
    } else {
      scores_of(j, je, krow);
    }
  }
  // Softcap and softmax per query vector, over its own visible range.
  for (int64_t m = 0; m < M; ++m) {
    if (lo[m] >= hi[m]) continue;
    float* row = scores + m * span + (lo[m] - jmin);
    if (p.softcap > 0.f) Softcap(d, row, (size_t)(hi[m] - lo[m]), p.softcap);
    softmax(row, hi[m] - lo[m]);
  }
  // Pass 2: out += p_j * v_j in key order, chunked so the V rows stay in L1
  // (a chunk ends at a block end too, so its rows are ldv apart).
  // Typed V rows are widened once per chunk (widen_v).
  const int64_t kc = attn_detail::pv_chunk_keys((int64_t)hd);
  auto accumulate = [&](int64_t m, int64_t a, int64_t b, auto va, size_t ldv) {
    const float* prow = scores + m * span + (a - jmin);  // p of key a
    float* o = orow(m);
    size_t c = 0;
    for (; c + 4 * N <= hd; c += 4 * N) AccumulatePV<4>(d, prow, va, c, ldv, b - a, o + c);
    for (; c < hd; c += N) AccumulatePV<1>(d, prow, va, c, ldv, b - a, o + c);
  };
  for (int64_t c = jmin; c < std::min(jmin + kc, jmax); ++c) PrefetchRow(vrow, c, vbytes);
  for (int64_t jc = jmin, je = jmin; jc < jmax; jc = je) {
    je = std::min({jc + kc, jmax, vrow.block_end(jc)});
    // The next chunk's V rows (at most kc of them) while this one is summed.
    for (int64_t c = je; c < std::min(je + kc, jmax); ++c) PrefetchRow(vrow, c, vbytes);
    if (widen_v) WidenRows(d, vrow, jc, je - jc, hd, widened);
    for (int64_t m = 0; m < M; ++m) {
      const int64_t a = std::max(jc, lo[m]), b = std::min(je, hi[m]);
      if (a >= b) continue;
      if (widen_v) {
        accumulate(m, a, b, static_cast<const float*>(widened + (size_t)(a - jc) * hd), hd);
      } else {
        accumulate(m, a, b, vrow(a), (size_t)vrow.ld);
      }
    }
  }
}

// Runs one unit with the widest vector whose lane count divides head_dim.
template <class TK, class TV>
void UnitForTypes(const Task& t, const Unit& u, float* scores, int64_t* lo, int64_t* hi, float* w) {
  const size_t hd = (size_t)t.p->head_dim;
  const hn::ScalableTag<float> d;
  if (hd % hn::Lanes(d) == 0) return RunUnit<TK, TV>(d, t, u, scores, lo, hi, w);
#if HWY_TARGET != HWY_SCALAR
  const hn::CappedTag<float, 8> d8;
  if (hd % hn::Lanes(d8) == 0) return RunUnit<TK, TV>(d8, t, u, scores, lo, hi, w);
  const hn::CappedTag<float, 4> d4;
  if (hd % hn::Lanes(d4) == 0) return RunUnit<TK, TV>(d4, t, u, scores, lo, hi, w);
#endif
  const hn::CappedTag<float, 1> d1;
  RunUnit<TK, TV>(d1, t, u, scores, lo, hi, w);
}

template <class TK>
void UnitForK(const Task& t, const Unit& u, float* scores, int64_t* lo, int64_t* hi, float* w) {
  switch (t.v_type) {
    case KvType::kF32: return UnitForTypes<TK, float>(t, u, scores, lo, hi, w);
    case KvType::kF16: return UnitForTypes<TK, hwy::float16_t>(t, u, scores, lo, hi, w);
    case KvType::kQ8_0: return UnitForTypes<TK, attn_detail::Q8Block>(t, u, scores, lo, hi, w);
  }
}

void AttentionUnitImpl(const Task& t, const Unit& u, float* scores, int64_t* lo, int64_t* hi, float* widened) {
  switch (t.k_type) {
    case KvType::kF32: return UnitForK<float>(t, u, scores, lo, hi, widened);
    case KvType::kF16: return UnitForK<hwy::float16_t>(t, u, scores, lo, hi, widened);
    case KvType::kQ8_0: return UnitForK<attn_detail::Q8Block>(t, u, scores, lo, hi, widened);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace chimera::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace chimera::kernels {

HWY_EXPORT(AttentionUnitImpl);

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::kF16: return "f16";
    case KvType::kQ8_0: return "q8_0";
    default: return "f32";
  }
}

void kv_store_rows(KvType type, int64_t width, const float* src, int64_t ld, int64_t n, uint8_t* dst) {
  const size_t rb = kv_row_bytes(type, width);
  for (int64_t t = 0; t < n; ++t) {
    const float* s = src + t * ld;
    uint8_t* row = dst + (size_t)t * rb;
    if (type == KvType::kF32) {
      std::memcpy(row, s, rb);
    } else if (type == KvType::kF16) {
      auto* d = reinterpret_cast<uint16_t*>(row);
      for (int64_t i = 0; i < width; ++i) d[i] = f32_to_f16(s[i]);
    } else {
      quant::quantize_row_q8_0(s, reinterpret_cast<quant::block_q8_0*>(row), width);
    }
  }
}

void attention(const AttentionParams& p, const float* q, int64_t n_q, int64_t ldq, int64_t q_pos0, KvRows k,
               KvRows v, int64_t n_kv, float* out, int64_t ldo, ThreadPool* pool) {
  if (n_q <= 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.head_dim <= 0 || p.n_head % p.n_head_kv != 0) return;
  if ((k.type == KvType::kQ8_0 || v.type == KvType::kQ8_0) && p.head_dim % 32 != 0) {
    std::fprintf(stderr, "chimera: internal error: Q8_0 KV rows need head_dim %% 32 == 0 (got %lld)\n",
                 (long long)p.head_dim);
    std::abort();
  }
  const int64_t n_rep = p.n_head / p.n_head_kv;
  const int nt = pool ? pool->size() : 1;
  // Heads per unit: the whole group (K/V read once for all of them) unless
  // that leaves too few units to keep every thread busy (decode with few KV heads).
  int64_t hb = n_rep;
  auto n_units = [&](int64_t hb_, int64_t qb_) {
    return ((n_q + qb_ - 1) / qb_) * p.n_head_kv * ((n_rep + hb_ - 1) / hb_);
  };
  while (hb > 1 && n_units(hb, std::max<int64_t>(1, 16 / hb)) < 2 * nt) hb = (hb + 1) / 2;
  // Query rows per unit: about 16 query vectors share each K/V row load.
  const int64_t qb = std::min(n_q, std::max<int64_t>(1, 16 / hb));
  const int64_t n_qb = (n_q + qb - 1) / qb, n_hb = (n_rep + hb - 1) / hb;
  const int64_t total = n_qb * p.n_head_kv * n_hb;
  // Contiguous rows: one block of 2^62 rows (the block index is always 0).
  const void* const k_one[1] = {k.data};
  const void* const v_one[1] = {v.data};
  auto table = [](const KvRows& r, const void* const* one) {
    if (!r.blocks) return attn_detail::Table{one, 62, r.ld};
    if (r.block_rows <= 0 || (r.block_rows & (r.block_rows - 1)) != 0) {
      std::fprintf(stderr, "chimera: internal error: KV block rows must be a power of two (got %lld)\n",
                   (long long)r.block_rows);
      std::abort();
    }
    return attn_detail::Table{r.blocks, std::countr_zero((uint64_t)r.block_rows), r.ld};
  };
  const attn_detail::Task task{&p, q, ldq, q_pos0, table(k, k_one), table(v, v_one), k.type, v.type, n_kv, out, ldo};

  std::atomic<int64_t> next{0};
  auto worker = [&](int, int) {
    thread_local std::vector<float> scores;
    thread_local std::vector<int64_t> bounds;
    thread_local std::vector<float> widened;  // Q8_0 K / V rows as f32 (RunUnit)
    if (k.type == KvType::kQ8_0 || v.type == KvType::kQ8_0) {
      const size_t wn = (size_t)attn_detail::widened_floats(p.head_dim);
      if (widened.size() < wn) widened.resize(wn);
    }
    for (;;) {
      const int64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= total) break;
      // Later query blocks see more keys under a causal mask: hand them out first.
      const int64_t per_qb = p.n_head_kv * n_hb;
      const int64_t b = n_qb - 1 - i / per_qb, rest = i % per_qb;
      attn_detail::Unit u;
      u.r0 = b * qb;
      u.r1 = std::min(n_q, u.r0 + qb);
      u.g = rest / n_hb;
      u.h0 = u.g * n_rep + (rest % n_hb) * hb;
      u.h1 = std::min(u.g * n_rep + n_rep, u.h0 + hb);
      const int64_t m = (u.r1 - u.r0) * (u.h1 - u.h0);
      const size_t need = (size_t)(m * std::max<int64_t>(n_kv, 1));
      if (scores.size() < need) scores.resize(need);
      if (bounds.size() < (size_t)(2 * m)) bounds.resize((size_t)(2 * m));
      HWY_DYNAMIC_DISPATCH(AttentionUnitImpl)(task, u, scores.data(), bounds.data(), bounds.data() + m, widened.data());
    }
  };
  if (nt <= 1 || total == 1) {
    worker(0, 1);
  } else {
    pool->run_on_all(worker);
  }
}

}  // namespace chimera::kernels
#endif  // HWY_ONCE
