// AVX-512 ternary matmul kernels (Isa::kAvx512, Isa::kAvx512Vnni): TQ2_0 /
// TQ1_0 / I2_S weights x Q8_K activations, bit-identical to Isa::kScalar (the
// integer lane sums S_l of matmul_ternary.h are exact; the f32 updates are the
// same operations in the same order).
//
// TQ2_0 / I2_S: TqAct8 plane-order activations. A block's 64 qs bytes x give
// plane n = (x >> shift_n) & 3 (TQ2_0 shift 2n, I2_S shift 6 - 2n), whose
// bytes are exactly activation chunk n; vpdpbusd (VNNI) or vpmaddubsw +
// vpmaddwd(1) into 16 int32 lanes, lane L of class L mod 8, then the upper
// 256 bits fold onto the lower. Per 256 elements: 1 load, 4 shift/and, 4 dots.
//
// TQ1_0: TqAct16 int16 activations. The base-3 bytes are widened to u16 and
// trit n of byte b is computed as mulhi_u16(mullo_u16(b, 3^n << 8), 3)
// = (((b * 3^n) mod 256) * 3) >> 8 (ggml's decoder); 9 vectors of 32 trits:
//   0..4: qs[0..31] trit n          = elements 32n + i
//   5..7: qs[32..47] trits 2c | 2c+1 in the two 256-bit halves
//         = elements 160 + 32c + i (c = 2: upper half zero)
//   8:    qh[0..3] trits 0..3 in lanes 16 + 4n + j = elements 240 + 4n + j
//         (lower half zero)
// vpdpwssd (VNNI) or vpmaddwd into 16 int32 lanes, lane j of class j / 2,
// then pairs are added and compacted to 8 lanes.
//
// GEMV (m == 1) decodes in registers straight from the weights, with an L2
// prefetch of the same block two rows ahead (measured on a loaded 2-vCPU
// Zen 4 VM: 2 rows ~ none in a cold microbenchmark, slightly ahead end to
// end; 4-16 KiB ahead was 5-25% slower — re-measure on a quiet machine).
// GEMM decodes each weight row once into a plane-order panel and runs up to 4
// activation rows per panel pass.
//
// Load-time repacked TQ2_0 and TQ1_0 (2-bit grouped layout, matmul_ternary.h):
// gemv_packed_step (the decode GEMV, kTqStreams groups at once) /
// gemm_packed below, bit-identical to the storage-layout TQ2_0 kernel (TQ1_0
// by default runs on TqAct8 and the same packed kernel).
#include "kernels/matmul_ternary.h"

#if defined(__x86_64__)

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_tile.h"

#define CHIMERA_T_TQ512 \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define CHIMERA_T_TQ512_INLINE inline __attribute__((always_inline)) CHIMERA_T_TQ512

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

enum class Kind { kTq2, kI2s, kTq1 };

template <Kind K>
struct Geo;
template <>
struct Geo<Kind::kTq2> {
  static constexpr size_t kBytes = sizeof(q::block_tq2_0);  // per 256 elements
  static constexpr int kVecs = 4;
  using Act = TqAct8;
};
template <>
struct Geo<Kind::kI2s> {
  static constexpr size_t kBytes = 64;
  static constexpr int kVecs = 4;
  using Act = TqAct8;
};
template <>
struct Geo<Kind::kTq1> {
  static constexpr size_t kBytes = sizeof(q::block_tq1_0);
  static constexpr int kVecs = 9;
  using Act = TqAct16;
};

struct alignas(64) Vec64 {
  uint8_t b[64];
};

