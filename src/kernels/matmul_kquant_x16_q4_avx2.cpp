// AVX2 Q4_K / Q5_K kernels over the x16 layout (matmul_kquant_x16.h): each 64-byte
// chunk of a group block is two 256-bit halves (rows 0..7, rows 8..15), so a
// tile is 8 weight rows (one per 32-bit lane) x M activation rows (M = 1, the
// decode GEMV: q4_block8, both halves of a group per super-block; GEMM tiles
// of 2..4 rows: q4g_tile8, further down). The decode GEMV reads
// kX16StreamsAvx2 groups at once, chunk-interleaved, with an L1 prefetch of
// each group's next super-block (gemv_stream_steps, gemv_prefetch.h); leftover groups run it
// on one group with the near prefetch. The GEMV reads a widened copy of the
// activation row (widen_act) and keeps its loads, chains and loop order
// explicit: on Zen 3 (two vector loads per cycle) GCC's free choice of
// memory operands, reloads and product trees made it load-bound. llvm-mca
// -mcpu=znver3, 2 groups x 8 rows x 256 elements: Q4_K 214.8 -> 149.5
// cycles, Q5_K 315.8 -> 252.3, Q4_K AVX-VNNI 181.9 -> 134.6.
//
// Same arithmetic as the AVX-512 x16 kernels (bit-identical to
// kq_x16_dot_ref): for each 16-element half of sub-block j, four
// vpmaddubsw products (nibbles x one broadcast activation dword, |.| <= 2 *
// 15 * 128) are summed in int16 (|.| <= 15360, exact), and one vpmaddwd with
// the (sc_j, sc_j) word pair adds sc_j * (that half's sum) to the exact int32
// S; one f32 update of acc / accm per super-block. 9 instructions per 256
// multiply-adds instead of the 12 of llama.cpp's AVX2 order, and the GEMM
// needs no decoded panel. Q5_K ORs each level's fifth bit in from its qh
// chunk (levels <= 31: the int16 sums stay exact, |.| <= 4 * 2 * 31 * 128).
//
// AVX2 + AVX-VNNI (Isa::kAvx2Vnni, kq_x16_gemm_avx2vnni; Q4_K): the same bodies
// with kVnni = true: each 4-element dword product goes straight into an int32
// lane (vpdpbusd), and a chain of 16 elements, |P| < 2^15,
// enters S by one vpdpwssd with the (sc, 0) word pair (kChain): the GEMM's 17
// instructions per 32 elements x 8 rows x 1 activation row (8 vpmaddubsw, 7
// vpaddw, vpmaddwd, vpaddd) become 10. Same exact S, same bits. 2048 x 2048
// Q4_K GEMM, 1 thread, CPU time: m = 512 57.4 -> 42.6 ms, m = 64 7.9 -> 6.2 ms.
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_kquant_x16_simd_avx2.h"
#include "kernels/matmul_tile.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

using x16a2::pick_words;
using x16a2::bcast32;
using x16a2::load_reg;

using format::GgmlType;
namespace q = chimera::quant;

constexpr size_t kAb = sizeof(q::block_q8_K);

// Group-block geometry (matmul_kquant_x16.h): size, qh chunks, qs chunks.
template <bool kQ5>
struct Geo {
  static constexpr size_t kBlock = kX16Rows * (kQ5 ? sizeof(q::block_q5_K) : sizeof(q::block_q4_K));
  static constexpr size_t kQh = 256;
  static constexpr size_t kQs = kQ5 ? 768 : 256;
};
constexpr int kHalfRows = 8;

// vpshufb control: dword i = words (plane byte 4i + u, 0): the (sc, 0) pair
// that vpmaddwd / vpdpwssd multiply an int32 lane holding |P| < 2^15 by.
CHIMERA_T_X16A2_INLINE __m256i pick_word_lo(int u) {
  const int ctl = u | (0x80 << 8) | (0x80 << 16) | (0x80 << 24);
  const __m128i v = _mm_add_epi32(_mm_set1_epi32(ctl), _mm_setr_epi32(0, 4, 8, 12));
  return _mm256_broadcastsi128_si256(v);
}

