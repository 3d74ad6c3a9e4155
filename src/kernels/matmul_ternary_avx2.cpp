// AVX2 ternary matmul kernels (Isa::kAvx2): TQ1_0 / TQ2_0 / I2_S weights x
// Q8_K activations, bit-identical to Isa::kScalar (matmul_ternary.h).
//   TQ2_0 / I2_S: TqAct8 plane-order activations; per 256 elements two 32-byte
//   code loads, plane n of half h = (x_h >> shift_n) & 3 (TQ2_0 2n, I2_S
//   6 - 2n) against activation bytes 64n + 32h; vpmaddubsw (trits u8 x s8, no
//   saturation), the 8 products of a block summed in int16, one vpmaddwd(1)
//   -> int32 lane l of class l (bounds at block_dot / tile_dot).
//   GEMV (m == 1) decodes in registers (block_dot: 2 shifts + 8 and per 256
//   weights); storage layout with an L2 prefetch of the rows ahead.
//   GEMM (m > 1) decodes up to kTqGroup rows once into a panel and runs
//   register tiles of 2 rows x up to 4 activation rows over it (gemm_panels).
//   Repacked TQ2_0 / TQ1_0 (2-bit grouped layout, matmul_ternary.h): GEMV
//   kTqGroup rows per pass, kTqStreams groups at once (tq_packed_gemv), rows
//   in pairs sharing each activation load (packed_rows_sums); GEMM the same
//   panels. The GEMV keeps its loads, chains and f32 updates explicit: GCC's
//   own order (activations spilled, product trees, vpermps per row) cost
//   llvm-mca -mcpu=znver3 150.5 cycles per 4 groups x 256 where this takes
//   135.7 (AVX-VNNI 124.0 -> 103.5, approximate: znver3 has no VNNI); the
//   vector ALU pipes are then ~97% busy (32 pipe-cycles per row block, a
//   quarter of them the f32 update).
//   TQ1_0 runs on TqAct8 (repacked, or re-encoded per block when not).
//   Isa::kAvx2Vnni (ternary_kernel_avx2vnni, repacked TQ2_0 / TQ1_0): the
//   same, the packed GEMV's and GEMM tiles' products summed by the VEX
//   vpdpbusd (packed_rows_sums, tile_dot).
//   TQ1_0 with CHIMERA_TQ1_2BIT=0: block_q8_K activations, each weight row
//   decoded once per call into natural-order trits (shared scalar decoder),
//   8 chunks of 32 per block.
// Then minus the lane-class corrections, vfmadd into 8 f32 lanes and the
// fixed reduction of matmul_ternary.h.
#include "kernels/matmul_ternary.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/avx_vnni.h"
#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_kquant.h"
#include "kernels/matmul_kquant_x16_simd_avx2.h"
#include "kernels/matmul_tile.h"

#define CHIMERA_T_AVX2 __attribute__((target("avx2,fma,f16c")))


namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;
using x16a2::load_reg;

// ---- TQ2_0 / I2_S on plane-order activations.
// Chunk c = 2n + h (0..7) of a block is plane n of code half h (bytes 32h..32h+31
// of the 64 qs bytes): trits (x_h >> shift_n) & 3, shift_n = 2n (TQ2_0) or
// 6 - 2n (I2_S); its activations are TqAct8 bytes 32c..32c+31 (chunk n, half
// h). vpmaddubsw(trits u8 0..3, activations s8 |a| <= 128) leaves int16 lanes
// t0*a0 + t1*a1 (|.| <= 2*3*128 = 768) of the lane class of their bytes, and
// vpmaddwd(1) sums each 4-byte group into int32 lane l of class l (matmul_ternary.h),
// so any exact int16 sum of a block's products gives the same int32 S_l.

// Activation chunk c = 2n + h of a block.
CHIMERA_T_AVX2 inline __m256i act_chunk(const TqAct8& a, int c) {
  return _mm256_load_si256((const __m256i*)(a.qs + 32 * c));
}