CHIMERA_T_TQ512_INLINE float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Decodes 256 elements into Geo<K>::kVecs vectors; returns the block scale
// (I2_S: 0, the tensor scale is applied by the caller).
template <Kind K>
CHIMERA_T_TQ512_INLINE float decode(const uint8_t* blk, __m512i* t) {
  if constexpr (K == Kind::kTq1) {
    const __m512i three = _mm512_set1_epi16(3);
    const __m512i a = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i*)blk));
    constexpr int16_t p3[5] = {1 << 8, 3 << 8, 9 << 8, 27 << 8, 81 << 8};
    CHIMERA_UNROLL for (int n = 0; n < 5; ++n) t[n] = _mm512_mulhi_epu16(_mm512_mullo_epi16(a, _mm512_set1_epi16(p3[n])), three);
    const __m512i b = _mm512_broadcast_i64x4(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(blk + 32))));
    const __m512i m0 = _mm512_inserti64x4(_mm512_set1_epi16(p3[0]), _mm256_set1_epi16(p3[1]), 1);
    const __m512i m1 = _mm512_inserti64x4(_mm512_set1_epi16(p3[2]), _mm256_set1_epi16(p3[3]), 1);
    const __m512i m2 = _mm512_inserti64x4(_mm512_set1_epi16(p3[4]), _mm256_setzero_si256(), 1);
    t[5] = _mm512_mulhi_epu16(_mm512_mullo_epi16(b, m0), three);
    t[6] = _mm512_mulhi_epu16(_mm512_mullo_epi16(b, m1), three);
    t[7] = _mm512_mulhi_epu16(_mm512_mullo_epi16(b, m2), three);
    uint32_t qh;
    std::memcpy(&qh, blk + 48, 4);
    const __m512i h = _mm512_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)qh)));
    const __m512i mh = _mm512_inserti64x4(_mm512_setzero_si512(),
                                          _mm256_setr_epi16(p3[0], p3[0], p3[0], p3[0], p3[1], p3[1], p3[1], p3[1],
                                                            p3[2], p3[2], p3[2], p3[2], p3[3], p3[3], p3[3], p3[3]),
                                          1);
    t[8] = _mm512_mulhi_epu16(_mm512_mullo_epi16(h, mh), three);
    return f16_at(blk + 52);
  } else {
    const __m512i mask = _mm512_set1_epi8(3);
    // Two 256-bit loads: TQ2_0 blocks (66 bytes) are rarely 64-byte aligned,
    // and a line-splitting 512-bit load measured ~25% slower on cold weights.
    const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)blk)),
                                         _mm256_loadu_si256((const __m256i*)(blk + 32)), 1);
    CHIMERA_UNROLL for (int n = 0; n < 4; ++n) {
      const int sh = K == Kind::kTq2 ? 2 * n : 6 - 2 * n;
      t[n] = _mm512_and_si512(_mm512_srli_epi16(x, sh), mask);
    }
    if constexpr (K == Kind::kTq2) return f16_at(blk + 64);
    return 0.f;
  }
}

// Integer lane sums S_l (before the correction) of one block.
template <Kind K, bool kVnni>
CHIMERA_T_TQ512_INLINE __m256i lanes(const __m512i* t, const typename Geo<K>::Act& a) {
  __m512i s = _mm512_setzero_si512();
  if constexpr (K == Kind::kTq1) {
    CHIMERA_UNROLL for (int c = 0; c < 9; ++c) {
      const __m512i y = _mm512_load_si512((const void*)(a.qs + 32 * c));
      if constexpr (kVnni) {
        s = _mm512_dpwssd_epi32(s, t[c], y);
      } else {
        s = _mm512_add_epi32(s, _mm512_madd_epi16(t[c], y));
      }
    }
    // Lane j has class j / 2: add pairs, keep the even lanes.
    s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
    s = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0), s);
    return _mm512_castsi512_si256(s);
  } else {
    const __m512i ones = _mm512_set1_epi16(1);
    CHIMERA_UNROLL for (int n = 0; n < 4; ++n) {
      const __m512i y = _mm512_load_si512((const void*)(a.qs + 64 * n));
      if constexpr (kVnni) {
        s = _mm512_dpbusd_epi32(s, t[n], y);
      } else {
        s = _mm512_add_epi32(s, _mm512_madd_epi16(_mm512_maddubs_epi16(t[n], y), ones));
      }
    }
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
  }
}

template <Kind K>
CHIMERA_T_TQ512_INLINE __m256 update(__m256i s, const typename Geo<K>::Act& a, float d, __m256 acc) {
  s = _mm256_sub_epi32(s, _mm256_load_si256((const __m256i*)a.corr));
  return _mm256_fmadd_ps(_mm256_set1_ps(a.d * d), _mm256_cvtepi32_ps(s), acc);
}

CHIMERA_T_TQ512_INLINE float finish(__m256 acc) {
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  return detail::tq_finish(l);
}