// The per-element sums and their scaling, plain AVX2 or AVX-VNNI (the same
// exact integers either way, so the same bits):
//  - psum: P += the 4 products of each row's dword (u8 level x s8 activation):
//    VNNI one vpdpbusd into int32 lanes; AVX2 vpmaddubsw pairs added in int16;
//  - scale_add: S += P . SC: VNNI one vpdpwssd with the (sc, 0) word pair
//    (an int32 P with |P| < 2^15 is its own low word); AVX2 vpmaddwd of the
//    int16 pairs with (sc, sc), then vpaddd.
// The VNNI instructions are inline asm ({vex}: the AVX-VNNI encoding), so the
// plain AVX2 instantiations of the shared bodies never use them.
template <bool kVnni>
CHIMERA_T_X16A2_INLINE __m256i psum(__m256i P, __m256i u8, __m256i s8) {
  if constexpr (kVnni) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(P) : "x"(u8), "x"(s8));
    return P;
  } else {
    return _mm256_add_epi16(P, _mm256_maddubs_epi16(u8, s8));
  }
}
template <bool kVnni>
CHIMERA_T_X16A2_INLINE __m256i scale_add(__m256i S, __m256i P, __m256i SC) {
  if constexpr (kVnni) {
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(S) : "x"(P), "x"(SC));
    return S;
  } else {
    return _mm256_add_epi32(S, _mm256_madd_epi16(P, SC));
  }
}
// The scale word pairs of value u of a scale plane (see scale_add).
template <bool kVnni>
CHIMERA_T_X16A2_INLINE __m256i scale_pairs(__m256i O, int u) {
  return _mm256_shuffle_epi8(O, kVnni ? pick_word_lo(u) : pick_words(u, u));
}
// Dwords each P may sum before scale_add (|P| < 2^15): plain AVX2 int16
// pair lanes hold 2 products per 4-element dword, VNNI int32 lanes 4.
//   AVX2 Q4_K 8 (8 * 2 * 15 * 128 = 30720), Q5_K 4 (4 * 2 * 31 * 128);
//   VNNI (Q4_K only) 4 (16 * 15 * 128); GEMV and GEMM alike.
// The VNNI level has no Q5_K kernel (kq_x16_gemm_avx2vnni): its 8-element
// chains measured no faster than the AVX2 order.
template <bool kVnni, bool kQ5>
constexpr int kChain = kVnni ? 4 : (!kQ5 ? 8 : 4);

CHIMERA_T_X16A2_INLINE __m256i load(const uint8_t* p) { return _mm256_load_si256((const __m256i*)p); }
// The decode GEMV's activation row, widened once per call (widen_act): per
// super-block the Q8_K block itself (d and bsums read in place), padded to
// kXHead bytes, then its 64 activation dwords, each repeated in the 8 lanes
// of a 32-byte vector, so the GEMV loads a ready vector where it would
// broadcast a dword (a load plus a vector uop on Zen 3). llvm-mca
// -mcpu=znver3, one group's 8-row half super-block: 90.0 -> 84.5 cycles.
constexpr size_t kXHead = 320;
constexpr size_t kAbX = kXHead + 64 * 32;
static_assert(kXHead >= kAb && kXHead % 32 == 0);

// Activation dword t (elements 4t .. 4t + 3) of super-block A in every lane:
// kX, A is a widened block; else a Q8_K block.
template <bool kX>
CHIMERA_T_X16A2_INLINE __m256i act_dword(const uint8_t* A, int t) {
  if constexpr (kX) {
    return load_reg(A + kXHead + 32 * (size_t)t);
  } else {
    return bcast32(A + 4 + 4 * t);
  }
}

CHIMERA_T_X16A2 void widen_act(const uint8_t* a, int64_t nsb, uint8_t* out) {
  for (int64_t sb = 0; sb < nsb; ++sb, a += kAb, out += kAbX) {
    std::memcpy(out, a, kAb);
    for (int t = 0; t < 64; ++t) _mm256_store_si256((__m256i*)(out + kXHead + 32 * t), bcast32(a + 4 + 4 * t));
  }
}