// S_l (before the correction) of one block, decoded in registers (GEMV).
// Unpack without most shifts: with y_h = x_h >> 4 (16-bit shift; the 0x03 /
// 0x0C masks keep each byte's own bits), the four planes of a half are
// x&3, x&0x0C, y&3, y&0x0C; the 0x0C ones are 4t, not t. Their products are
// summed apart: s1 = 4 products of t (|lane| <= 4*768 = 3072), s4 = 4
// products of 4t (|lane| <= 4*4*768 = 12288 < 2^15, and a multiple of 4, so
// the arithmetic shift s4 >> 2 is the exact quotient); s1 + (s4 >> 2) is the
// exact int16 sum of the block's 8 products (|.| <= 6144). Per 64 weights
// 1 shift + 4 and + 4 vpmaddubsw instead of 3 + 4 + 4.
//
// kVnni (Isa::kAvx2Vnni, the packed GEMV's packed_rows_sums, which orders
// the same products for several rows): each product goes straight into
// int32 lanes by the VEX vpdpbusd (4 bytes of one lane class per dword, as
// vpmaddubsw + vpmaddwd(1) sum them): s1 + (s4 >> 2) is the same exact S_l,
// with 8 instead of 17 multiply / add instructions per 256 weights.
template <bool kVnni>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline __m256i trit_dot(__m256i s, __m256i t, __m256i act) {
  if constexpr (kVnni) return avxvnni::dpbusd(s, t, act);
  else return _mm256_add_epi16(s, _mm256_maddubs_epi16(t, act));
}
template <bool kI2s>
CHIMERA_T_AVX2 inline __m256i block_dot(const uint8_t* blk, const TqAct8& a) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i mc = _mm256_set1_epi8(0x0C);
  // The planes at bits 0-1, 2-3, 4-5, 6-7 of a byte.
  constexpr int p0 = kI2s ? 3 : 0, p1 = kI2s ? 2 : 1, p2 = kI2s ? 1 : 2, p3 = kI2s ? 0 : 3;
  __m256i s1 = _mm256_setzero_si256(), s4 = _mm256_setzero_si256();
  CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
    const __m256i x = _mm256_loadu_si256((const __m256i*)(blk + 32 * h));
    const __m256i y = _mm256_srli_epi16(x, 4);
    s1 = trit_dot<false>(s1, _mm256_and_si256(x, m3), act_chunk(a, 2 * p0 + h));
    s4 = trit_dot<false>(s4, _mm256_and_si256(x, mc), act_chunk(a, 2 * p1 + h));
    s1 = trit_dot<false>(s1, _mm256_and_si256(y, m3), act_chunk(a, 2 * p2 + h));
    s4 = trit_dot<false>(s4, _mm256_and_si256(y, mc), act_chunk(a, 2 * p3 + h));
  }
  return _mm256_madd_epi16(_mm256_add_epi16(s1, _mm256_srai_epi16(s4, 2)), _mm256_set1_epi16(1));
}

// acc = fma(a.d * d, (float)(S_l - corr_l), acc) (the product rounded first,
// as in the scalar kernel).
CHIMERA_T_AVX2 inline __m256 block_update(__m256i s, const TqAct8& a, __m256 d, __m256 acc) {
  s = _mm256_sub_epi32(s, _mm256_load_si256((const __m256i*)a.corr));
  return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
}

// detail::tq_finish in registers: v = (l0+l4, l1+l5, l2+l6, l3+l7), then
// (v0 + v2) + (v1 + v3) — the same additions in the same order.
CHIMERA_T_AVX2 inline float lanes_finish(__m256 acc) {
  const __m128 v = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 w = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps(w, w, 1)));
}

CHIMERA_T_AVX2 inline float f16_bits(uint16_t h) { return _cvtsh_ss(h); }

// Storage-layout GEMV (m == 1): one row at a time, with an L2 prefetch >= 4 KiB ahead.
template <bool kI2s>
CHIMERA_T_AVX2 void gemv_storage(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i) {
  constexpr size_t kBytes = kI2s ? 64 : sizeof(q::block_tq2_0);
  const int64_t nsb = g.k / q::kQK_K;
  float ts = 0.f;
  if (kI2s) std::memcpy(&ts, g.w_tail, sizeof(ts));
  const auto* act = reinterpret_cast<const TqAct8*>(g.a + (size_t)i * g.a_stride);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    const uint8_t* pf = w + std::max<size_t>(2, (4096 + g.w_stride - 1) / g.w_stride) * g.w_stride;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* blk = w + (size_t)sb * kBytes;
      _mm_prefetch((const char*)(pf + (size_t)sb * kBytes), _MM_HINT_T1);
      float d = ts;
      if (!kI2s) {
        uint16_t h;
        std::memcpy(&h, blk + 64, 2);
        d = f16_bits(h);
      }
      acc = block_update(block_dot<kI2s>(blk, act[sb]), act[sb], _mm256_set1_ps(act[sb].d * d), acc);
    }
    _mm_prefetch((const char*)(pf + (size_t)nsb * kBytes - 1), _MM_HINT_T1);
    g.y[i * g.ldy + r] = lanes_finish(acc);
  }
}