template <Kind K>
CHIMERA_T_TQ512_INLINE float tensor_scale(const GemmArgs& g) {
  float s = 0.f;
  if constexpr (K == Kind::kI2s) std::memcpy(&s, g.w_tail, sizeof(s));
  return s;
}

template <Kind K, bool kVnni>
CHIMERA_T_TQ512 void gemv(const GemmArgs& g, int64_t r0, int64_t r1) {
  using G = Geo<K>;
  const int64_t nsb = g.k / q::kQK_K;
  const auto* act = reinterpret_cast<const typename G::Act*>(g.a);
  const float ts = tensor_scale<K>(g);
  const size_t pf_off = 2 * g.w_stride;  // two rows ahead (see the file comment)
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* blk = w + (size_t)sb * G::kBytes;
      _mm_prefetch((const char*)(blk + pf_off), _MM_HINT_T1);
      __m512i t[G::kVecs];
      float d = decode<K>(blk, t);
      if constexpr (K == Kind::kI2s) d = ts;
      acc = update<K>(lanes<K, kVnni>(t, act[sb]), act[sb], d, acc);
    }
    g.y[r] = finish(acc);
  }
}

// Panel: per row, kVecs decoded vectors per block + the block scales.
template <Kind K, bool kVnni, int M>
CHIMERA_T_TQ512_INLINE void panel_dot(const __m512i* p, const float* dd, const GemmArgs& g, int64_t nsb, int64_t i,
                                      int64_t r) {
  using G = Geo<K>;
  const typename G::Act* act[M];
  __m256 acc[M];
  CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
    act[mm] = reinterpret_cast<const typename G::Act*>(g.a + (size_t)(i + mm) * g.a_stride);
    acc[mm] = _mm256_setzero_ps();
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const __m512i* t = p + sb * G::kVecs;
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
      acc[mm] = update<K>(lanes<K, kVnni>(t, act[mm][sb]), act[mm][sb], dd[sb], acc[mm]);
    }
  }
  CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) g.y[(i + mm) * g.ldy + r] = finish(acc[mm]);
}

// One weight row decoded into plane-order vectors (vecs per block) and its
// block scales; per thread, grown on demand and reused by every GEMM kernel.
struct RowPanel {
  std::vector<Vec64> v;
  std::vector<float> dd;
  uint8_t* block(int64_t i) { return v[(size_t)i].b; }
};

inline RowPanel& row_panel(int64_t nsb, int vecs) {
  thread_local RowPanel p;
  if (p.v.size() < (size_t)(nsb * vecs)) p.v.resize((size_t)(nsb * vecs));
  if (p.dd.size() < (size_t)nsb) p.dd.resize((size_t)nsb);
  return p;
}

// y[i][r] for every activation row i in [i0, i1) from row r's panel.
template <Kind K, bool kVnni>
CHIMERA_T_TQ512_INLINE void panel_rows(const RowPanel& pr, const GemmArgs& g, int64_t nsb, int64_t i0, int64_t i1,
                                       int64_t r) {
  const auto* p = reinterpret_cast<const __m512i*>(pr.v.data());
  int64_t i = i0;
  for (; i + 4 <= i1; i += 4) panel_dot<K, kVnni, 4>(p, pr.dd.data(), g, nsb, i, r);
  for (; i < i1; ++i) panel_dot<K, kVnni, 1>(p, pr.dd.data(), g, nsb, i, r);
}

template <Kind K, bool kVnni>
CHIMERA_T_TQ512 void gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  if (i1 - i0 == 1) {
    GemmArgs g1 = g;
    g1.a = g.a + (size_t)i0 * g.a_stride;
    g1.y = g.y + i0 * g.ldy;
    gemv<K, kVnni>(g1, r0, r1);
    return;
  }
  using G = Geo<K>;
  const int64_t nsb = g.k / q::kQK_K;
  RowPanel& pr = row_panel(nsb, G::kVecs);
  const float ts = tensor_scale<K>(g);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      __m512i t[G::kVecs];
      const float d = decode<K>(w + (size_t)sb * G::kBytes, t);
      pr.dd[(size_t)sb] = K == Kind::kI2s ? ts : d;
      CHIMERA_UNROLL for (int v = 0; v < G::kVecs; ++v) _mm512_store_si512((void*)pr.block(sb * G::kVecs + v), t[v]);
    }
    panel_rows<K, kVnni>(pr, g, nsb, i0, i1, r);
  }
}