// Per byte: bit b moved to bit 4 (the fifth bit of a Q5_K level).
CHIMERA_T_X16A2_INLINE __m256i bit_to_4(__m256i h, int b) {
  const __m256i m = _mm256_set1_epi8(0x10);
  return b <= 4 ? _mm256_and_si256(_mm256_slli_epi16(h, 4 - b), m) : _mm256_and_si256(_mm256_srli_epi16(h, b - 4), m);
}

// The mins of rows 8 * half .. + 7 (ho = 32 * half) of group block B as the
// (m_j, m_j+1) word pairs Mk[k] of sub-blocks 2k, 2k + 1 (k < 2: plane O2,
// else O3 rebuilt from the X_t's top bits; matmul_kquant_x16.h).
CHIMERA_T_X16A2_INLINE void min_words(const uint8_t* B, size_t ho, __m256i (&Mk)[4]) {
  const __m256i m6 = _mm256_set1_epi8(0x3F);
  const __m256i X0 = load(B + 64 + ho), X1 = load(B + 128 + ho), X2 = load(B + 192 + ho);
  const __m256i O2 = _mm256_and_si256(X2, m6);
  const __m256i O3 = _mm256_or_si256(
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(X0, 6), _mm256_set1_epi8(0x03)),
                      _mm256_and_si256(_mm256_srli_epi16(X1, 4), _mm256_set1_epi8(0x0C))),
      _mm256_and_si256(_mm256_srli_epi16(X2, 2), _mm256_set1_epi8(0x30)));
  CHIMERA_UNROLL for (int k = 0; k < 4; ++k) {
    Mk[k] = _mm256_shuffle_epi8(k < 2 ? O2 : O3, pick_words(2 * (k % 2), 2 * (k % 2) + 1));
  }
}

// Bm = sum_j m_j * (bsums_2j + bsums_2j+1) of activation block a, per row (exact int32).
CHIMERA_T_X16A2_INLINE __m256i min_sum(const __m256i (&Mk)[4], const uint8_t* a) {
  const __m256i bp = _mm256_broadcastsi128_si256(
      _mm_hadd_epi16(_mm_loadu_si128((const __m128i*)(a + 260)), _mm_loadu_si128((const __m128i*)(a + 276))));
  __m256i Bm = _mm256_madd_epi16(Mk[0], _mm256_shuffle_epi32(bp, 0x00));
  Bm = _mm256_add_epi32(Bm, _mm256_madd_epi16(Mk[1], _mm256_shuffle_epi32(bp, 0x55)));
  Bm = _mm256_add_epi32(Bm, _mm256_madd_epi16(Mk[2], _mm256_shuffle_epi32(bp, 0xAA)));
  return _mm256_add_epi32(Bm, _mm256_madd_epi16(Mk[3], _mm256_shuffle_epi32(bp, 0xFF)));
}