// ---- GEMM (m > 1): decoded panels x register tiles.
// Up to kTqGroup weight rows are decoded once into a panel (per row and
// block the 8 trit chunks in activation order and the block scale), then
// tiles of 2 panel rows x up to kActs activation rows run over it (tile_dot):
// per chunk 2 panel loads and 4 activation loads feed 8 vpmaddubsw (the 8
// products of a block summed in int16, |lane| <= 8*768 = 6144), then one
// vpmaddwd, the correction, convert and fma per (row, activation row, block);
// Isa::kAvx2Vnni runs the same tiles with vpdpbusd (int32 sums, no adds, no
// vpmaddwd). The products dy * d of a block come from 8-wide multiplies of
// the tile's activation scales (kept transposed per activation block, `ad`)
// by the panel rows' scales. Blocking: activation rows in L2-sized blocks
// (detail::act_block_rows), within a tile the blocks in chunks of kKc
// (activation tile + panel chunk ~ 23 KiB, L1-resident while the panel's
// rows reuse them); the f32 accumulators of a tile stay in registers within
// a chunk and in a small buffer between chunks, so each output still sees
// its blocks in order with the same operations (bit-identical to the GEMV
// and the scalar kernel).
// Measured (1 thread, m = 64, loaded 2-vCPU SPR, docs/PERFORMANCE.md session
// 10): 1.34-1.48x faster than the per-activation-row decode; session 14: the
// scale products and base + offset addressing; session 16 (Zen 5): 2-row
// tiles with both operands in registers, 1.15-1.2x (AVX-VNNI 1.3-1.5x);
// session 17 (Zen 5): rows of a panel block adjacent, accumulators in
// registers, correction as a memory operand, dp formed outside the tile:
// 1.5-4% (tile alone ~49 -> ~46 cycles per 2 x 4 x 256).
constexpr int kActs = 4;
// Rows per panel: 8 measured no better than 4 (m = 256, sessions 14 and 16).
constexpr int kPanelRows = kTqGroup;
constexpr int64_t kKc = 10;

struct alignas(32) Chunk32 {
  uint8_t b[32];
};

// Chunks of one block in a panel: the 8 of each of its kPanelRows rows, row
// after row, so a tile's rows and blocks are constant offsets apart.
constexpr size_t kPanelBlock = 8 * kPanelRows;

struct Panel {
  std::vector<Chunk32> t;  // [block][row][8]
  std::vector<float> dd;   // [block][row]
  std::vector<float> ad;   // activation scales [block][row of the activation block], kActs - 1 lanes of slack
  std::vector<float> ddx;  // dd, each 4 times: [block][row][4]
};

inline Panel& panel(int64_t nsb, int64_t ib_rows) {
  thread_local Panel p;
  if (p.dd.size() < (size_t)(kPanelRows * nsb)) {
    p.t.resize((size_t)(nsb * kPanelBlock));
    p.dd.resize((size_t)(kPanelRows * nsb));
  }
  const size_t ad = (size_t)(nsb * (ib_rows + kActs));
  if (p.ad.size() < ad) p.ad.resize(ad, 0.f);
  if (p.ddx.size() < (size_t)(nsb * kPanelRows * 4)) p.ddx.resize((size_t)(nsb * kPanelRows * 4));
  return p;
}

// The 8 trit chunks of one block's 64 code bytes.
template <bool kI2s>
CHIMERA_T_AVX2 inline void decode_block(const uint8_t* blk, Chunk32* out) {
  const __m256i m3 = _mm256_set1_epi8(3);
  CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
    const __m256i x = _mm256_loadu_si256((const __m256i*)(blk + 32 * h));
    CHIMERA_UNROLL for (int n = 0; n < 4; ++n) {
      const int sh = kI2s ? 6 - 2 * n : 2 * n;
      _mm256_store_si256((__m256i*)out[2 * n + h].b, _mm256_and_si256(sh ? _mm256_srli_epi16(x, sh) : x, m3));
    }
  }
}