// ---- Repacked TQ2_0 (layout: matmul_ternary.h, kTqGroup rows per group) ----
// idx[p]: lanes of dword 2p in the low 256 bits, 2p + 1 in the high: the
// permute that spreads row 2p's and row 2p + 1's scales over a row pair's halves.
template <int P>
CHIMERA_T_TQ512_INLINE void pair_index(__m512i (&idx)[P]) {
  CHIMERA_UNROLL for (int p = 0; p < P; ++p) {
    idx[p] = _mm512_inserti64x4(_mm512_set1_epi32(2 * p), _mm256_set1_epi32(2 * p + 1), 1);
  }
}

// GEMV step (tq_packed_gemv, matmul_ternary.h): S groups read at once, block
// by block (block sb of group 0, then of group 1, ...: S pages streamed
// together), each block's kTqGroup x 64 bytes from one contiguous,
// line-aligned buffer; the 4 activation vectors of a block are loaded once
// for all S groups; two rows' 16-lane sums fold into one 512-bit vector
// (shuffle_i64x2 + add) so the correction, conversion and FMA run once per
// row pair. pf != 0: the same lines of the groups pf bytes further (the next
// step's) are prefetched into L1, their scales into L2. Session 21 (Zen 5,
// 6 alternating rounds, TQ2_0 cold, 2 threads): into L1 instead of L2
// 35-38 -> 42-44 GB/s at 6912 x 2560 (1 thread 19-21.5 -> 25.5-27), the
// 2560 x 6912 and 2560 x 2560 shapes 1.1-1.5x, bitnet-2b TQ2_0 decode
// +0-10 % (median +6 %); the AVX2 / AVX-VNNI kernels, compute-bound here,
// measured no clear change and keep L2. Per lane the same integer S_l and the same
// f32 operations as gemv<kTq2>, for every S: bit-identical to the
// storage-layout kernel.
template <bool kVnni, int S>
CHIMERA_T_TQ512 void gemv_packed_step(const uint8_t* grp, size_t gbytes, const TqAct8* act, int64_t k, float* y,
                                      size_t pf) {
  constexpr int G = kTqGroup;
  constexpr int P = G / 2;
  static_assert(G == 4 || G == 8);
  const int64_t nsb = k / q::kQK_K;
  const size_t sc_bytes = tq_packed_scale_bytes(k);
  const __m512i mask = _mm512_set1_epi8(3);
  const __m512i ones = _mm512_set1_epi16(1);
  __m512i idx[P];
  pair_index(idx);
  __m512 acc[S][P];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int p = 0; p < P; ++p) acc[s][p] = _mm512_setzero_ps();
    if (pf) gemv_prefetch_l2(grp + s * gbytes + pf, sc_bytes);  // the scales
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const TqAct8& a = act[sb];
    __m512i yv[4];
    CHIMERA_UNROLL for (int n = 0; n < 4; ++n) yv[n] = _mm512_load_si512((const void*)(a.qs + 64 * n));
    const __m512i corr = _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i*)a.corr));
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
      const uint16_t* sc = reinterpret_cast<const uint16_t*>(grp + s * gbytes) + sb * G;
      const uint8_t* blk = grp + s * gbytes + sc_bytes + (size_t)sb * G * 64;
      // The next step's lines of this block into L1 (gemv_prefetch.h's
      // near prefetch at the step distance; the AVX2 levels keep L2).
      if (pf) gemv_step_prefetch<true>(blk + pf, G * 64);
      __m512i sum[G];
      CHIMERA_UNROLL for (int j = 0; j < G; ++j) {
        const __m512i x = _mm512_load_si512((const void*)(blk + 64 * j));
        sum[j] = _mm512_setzero_si512();
        CHIMERA_UNROLL for (int n = 0; n < 4; ++n) {
          const __m512i t = _mm512_and_si512(_mm512_srli_epi16(x, 2 * n), mask);
          if constexpr (kVnni) {
            sum[j] = _mm512_dpbusd_epi32(sum[j], t, yv[n]);
          } else {
            sum[j] = _mm512_add_epi32(sum[j], _mm512_madd_epi16(_mm512_maddubs_epi16(t, yv[n]), ones));
          }
        }
      }
      __m256 d8;
      if constexpr (G == 8) {
        d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)sc));
      } else {
        d8 = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)sc)));
      }
      const __m512 dz = _mm512_castps256_ps512(_mm256_mul_ps(d8, _mm256_set1_ps(a.d)));
      CHIMERA_UNROLL for (int p = 0; p < P; ++p) {
        const __m512i lo = _mm512_shuffle_i64x2(sum[2 * p], sum[2 * p + 1], 0x44);
        const __m512i hi = _mm512_shuffle_i64x2(sum[2 * p], sum[2 * p + 1], 0xEE);
        const __m512i v = _mm512_sub_epi32(_mm512_add_epi32(lo, hi), corr);
        acc[s][p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(idx[p], dz), _mm512_cvtepi32_ps(v), acc[s][p]);
      }
    }
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int p = 0; p < P; ++p) {
      alignas(64) float l[16];
      _mm512_store_ps(l, acc[s][p]);
      y[G * s + 2 * p] = detail::tq_finish(l);
      y[G * s + 2 * p + 1] = detail::tq_finish(l + 8);
    }
  }
}