// One super-block: rows 8 * half .. + 7 of the S group blocks Bs[s] x the
// activation block A (scale dy) into acc[s] / accm[s]. S > 1 is the decode
// GEMV's multi-stream step: the groups' header lines, then their qs (and
// Q5_K qh) chunks of 4 lines are read in turn, and pf != 0 fetches the same
// lines pf bytes further (one group block: the near policy of gemv_prefetch.h). Each group's arithmetic
// is the same for every S. (The GEMM tiles are q4g_tile8 below.)
template <bool kVnni, bool kQ5, int S, bool kX>
CHIMERA_T_X16A2_INLINE void q4_block8(const uint8_t* const (&Bs)[S], int half, const uint8_t* A, float dy,
                                      __m256 (&acc)[S], __m256 (&accm)[S], size_t pf) {
  using GB = Geo<kQ5>;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m6 = _mm256_set1_epi8(0x3F);
  const size_t ho = 32 * (size_t)half;  // byte offset of this half in a 64-byte chunk / plane
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    if (pf) gemv_step_prefetch<true>(Bs[s] + pf, 256);  // d, dmin and the scale planes
    const __m256 dmin8 = _mm256_cvtph_ps(_mm_load_si128((const __m128i*)(Bs[s] + 32 + 16 * half)));
    __m256i Mk[4];
    min_words(Bs[s], ho, Mk);
    const __m256i Bm = min_sum(Mk, A);
    const __m256 dmv = _mm256_mul_ps(_mm256_set1_ps(-dy), dmin8);
    accm[s] = _mm256_fmadd_ps(dmv, _mm256_cvtepi32_ps(Bm), accm[s]);
  }
  __m256i Sx[S];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) Sx[s] = _mm256_setzero_si256();
  // Each activation dword is fetched once and used by every group at once
  // (with the groups as the outer loop, GCC kept a whole pass's dwords live
  // for the next group and spilled them); the empty asm keeps each P a chain
  // (GCC otherwise sums the products as a tree, with every product live).
  constexpr int kL = kChain<kVnni, kQ5>;
  static_assert(kL == 4 || kL == 8);
  CHIMERA_UNROLL for (int c = 0; c < 4; ++c) {
    __m256i Plo[S], Phi[S];
    CHIMERA_UNROLL for (int l = 0; l < 8; ++l) {
      if (l % kL == 0) {
        __asm__ volatile("" ::: "memory");  // no loads hoisted across chains
        CHIMERA_UNROLL for (int s = 0; s < S; ++s) Plo[s] = Phi[s] = _mm256_setzero_si256();
      }
      if (l % 4 == 0 && pf) {
        CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
          gemv_step_prefetch<true>(Bs[s] + GB::kQs + 64 * (8 * c + l) + pf, 4 * 64);
          if (kQ5 && c == 0) gemv_step_prefetch<true>(Bs[s] + GB::kQh + 64 * l + pf, 4 * 64);
        }
      }
      const __m256i alo = act_dword<kX>(A, 16 * c + l), ahi = act_dword<kX>(A, 16 * c + 8 + l);
      CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
        const uint8_t* B = Bs[s];
        const __m256i W = load_reg(B + GB::kQs + ho + 64 * (8 * c + l));
        __m256i lo = _mm256_and_si256(W, m4), hi = _mm256_and_si256(_mm256_srli_epi16(W, 4), m4);
        if constexpr (kQ5) {
          // qh byte 4l + u of each row: bit 2c -> low-nibble level, 2c + 1 -> high
          const __m256i H = load(B + GB::kQh + 64 * l + ho);
          lo = _mm256_or_si256(lo, bit_to_4(H, 2 * c));
          hi = _mm256_or_si256(hi, bit_to_4(H, 2 * c + 1));
        }
        Plo[s] = psum<kVnni>(Plo[s], lo, alo);
        Phi[s] = psum<kVnni>(Phi[s], hi, ahi);
        __asm__("" : "+x"(Plo[s]), "+x"(Phi[s]));
      }
      if ((l + 1) % kL == 0) {
        CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
          // (sc_j, sc_j) word pairs of sub-blocks 2c (low nibbles) and 2c + 1 (high)
          const __m256i O = _mm256_and_si256(load(Bs[s] + 64 + 64 * (c / 2) + ho), m6);
          Sx[s] = scale_add<kVnni>(Sx[s], Plo[s], scale_pairs<kVnni>(O, (2 * c) % 4));
          Sx[s] = scale_add<kVnni>(Sx[s], Phi[s], scale_pairs<kVnni>(O, (2 * c + 1) % 4));
        }
      }
    }
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    const __m256 d8 = _mm256_cvtph_ps(_mm_load_si128((const __m128i*)(Bs[s] + 16 * half)));
    acc[s] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dy), d8), _mm256_cvtepi32_ps(Sx[s]), acc[s]);
  }
}