// The blocks [0, nb) of R panel rows (the first at t, the next 8 chunks
// further, a block kPanelBlock chunks further) x M activation rows (the first
// at a, a_stride apart); dp[sb][r][mm] = dy * d of block sb, row r,
// activation row mm. Both operands of every product stay in registers: per
// chunk R panel loads and M activation loads feed R x M vpmaddubsw (kVnni:
// vpdpbusd) into R x M sums, so the 2 x 4 tile loads 6 vectors per 256
// weights x 1 activation row where a 1 x 4 tile with memory operands loaded
// 10 (Zen 5 issues 2 loads per cycle: folding the reused activation loads
// into the products measured ~10% slower). Per output and block the rest is
// vpmaddwd, vpsubd with the correction as a memory operand, convert, a
// broadcast of dp and the fma into the f32 accumulator, kept in a register
// (GCC spills some) and stored only when the call ends before the last
// block. Zen 5 runs vpmaddubsw, vpmaddwd and vfmadd on the same 2 pipes: 80
// of them per 2 x 4 tile and block, a 40-cycle floor; measured ~46 (the
// vpaddw chains take some of those pipes: 64 vpmaddubsw + 56 vpaddw alone
// run at ~1.7 pairs per cycle). kFirst: the accumulators start at 0; kLast:
// each output's lanes are reduced into y[mm * ldy + r].
template <int R, int M, bool kFirst, bool kLast, bool kVnni>
CHIMERA_T_AVX2 void tile_dot(const Chunk32* t, const uint8_t* a, size_t a_stride, const float (*dp)[kPanelRows][kActs],
                             int64_t nb, float (*acc)[kActs][8], float* y, int64_t ldy) {
  static_assert(R * M + R + 2 <= 16, "tile sums + panel chunks + activation + product in 16 registers");
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 av[R][M];
  CHIMERA_UNROLL for (int r = 0; r < R; ++r) {
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) av[r][mm] = kFirst ? _mm256_setzero_ps() : _mm256_load_ps(acc[r][mm]);
  }
  for (int64_t sb = 0; sb < nb; ++sb) {
    __m256i s[R][M];
    CHIMERA_UNROLL for (int c = 0; c < 8; ++c) {
      __m256i w[R];
      CHIMERA_UNROLL for (int r = 0; r < R; ++r) w[r] = _mm256_load_si256((const __m256i*)t[8 * r + c].b);
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        __m256i x = _mm256_load_si256((const __m256i*)(a + mm * a_stride + 32 * c));
        // One load per activation chunk: GCC otherwise folds it into each
        // product as a memory operand (R loads instead of one).
        __asm__("" : "+x"(x));
        CHIMERA_UNROLL for (int r = 0; r < R; ++r) {
          if constexpr (kVnni) {
            s[r][mm] = avxvnni::dpbusd(c == 0 ? _mm256_setzero_si256() : s[r][mm], w[r], x);
          } else {
            const __m256i p = _mm256_maddubs_epi16(w[r], x);
            s[r][mm] = c == 0 ? p : _mm256_add_epi16(s[r][mm], p);
          }
          // Keeps the sums as chains: GCC otherwise reassociates them into
          // trees over all 8 products and spills them to the stack.
          __asm__("" : "+x"(s[r][mm]));
        }
      }
    }
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
      CHIMERA_UNROLL for (int r = 0; r < R; ++r) {
        // The correction as a memory operand of each subtraction (the
        // pointer hidden so GCC does not load it once into a register).
        const __m256i* corr = (const __m256i*)reinterpret_cast<const TqAct8*>(a + mm * a_stride)->corr;
        __asm__("" : "+r"(corr));
        const __m256i sl = kVnni ? s[r][mm] : _mm256_madd_epi16(s[r][mm], ones);
        const __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(sl, _mm256_load_si256(corr)));
        av[r][mm] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dp[sb][r][mm]), f, av[r][mm]);
      }
    }
    t += kPanelBlock;
    a += sizeof(TqAct8);
  }
  CHIMERA_UNROLL for (int r = 0; r < R; ++r) {
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
      if (kLast) {
        y[mm * ldy + r] = lanes_finish(av[r][mm]);
      } else {
        _mm256_store_ps(acc[r][mm], av[r][mm]);
      }
    }
  }
}

using TileDotFn = void (*)(const Chunk32*, const uint8_t*, size_t, const float (*)[kPanelRows][kActs], int64_t,
                           float (*)[kActs][8], float*, int64_t);
constexpr int kTileRows = 2;
// [first][last][R - 1][M - 1]
template <bool kFirst, bool kLast, bool kVnni>
constexpr TileDotFn kTileDotSet[kTileRows][kActs] = {
    {tile_dot<1, 1, kFirst, kLast, kVnni>, tile_dot<1, 2, kFirst, kLast, kVnni>, tile_dot<1, 3, kFirst, kLast, kVnni>,
     tile_dot<1, 4, kFirst, kLast, kVnni>},
    {tile_dot<2, 1, kFirst, kLast, kVnni>, tile_dot<2, 2, kFirst, kLast, kVnni>, tile_dot<2, 3, kFirst, kLast, kVnni>,
     tile_dot<2, 4, kFirst, kLast, kVnni>}};