// GEMM on packed weights: row-pair panels. Each group (kTqGroup rows = P row
// pairs) is decoded once per activation block (detail::act_block_rows) into
// a panel: per pair and block 8 vectors, vector c = 2n + h holding plane n of
// code half h of the pair's first row in its low 256 bits and of its second
// row in the high 256 bits, then the scale vector [d_first x 8 | d_second x 8].
// A tile of M <= kActs activation rows runs over the panel: per pair and
// activation row 8 vpdpbusd (no VNNI: vpmaddubsw, the int16 sum, vpmaddwd)
// with activation chunk c broadcast to both halves leave the exact S_l of the
// first row in lanes 0..7 and of the second row in lanes 8..15 (the lane
// classes of matmul_ternary.h: 32 bytes of a chunk cover the 8 classes once);
// then the correction, one convert, the scale product dy * d for both rows
// and one fma per pair: 4 vector ops per 512 weights x 1 activation row after
// the 8 dot products (the tile before: the per-activation-row decode share,
// two shuffles, an add and a permute more per pair). Same S_l, same f32
// operations in the same order: bit-identical to gemv_packed_step and the
// storage-layout kernel for any tiling.
constexpr int kActs = 4;

struct PairPanel {
  std::vector<Vec64> v;  // [pair][block][8]
  std::vector<Vec64> d;  // [pair][block]: 16 f32 scales
};

inline PairPanel& pair_panel(int64_t nsb) {
  constexpr int P = kTqGroup / 2;
  thread_local PairPanel p;
  if (p.d.size() < (size_t)(P * nsb)) {
    p.v.resize((size_t)(P * nsb * 8));
    p.d.resize((size_t)(P * nsb));
  }
  return p;
}

// Decodes group `grp` (scales, then the blocks' kTqGroup 64-byte units) into pp.
CHIMERA_T_TQ512 void decode_pair_panel(const uint8_t* grp, size_t sc_bytes, int64_t nsb, PairPanel& pp) {
  constexpr int G = kTqGroup;
  constexpr int P = G / 2;
  const __m512i mask = _mm512_set1_epi8(3);
  const auto* sc = reinterpret_cast<const uint16_t*>(grp);
  const uint8_t* qs = grp + sc_bytes;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    CHIMERA_UNROLL for (int p = 0; p < P; ++p) {
      const __m512i x0 = _mm512_load_si512((const void*)(qs + (size_t)(sb * G + 2 * p) * 64));
      const __m512i x1 = _mm512_load_si512((const void*)(qs + (size_t)(sb * G + 2 * p + 1) * 64));
      // Code half h of both rows in one vector (2 shuffles per pair and
      // block, not one per output vector), then plane n of it is output 2n + h.
      const __m512i y[2] = {_mm512_shuffle_i64x2(x0, x1, 0x44), _mm512_shuffle_i64x2(x0, x1, 0xEE)};
      __m512i* out = reinterpret_cast<__m512i*>(pp.v[(size_t)((p * nsb + sb) * 8)].b);
      CHIMERA_UNROLL for (int n = 0; n < 4; ++n) {
        CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
          _mm512_store_si512((void*)(out + 2 * n + h), _mm512_and_si512(n ? _mm512_srli_epi16(y[h], 2 * n) : y[h], mask));
        }
      }
      const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(sc[sb * G + 2 * p])),
                                          _mm256_set1_ps(_cvtsh_ss(sc[sb * G + 2 * p + 1])), 1);
      _mm512_store_ps((void*)pp.d[(size_t)(p * nsb + sb)].b, d);
    }
  }
}