// The decode GEMV over S groups (gbytes apart) -> y[16 s + 0..15]: both
// 8-row halves per super-block, so each group block is read from memory
// once (the second half from L1). S = 1: the M = 1 tile (the groups left
// over after the multi-stream steps), with the near prefetch of
// gemv_prefetch.h; S = kX16StreamsAvx2: kq_x16_run's multi-stream step.
template <bool kVnni, bool kQ5, int S, bool kX>
CHIMERA_T_X16A2 void q4_gemv(const uint8_t* G, size_t gbytes, const uint8_t* A, int64_t nsb, float* y, size_t pf) {
  using GB = Geo<kQ5>;
  __m256 acc[2][S], accm[2][S];
  CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) acc[h][s] = accm[h][s] = _mm256_setzero_ps();
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* Bs[S];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) Bs[s] = G + s * gbytes + (size_t)sb * GB::kBlock;
    if constexpr (S == 1) gemv_prefetch_ahead<GB::kBlock, kPfX16>(Bs[0], G + (size_t)nsb * GB::kBlock);
    const uint8_t* a = A + (size_t)sb * (kX ? kAbX : kAb);
    float dy;
    std::memcpy(&dy, a, 4);
    q4_block8<kVnni, kQ5, S, kX>(Bs, 0, a, dy, acc[0], accm[0], S > 1 ? gemv_step_pf<true>(sb, nsb, pf, GB::kBlock) : 0);
    q4_block8<kVnni, kQ5, S, kX>(Bs, 1, a, dy, acc[1], accm[1], 0);
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
      _mm256_storeu_ps(y + kX16Rows * s + kHalfRows * h, _mm256_add_ps(acc[h][s], accm[h][s]));
    }
  }
}

// The M = 1 tile (KqX16TileFn): one group.
template <bool kVnni, bool kQ5>
void q4_tile1(const uint8_t* G, const uint8_t* A, size_t, int64_t nsb, float* y, int64_t) {
  q4_gemv<kVnni, kQ5, 1, false>(G, 0, A, nsb, y, 0);
}

// ---- GEMM tiles (M >= 2 activation rows): the same integer sums and f32
// updates as q4_block8 (bit-identical), without spills: the GEMV's order
// run for M rows keeps every product of a super-block in flight (at M = 3
// GCC fully unrolled it and spilled ~350 vectors per super-block); here each
// sub-block's low nibbles, then its high nibbles, run as one pass: per l one
// code load and one and (+ a shift for the high nibbles), per activation row
// a broadcast, vpmaddubsw and vpaddw into one int16 chain per row (the empty
// asm keeps it a chain), then one vpmaddwd with the scale pair. Q4_K sums all 8 l of a pass in int16
// (|.| <= 8 * 2 * 15 * 128 = 30720), Q5_K 4 at a time (4 * 2 * 31 * 128 =
// 31744). Live: M int16 chains + M int32 sums + code, mask, scale (M = 4: 12
// vectors); the f32 accumulators wait on the stack between super-blocks.
constexpr int kGemmActs = 4;

// S[m] += the low (kHi = false) or high nibbles of sub-block pair c times
// their activations, by the (sc, sc) word pair SC of that sub-block.
template <bool kVnni, bool kQ5, bool kHi, int M>
CHIMERA_T_X16A2_INLINE void q4g_pass(const uint8_t* B, size_t ho, int c, const uint8_t* const* Am, __m256i SC,
                                     __m256i* S) {
  using GB = Geo<kQ5>;
  constexpr int kL = kChain<kVnni, kQ5>;  // l per chain (bounds above)
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const uint8_t* qs = B + GB::kQs + ho + 64 * 8 * c;
  CHIMERA_UNROLL for (int l0 = 0; l0 < 8; l0 += kL) {
    __m256i P[M];
    CHIMERA_UNROLL for (int l = l0; l < l0 + kL; ++l) {
      const __m256i W = load(qs + 64 * l);
      __m256i v = kHi ? _mm256_and_si256(_mm256_srli_epi16(W, 4), m4) : _mm256_and_si256(W, m4);
      if constexpr (kQ5) v = _mm256_or_si256(v, bit_to_4(load(B + GB::kQh + 64 * l + ho), 2 * c + (kHi ? 1 : 0)));
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        const __m256i a = bcast32(Am[m] + 4 + 64 * c + (kHi ? 32 : 0) + 4 * l);
        if constexpr (kVnni) {
          P[m] = psum<true>(l == l0 ? _mm256_setzero_si256() : P[m], v, a);
        } else {
          const __m256i p = _mm256_maddubs_epi16(v, a);
          P[m] = l == l0 ? p : _mm256_add_epi16(P[m], p);
          __asm__("" : "+x"(P[m]));
        }
      }
    }
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) S[m] = scale_add<kVnni>(S[m], P[m], SC);
  }
}