template <bool kVnni>
constexpr const TileDotFn (*kTileDot[2][2])[kActs] = {
    {kTileDotSet<false, false, kVnni>, kTileDotSet<false, true, kVnni>},
    {kTileDotSet<true, false, kVnni>, kTileDotSet<true, true, kVnni>}};

// y[i][r] for rows [r0, r1) x activation rows [i0, i1); fill_row(r, t, dd)
// decodes row r's nsb blocks into t[kPanelBlock * sb + c] and their scales
// into dd[kPanelRows * sb]. The scale products of a panel's 4 rows x an
// activation tile are formed per block chunk (two 8-wide multiplies per
// block, into an L1-resident dp shared by the tile's two row pairs).
// next_bytes(r) (packed weights): the bytes [p, p + n) the
// panel after the one starting at row r decodes, or n = 0 — prefetched into
// L2 a few lines per activation tile while this panel's tiles run (as one
// burst per panel, the prefetches queued behind each other and the next
// decode still waited on DRAM: ~10% of a BitNet prefill on Zen 5).
template <bool kVnni = false, class FillRow, class NextBytes>
CHIMERA_T_AVX2 void gemm_panels(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1, FillRow fill_row,
                                NextBytes next_bytes) {
  const int64_t nsb = g.k / q::kQK_K;
  const int64_t ib_rows = detail::act_block_rows(g.a_stride, kActs);
  Panel& p = panel(nsb, ib_rows);
  const size_t ad_stride = (size_t)(ib_rows + kActs);
  alignas(32) float acc[kPanelRows][kActs][8];
  alignas(32) float dp[kKc][kPanelRows][kActs];
  for (int64_t ib = i0; ib < i1; ib += ib_rows) {
    const int64_t ie = std::min(i1, ib + ib_rows);
    for (int64_t i = ib; i < ie; ++i) {
      const auto* act = reinterpret_cast<const TqAct8*>(g.a + (size_t)i * g.a_stride);
      for (int64_t sb = 0; sb < nsb; ++sb) p.ad[(size_t)sb * ad_stride + (size_t)(i - ib)] = act[sb].d;
    }
    for (int64_t r = r0; r < r1; r += kPanelRows) {
      const int nr = (int)std::min<int64_t>(kPanelRows, r1 - r);
      for (int j = 0; j < nr; ++j) fill_row(r + j, &p.t[(size_t)(8 * j)], &p.dd[(size_t)j]);
      for (int64_t q = 0; q < nsb * kPanelRows; ++q) _mm_storeu_ps(&p.ddx[(size_t)(4 * q)], _mm_set1_ps(p.dd[(size_t)q]));
      // The next panel's lines, spread over this panel's activation tiles.
      const std::pair<const uint8_t*, size_t> nx = r + kPanelRows < r1 ? next_bytes(r) : std::pair<const uint8_t*, size_t>{};
      const size_t lines = (nx.second + 63) / 64;
      const int64_t tiles = (ie - ib + kActs - 1) / kActs;
      for (int64_t i = ib; i < ie; i += kActs) {
        const int64_t tile = (i - ib) / kActs;
        for (size_t l = (size_t)tile * lines / (size_t)tiles; l < (size_t)(tile + 1) * lines / (size_t)tiles; ++l) {
          _mm_prefetch((const char*)(nx.first + 64 * l), _MM_HINT_T1);
        }
        const int m = (int)std::min<int64_t>(kActs, ie - i);
        const uint8_t* a = g.a + (size_t)i * g.a_stride;
        const float* ad = p.ad.data() + (i - ib);
        for (int64_t kc = 0; kc < nsb; kc += kKc) {
          const int64_t nb = std::min(kKc, nsb - kc);
          const auto& fns = kTileDot<kVnni>[kc == 0][kc + nb == nsb];
          // dp[b][j][mm] = ad * dd of block kc + b, panel row j, activation
          // row i + mm: two 8-wide multiplies per block.
          for (int64_t b = 0; b < nb; ++b) {
            const __m256 a8 = _mm256_broadcast_ps((const __m128*)(ad + (size_t)(kc + b) * ad_stride));
            const float* dx = &p.ddx[(size_t)((kc + b) * kPanelRows * 4)];
            _mm256_store_ps(dp[b][0], _mm256_mul_ps(_mm256_loadu_ps(dx), a8));
            _mm256_store_ps(dp[b][2], _mm256_mul_ps(_mm256_loadu_ps(dx + 8), a8));
          }
          for (int j = 0; j < nr; j += kTileRows) {
            const int rr = std::min(kTileRows, nr - j);
            fns[rr - 1][m - 1](&p.t[(size_t)kc * kPanelBlock + (size_t)(8 * j)], a + (size_t)kc * sizeof(TqAct8),
                               g.a_stride, reinterpret_cast<const float (*)[kPanelRows][kActs]>(&dp[0][j][0]), nb, &acc[j],
                               g.y + i * g.ldy + r + j, g.ldy);
          }
        }
      }
    }
  }
}