// y[mm * ldy + 0 .. kTqGroup) for M activation rows (the first at a,
// a_stride apart) from one group's pair panel.
template <bool kVnni, int M>
CHIMERA_T_TQ512 void pair_tile(const PairPanel& pp, int64_t nsb, const uint8_t* a, size_t a_stride, float* y,
                               int64_t ldy) {
  constexpr int P = kTqGroup / 2;
  const __m512i ones = _mm512_set1_epi16(1);
  const int8_t* ap[M];
  __m512 acc[M][P];
  CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
    ap[mm] = reinterpret_cast<const int8_t*>(a + mm * a_stride);
    CHIMERA_UNROLL for (int p = 0; p < P; ++p) acc[mm][p] = _mm512_setzero_ps();
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const __m512i* v[P];
    CHIMERA_UNROLL for (int p = 0; p < P; ++p) v[p] = reinterpret_cast<const __m512i*>(pp.v[(size_t)((p * nsb + sb) * 8)].b);
    // Chunk-major: each activation chunk is broadcast once for both pairs;
    // the P x M chains are independent, each 8 deep.
    __m512i s[P][M];
    CHIMERA_UNROLL for (int c = 0; c < 8; ++c) {
      __m512i w[P];
      CHIMERA_UNROLL for (int p = 0; p < P; ++p) w[p] = _mm512_load_si512((const void*)(v[p] + c));
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m512i y = _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i*)(ap[mm] + 32 * c)));
        CHIMERA_UNROLL for (int p = 0; p < P; ++p) {
          if constexpr (kVnni) {
            s[p][mm] = _mm512_dpbusd_epi32(c == 0 ? _mm512_setzero_si512() : s[p][mm], w[p], y);
          } else {
            const __m512i pr = _mm512_maddubs_epi16(w[p], y);
            s[p][mm] = c == 0 ? pr : _mm512_add_epi16(s[p][mm], pr);  // int16, |lane| <= 8 * 768
          }
        }
      }
    }
    CHIMERA_UNROLL for (int p = 0; p < P; ++p) {
      const __m512 dw = _mm512_load_ps((const void*)pp.d[(size_t)(p * nsb + sb)].b);
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        __m512i sp = s[p][mm];
        if constexpr (!kVnni) sp = _mm512_madd_epi16(sp, ones);
        const TqAct8& am = *reinterpret_cast<const TqAct8*>(ap[mm]);
        const __m512i corr = _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i*)am.corr));
        const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(am.d));
        acc[mm][p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(sp, corr)), acc[mm][p]);
      }
    }
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) ap[mm] += sizeof(TqAct8);
  }
  CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
    CHIMERA_UNROLL for (int p = 0; p < P; ++p) {
      alignas(64) float l[16];
      _mm512_store_ps(l, acc[mm][p]);
      y[mm * ldy + 2 * p] = detail::tq_finish(l);
      y[mm * ldy + 2 * p + 1] = detail::tq_finish(l + 8);
    }
  }
}