template <bool kVnni, bool kQ5, int M>
CHIMERA_T_X16A2 void q4g_tile8(const uint8_t* G, int half, const uint8_t* A, size_t a_stride, int64_t nsb, float* y,
                               int64_t ldy) {
  using GB = Geo<kQ5>;
  const __m256i m6 = _mm256_set1_epi8(0x3F);
  const size_t ho = 32 * (size_t)half;
  alignas(32) float acc[M][8], accm[M][8];
  std::memset(acc, 0, sizeof(acc));
  std::memset(accm, 0, sizeof(accm));
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* B = G + (size_t)sb * GB::kBlock;
    // The block kPfTileQ45 further into L1 (gemv_prefetch.h; group blocks
    // are contiguous, nsb * kBlock bytes per group; past the tensor's end the
    // prefetch reads nothing it uses and cannot fault), once per block (by
    // the first half-tile): a tile no longer waits on DRAM.
    if (half == 0) gemv_step_prefetch<true>(B + kPfTileQ45 * GB::kBlock, GB::kBlock);
    const uint8_t* Am[M];
    float dy[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      Am[m] = A + (size_t)m * a_stride + (size_t)sb * kAb;
      std::memcpy(&dy[m], Am[m], 4);
    }
    {  // the mins, as q4_block8
      const __m256 dmin8 = _mm256_cvtph_ps(_mm_load_si128((const __m128i*)(B + 32 + 16 * half)));
      __m256i Mk[4];
      min_words(B, ho, Mk);
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        const __m256i Bm = min_sum(Mk, Am[m]);
        const __m256 dmv = _mm256_mul_ps(_mm256_set1_ps(-dy[m]), dmin8);
        _mm256_store_ps(accm[m], _mm256_fmadd_ps(dmv, _mm256_cvtepi32_ps(Bm), _mm256_load_ps(accm[m])));
      }
    }
    __m256i S[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) S[m] = _mm256_setzero_si256();
    CHIMERA_UNROLL for (int c = 0; c < 4; ++c) {
      // (sc_j, sc_j) word pairs of sub-blocks 2c (low nibbles) and 2c + 1 (high)
      const __m256i O = _mm256_and_si256(load(B + 64 + 64 * (c / 2) + ho), m6);
      q4g_pass<kVnni, kQ5, false, M>(B, ho, c, Am, scale_pairs<kVnni>(O, (2 * c) % 4), S);
      q4g_pass<kVnni, kQ5, true, M>(B, ho, c, Am, scale_pairs<kVnni>(O, (2 * c + 1) % 4), S);
    }
    const __m256 d8 = _mm256_cvtph_ps(_mm_load_si128((const __m128i*)(B + 16 * half)));
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      const __m256 d = _mm256_mul_ps(_mm256_set1_ps(dy[m]), d8);
      _mm256_store_ps(acc[m], _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(S[m]), _mm256_load_ps(acc[m])));
    }
  }
  CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
    _mm256_storeu_ps(y + m * ldy, _mm256_add_ps(_mm256_load_ps(acc[m]), _mm256_load_ps(accm[m])));
  }
}

template <bool kVnni, bool kQ5, int M>
void q4g_tile16(const uint8_t* G, const uint8_t* A, size_t a_stride, int64_t nsb, float* y, int64_t ldy) {
  q4g_tile8<kVnni, kQ5, M>(G, 0, A, a_stride, nsb, y, ldy);
  q4g_tile8<kVnni, kQ5, M>(G, 1, A, a_stride, nsb, y + kHalfRows, ldy);
}