// Storage-layout weights: no prefetch (rows are read in order, the hardware
// streams them).
inline std::pair<const uint8_t*, size_t> no_next(int64_t) { return {nullptr, 0}; }

template <bool kI2s>
CHIMERA_T_AVX2 void gemm_planes(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  if (i1 - i0 == 1) return gemv_storage<kI2s>(g, r0, r1, i0);
  constexpr size_t kBytes = kI2s ? 64 : sizeof(q::block_tq2_0);
  const int64_t nsb = g.k / q::kQK_K;
  float ts = 0.f;
  if (kI2s) std::memcpy(&ts, g.w_tail, sizeof(ts));
  gemm_panels(g, r0, r1, i0, i1, [&g, nsb, ts](int64_t r, Chunk32* t, float* dd) CHIMERA_T_AVX2 {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* blk = w + (size_t)sb * kBytes;
      decode_block<kI2s>(blk, t + kPanelBlock * sb);
      float d = ts;
      if (!kI2s) {
        uint16_t h;
        std::memcpy(&h, blk + 64, 2);
        d = f16_bits(h);
      }
      dd[kPanelRows * sb] = d;
    }
  }, no_next);
}

// ---- TQ1_0 on block_q8_K activations.
CHIMERA_T_AVX2 float dot_avx2(const TqDecoded* w, const float* wd, const uint8_t* act, int64_t nsb) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* y = act + (size_t)sb * sizeof(q::block_q8_K);
    const int8_t* qs = (const int8_t*)(y + 4);
    __m256i s = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      const __m256i t = _mm256_load_si256((const __m256i*)(w[sb].t + 32 * c));
      const __m256i a = _mm256_loadu_si256((const __m256i*)(qs + 32 * c));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(t, a), ones));
    }
    const __m256i bs = _mm256_loadu_si256((const __m256i*)(y + 260));
    s = _mm256_sub_epi32(s, _mm256_madd_epi16(bs, ones));
    float dy;
    std::memcpy(&dy, y, 4);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * wd[sb]), _mm256_cvtepi32_ps(s), acc);
  }
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  return detail::tq_finish(l);
}

// ---- Repacked TQ2_0 / TQ1_0 (2-bit grouped layout, matmul_ternary.h) and
// TQ1_0 on TqAct8 in storage layout: the same block_dot / tile_dot
// arithmetic as gemm_planes, bit-identical to it and to Isa::kScalar.

// R rows' blocks of the packed GEMV (rows 64 bytes apart from blk): block_dot's
// products (same planes), out[r] = the exact S_l - corr_l of row r, which
// block_update's convert and fma take (gemv_packed_step). Each activation
// chunk is loaded once for the R rows; the sums are kept chains (the empty
// asm; GCC otherwise sums the 8 products as a tree), and with kVnni s1
// starts at -corr_l (ncorr), which saves the subtraction.
template <int R, bool kVnni>
CHIMERA_T_AVX2 inline void packed_rows_sums(const uint8_t* blk, const TqAct8& a, __m256i ncorr, __m256i* out) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i mc = _mm256_set1_epi8(0x0C);
  __m256i s1[R], s4[R];
  CHIMERA_UNROLL for (int r = 0; r < R; ++r) {
    s1[r] = kVnni ? ncorr : _mm256_setzero_si256();
    s4[r] = _mm256_setzero_si256();
  }
  CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
    __m256i x[R];
    CHIMERA_UNROLL for (int r = 0; r < R; ++r) x[r] = load_reg(blk + 64 * r + 32 * h);
    CHIMERA_UNROLL for (int n = 0; n < 4; ++n) {
      if (n == 2) {
        CHIMERA_UNROLL for (int r = 0; r < R; ++r) x[r] = _mm256_srli_epi16(x[r], 4);
      }
      const __m256i an = load_reg(a.qs + 32 * (2 * n + h));
      CHIMERA_UNROLL for (int r = 0; r < R; ++r) {
        __m256i& sn = n % 2 ? s4[r] : s1[r];
        sn = trit_dot<kVnni>(sn, _mm256_and_si256(x[r], n % 2 ? mc : m3), an);
        __asm__("" : "+x"(sn));
      }
    }
  }
  CHIMERA_UNROLL for (int r = 0; r < R; ++r) {
    __m256i s;
    if constexpr (kVnni) {
      s = _mm256_add_epi32(s1[r], _mm256_srai_epi32(s4[r], 2));  // s1 started at -corr
    } else {
      s = _mm256_madd_epi16(_mm256_add_epi16(s1[r], _mm256_srai_epi16(s4[r], 2)), _mm256_set1_epi16(1));
      s = _mm256_sub_epi32(s, _mm256_load_si256((const __m256i*)a.corr));
    }
    out[r] = s;
  }
}