template <bool kVnni>
CHIMERA_T_TQ512 void gemm_packed(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  if (i1 - i0 == 1) {
    return tq_packed_gemv(g, r0, r1, i0, gemv_packed_step<kVnni, kTqStreams>, gemv_packed_step<kVnni, 1>);
  }
  // Activation blocks outer (L2), then each group decoded once into its pair
  // panel (L1) with the next group prefetched into L2, activation tiles inner.
  constexpr int G = kTqGroup;
  const int64_t nsb = g.k / q::kQK_K;
  const size_t sc_bytes = tq_packed_scale_bytes(g.k);
  const size_t group_bytes = (size_t)G * g.w_stride;
  const int64_t ib_rows = detail::act_block_rows(g.a_stride, kActs);
  PairPanel& pp = pair_panel(nsb);
  for (int64_t ib = i0; ib < i1; ib += ib_rows) {
    const int64_t ie = std::min(i1, ib + ib_rows);
    for (int64_t r = r0; r < r1; r += G) {
      const uint8_t* grp = g.w + (size_t)(r / G) * group_bytes;
      if (r + G < r1) gemv_prefetch_l2(grp + group_bytes, group_bytes);
      decode_pair_panel(grp, sc_bytes, nsb, pp);
      int64_t i = ib;
      for (; i + kActs <= ie; i += kActs) {
        pair_tile<kVnni, kActs>(pp, nsb, g.a + (size_t)i * g.a_stride, g.a_stride, g.y + i * g.ldy + r, g.ldy);
      }
      const uint8_t* a = g.a + (size_t)i * g.a_stride;
      float* y = g.y + i * g.ldy + r;
      switch (ie - i) {
        case 3: pair_tile<kVnni, 3>(pp, nsb, a, g.a_stride, y, g.ldy); break;
        case 2: pair_tile<kVnni, 2>(pp, nsb, a, g.a_stride, y, g.ldy); break;
        case 1: pair_tile<kVnni, 1>(pp, nsb, a, g.a_stride, y, g.ldy); break;
        default: break;
      }
    }
  }
}

// TQ1_0 with TqAct8 activations, storage layout (used only where a tensor is
// not repacked: CHIMERA_REPACK=0 or a row count not a multiple of kTqGroup):
// each row decoded (scalar base-3 decoder) into the plane-order panel, then
// the TQ2_0 panel dot. Same integer S_l, same f32 operations: bit-identical.
template <bool kVnni>
CHIMERA_T_TQ512 void gemm_tq1_act8(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const int64_t nsb = g.k / q::kQK_K;
  RowPanel& pr = row_panel(nsb, 4);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      TqDecoded t;
      pr.dd[(size_t)sb] = tq1_0_decode(w + (size_t)sb * sizeof(q::block_tq1_0), &t);
      for (int n = 0; n < 4; ++n) {
        uint8_t* o = pr.block(sb * 4 + n);
        std::memcpy(o, t.t + 32 * n, 32);
        std::memcpy(o + 32, t.t + 128 + 32 * n, 32);
      }
    }
    panel_rows<Kind::kTq2, kVnni>(pr, g, nsb, i0, i1, r);
  }
}

template <bool kVnni>
MatmulKernel make_kernel(format::GgmlType type) {
  switch (type) {
    case GgmlType::TQ1_0: {
      if (!tq1_as_2bit()) {
        return {tq_pack_act16, tq_act16_bytes, gemm<Kind::kTq1, kVnni>,
                kVnni ? "gemm_tq1_0_q8_K_avx512vnni" : "gemm_tq1_0_q8_K_avx512", GgmlType::Q8_K};
      }
      MatmulKernel k{tq_pack_act8_avx2, tq_act8_bytes, gemm_tq1_act8<kVnni>,
                     kVnni ? "gemm_tq1_0_q8_K_avx512vnni_2bit" : "gemm_tq1_0_q8_K_avx512_2bit", GgmlType::Q8_K};
      tq_add_repacking(k, tq1_0_repack, gemm_packed<kVnni>);
      return k;
    }
    case GgmlType::TQ2_0: {
      MatmulKernel k{tq_pack_act8_avx2, tq_act8_bytes, gemm<Kind::kTq2, kVnni>,
                     kVnni ? "gemm_tq2_0_q8_K_avx512vnni" : "gemm_tq2_0_q8_K_avx512", GgmlType::Q8_K};
      tq_add_repacking(k, tq2_0_repack, gemm_packed<kVnni>);
      return k;
    }
    case GgmlType::I2_S:
      return {tq_pack_act8_avx2, tq_act8_bytes, gemm<Kind::kI2s, kVnni>,
              kVnni ? "gemm_i2_s_q8_K_avx512vnni" : "gemm_i2_s_q8_K_avx512", GgmlType::Q8_K};
    default: return {};
  }
}

}  // namespace

MatmulKernel ternary_kernel_avx512(format::GgmlType type) { return make_kernel<false>(type); }
MatmulKernel ternary_kernel_avx512vnni(format::GgmlType type) { return make_kernel<true>(type); }

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
MatmulKernel ternary_kernel_avx512(format::GgmlType) { return {}; }
MatmulKernel ternary_kernel_avx512vnni(format::GgmlType) { return {}; }
}  // namespace chimera::kernels

#endif