// M = 1 (a block's last odd row, and the GEMV's leftover groups) is q4_tile1.
// kTiles[m - 1]: the tile for m activation rows.
template <bool kVnni, bool kQ5, class Seq>
struct Q4Tiles;
template <bool kVnni, bool kQ5, int... I>
struct Q4Tiles<kVnni, kQ5, std::integer_sequence<int, I...>> {
  static constexpr KqX16TileFn kTiles[kGemmActs] = {q4_tile1<kVnni, kQ5>, q4g_tile16<kVnni, kQ5, I + 2>...};
};

// The decode GEMV (one activation row): kq_x16_run's stream steps over the
// widened row (kAbX), kX16StreamsAvx2 groups at a time, leftovers one group.
template <bool kVnni, bool kQ5>
void q4_gemv_rows(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i) {
  const int64_t nsb = g.k / 256;
  struct alignas(32) Line {
    uint8_t b[32];
  };
  thread_local std::vector<Line> wide;
  const size_t need = (size_t)nsb * (kAbX / 32);
  if (wide.size() < need) wide.resize(need);
  const uint8_t* X = reinterpret_cast<const uint8_t*>(wide.data());
  widen_act(g.a + (size_t)i * g.a_stride, nsb, reinterpret_cast<uint8_t*>(wide.data()));
  const size_t group_bytes = (size_t)kX16Rows * g.w_stride;
  float* y = g.y + i * g.ldy;
  gemv_stream_steps<kX16StreamsAvx2, kX16Rows>(
      r0, r1, group_bytes,
      [&](int64_t r, size_t pf) {
        q4_gemv<kVnni, kQ5, kX16StreamsAvx2, true>(g.w + (size_t)r * g.w_stride, group_bytes, X, nsb, y + r, pf);
      },
      [&](int64_t r) { q4_gemv<kVnni, kQ5, 1, true>(g.w + (size_t)r * g.w_stride, 0, X, nsb, y + r, 0); });
}

template <bool kVnni, bool kQ5>
void q4_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static_assert(!(kVnni && kQ5), "no VNNI Q5_K kernel (kChain)");
  if (i1 - i0 == 1) return q4_gemv_rows<kVnni, kQ5>(g, r0, r1, i0);
  kq_x16_run<kX16StreamsAvx2>(Q4Tiles<kVnni, kQ5, std::make_integer_sequence<int, kGemmActs - 1>>::kTiles, g, r0, r1,
                              i0, i1);
}

}  // namespace

GemmFn kq_x16_gemm_avx2(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_K: return q4_gemm<false, false>;
    case GgmlType::Q5_K: return q4_gemm<false, true>;
    case GgmlType::Q6_K: return kq_x16_q6_gemm_avx2(false);
    case GgmlType::Q2_K:
    case GgmlType::Q3_K: return kq_x16_q23_gemm_avx2(type);
    case GgmlType::IQ4_XS: return kq_x16_iq4xs_gemm_avx2();
    default: return nullptr;
  }
}

GemmFn kq_x16_gemm_avx2vnni(GgmlType type) {
  switch (type) {
    // Q5_K (levels <= 31: 8-element VNNI chains) measured no faster than its
    // AVX2 order (2048 x 2048, m = 512, 1 thread: 66 vs 69 ms): that level runs
    // the AVX2 kernel for it.
    case GgmlType::Q4_K: return q4_gemm<true, false>;
    // Q6_K: 4 vpdpbusd per 16-element scale group, then vpmulld by the scale
    // (_q6_avx2.cpp)
    case GgmlType::Q6_K: return kq_x16_q6_gemm_avx2(true);
    default: return nullptr;
  }
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
GemmFn kq_x16_gemm_avx2(format::GgmlType) { return nullptr; }
GemmFn kq_x16_gemm_avx2vnni(format::GgmlType) { return nullptr; }
}  // namespace chimera::kernels

#endif