// GEMV step (tq_packed_gemv, matmul_ternary.h): S groups read at once, block
// by block (block sb of group 0, then of group 1, ...: S pages streamed
// together); pf != 0: the same lines of the groups pf bytes further (the next
// step's) are prefetched into L2. A group's block scales are converted and
// multiplied by the activation scale with one vector op each, stored, and
// broadcast per row from memory (on Zen 3 one FP1/FP2 uop, where vpermps
// held FP1 for a cycle). Every row gets the same operations for every S.
template <int S, bool kVnni = false>
CHIMERA_T_AVX2 void gemv_packed_step(const uint8_t* grp, size_t gbytes, const TqAct8* act, int64_t k, float* y,
                                     size_t pf) {
  constexpr int G = kTqGroup;
  static_assert(G == 4);
  constexpr int kPair = 2;  // rows per activation load (packed_rows_sums)
  const int64_t nsb = k / q::kQK_K;
  const size_t sc_bytes = tq_packed_scale_bytes(k);
  __m256 acc[S][G];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int j = 0; j < G; ++j) acc[s][j] = _mm256_setzero_ps();
    if (pf) gemv_prefetch_l2(grp + s * gbytes + pf, sc_bytes);  // the scales
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const TqAct8& a = act[sb];
    alignas(16) float dd[S][G];
    // VNNI: the correction subtracted by starting s1 at -corr_l
    const __m256i ncorr =
        kVnni ? _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_load_si256((const __m256i*)a.corr)) : __m256i{};
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
      const uint16_t* sc = reinterpret_cast<const uint16_t*>(grp + s * gbytes) + sb * G;
      _mm_store_ps(dd[s], _mm_mul_ps(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)sc)), _mm_set1_ps(a.d)));
    }
    // The f32 update of pair p runs after the sums of pair p + 1 (pend), so
    // the next pair's loads and products do not wait behind it (S = 1, the
    // leftover groups: in place, 35.4 -> 33.3 cycles per block on znver3).
    constexpr bool kDefer = S > 1;
    __m256i pend[kPair];
    const auto update = [&](int s, int j) CHIMERA_T_AVX2 {
      CHIMERA_UNROLL for (int r = 0; r < kPair; ++r) {
        acc[s][j + r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dd[s][j + r]), _mm256_cvtepi32_ps(pend[r]), acc[s][j + r]);
      }
    };
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
      const uint8_t* blk = grp + s * gbytes + sc_bytes + (size_t)sb * G * 64;
      if (pf) gemv_prefetch_l2(blk + pf, G * 64);
      CHIMERA_UNROLL for (int j = 0; j < G; j += kPair) {
        __asm__ volatile("" ::: "memory");  // each row pair loads its own activations
        __m256i cur[kPair];
        packed_rows_sums<kPair, kVnni>(blk + (size_t)j * 64, a, ncorr, cur);
        if (kDefer && (s > 0 || j > 0)) update(j > 0 ? s : s - 1, j > 0 ? j - kPair : G - kPair);
        CHIMERA_UNROLL for (int r = 0; r < kPair; ++r) pend[r] = cur[r];
        if (!kDefer) update(s, j);
      }
    }
    if (kDefer) update(S - 1, G - kPair);
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int j = 0; j < G; ++j) y[G * s + j] = lanes_finish(acc[s][j]);
  }
}

template <bool kVnni>
CHIMERA_T_AVX2 void gemm_packed(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  if (i1 - i0 == 1) {
    return tq_packed_gemv(g, r0, r1, i0, gemv_packed_step<kTqStreams, kVnni>, gemv_packed_step<1, kVnni>);
  }
  constexpr int G = kTqGroup;
  const int64_t nsb = g.k / q::kQK_K;
  const size_t sc_bytes = tq_packed_scale_bytes(g.k);
  const size_t group_bytes = (size_t)G * g.w_stride;
  static_assert(kPanelRows % G == 0, "a panel is whole groups");
  gemm_panels<kVnni>(
      g, r0, r1, i0, i1,
      [&g, nsb, sc_bytes, group_bytes](int64_t r, Chunk32* t, float* dd) CHIMERA_T_AVX2 {
        const uint8_t* grp = g.w + (size_t)(r / G) * group_bytes;
        const auto* sc = reinterpret_cast<const uint16_t*>(grp);
        const int64_t j = r % G;
        for (int64_t sb = 0; sb < nsb; ++sb) {
          decode_block<false>(grp + sc_bytes + (size_t)(sb * G + j) * 64, t + kPanelBlock * sb);
          dd[kPanelRows * sb] = f16_bits(sc[sb * G + j]);
        }
      },
      [&g, r1, group_bytes](int64_t r) {
        // The next panel's groups (contiguous), up to this call's last row.
        const int64_t next = r + kPanelRows, groups = (std::min<int64_t>(r1, next + kPanelRows) - next + G - 1) / G;
        return std::pair<const uint8_t*, size_t>{g.w + (size_t)(next / G) * group_bytes, (size_t)groups * group_bytes};
      });
}

// Rows left in storage layout (CHIMERA_REPACK=0, or a row count not a
// multiple of kTqGroup): re-encoded block by block with the scalar decoder.
CHIMERA_T_AVX2 void gemm_tq1_act8(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const int64_t nsb = g.k / q::kQK_K;
  gemm_panels(g, r0, r1, i0, i1, [&g, nsb](int64_t r, Chunk32* t, float* dd) CHIMERA_T_AVX2 {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      alignas(32) uint8_t qs[64];
      dd[kPanelRows * sb] = f16_bits(tq1_0_to_tq2_qs(w + (size_t)sb * sizeof(q::block_tq1_0), qs));
      decode_block<false>(qs, t + kPanelBlock * sb);
    }
  }, no_next);
}

}  // namespace

MatmulKernel ternary_kernel_avx2(format::GgmlType type) {
  switch (type) {
    case GgmlType::TQ1_0: {
      if (!tq1_as_2bit()) {
        return {kq_pack_act_avx2, kq_act_bytes, detail::tq_gemm<tq1_0_decode, sizeof(q::block_tq1_0), dot_avx2>,
                "gemm_tq1_0_q8_K_avx2", GgmlType::Q8_K};
      }
      MatmulKernel k{tq_pack_act8_avx2, tq_act8_bytes, gemm_tq1_act8, "gemm_tq1_0_q8_K_avx2_2bit", GgmlType::Q8_K};
      tq_add_repacking(k, tq1_0_repack, gemm_packed<false>);
      return k;
    }
    case GgmlType::TQ2_0: {
      MatmulKernel k{tq_pack_act8_avx2, tq_act8_bytes, gemm_planes<false>, "gemm_tq2_0_q8_K_avx2", GgmlType::Q8_K};
      tq_add_repacking(k, tq2_0_repack, gemm_packed<false>);
      return k;
    }
    case GgmlType::I2_S:
      return {tq_pack_act8_avx2, tq_act8_bytes, gemm_planes<true>, "gemm_i2_s_q8_K_avx2", GgmlType::Q8_K};
    default: return {};
  }
}

MatmulKernel ternary_kernel_avx2vnni(format::GgmlType type) {
  MatmulKernel k = ternary_kernel_avx2(type);
  if (!k.gemm_packed || (type != GgmlType::TQ1_0 && type != GgmlType::TQ2_0)) return {};
  k.gemm_packed = gemm_packed<true>;
  k.name = type == GgmlType::TQ1_0 ? "gemm_tq1_0_q8_K_avx2vnni_2bit" : "gemm_tq2_0_q8_K_avx2vnni";
  return k;
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
MatmulKernel ternary_kernel_avx2(format::GgmlType) { return {}; }
MatmulKernel ternary_kernel_avx2vnni(format::GgmlType) { return {}; }
}  // namespace chimera::kernels

#endif
