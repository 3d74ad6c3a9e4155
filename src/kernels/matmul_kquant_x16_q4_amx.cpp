// AMX (AMX-TILE + AMX-INT8) Q4_K GEMM over the x16 layout
// (matmul_kquant_x16.h), for Isa::kAmx: bit-identical to the AVX-512 VNNI x16
// Q4_K kernel (kq_x16_dot_ref) for every m, and below kAmxMinActs activation
// rows (the decode GEMV and small batches) it is that kernel.
//
// Arithmetic. The x16 Q4_K contract needs, per super-block and output, the
// exact int32 S = sum_j sc_j * sum_{e in sub-block j} q_e a_e and
// Bm = sum_j m_j * (sum_{e in j} a_e); any exact way of forming them gives the
// same f32 updates acc = fma(dy * d, (float)S, acc),
// accm = fma(-dy * dmin, (float)Bm, accm) (the VNNI kernel's operations),
// y = acc + accm. With the 6-bit scale split as sc = 16 sh + sl (sl <= 15,
// sh <= 3), q * sl <= 225 and q * sh <= 45 fit the unsigned bytes of an AMX B
// operand, so with the scale folded into the weights a whole super-block
// (K = 256, four tdpbsud of K = 64) accumulates in one int32 tile:
// S = C_lo + 16 C_hi with C_lo = A . (q sl), C_hi = A . (q sh), exact
// integers (|C_lo| <= 256 * 225 * 128 < 2^23). Bm is the VNNI kernel's
// vector code on the activations' bsums (a third tile, A . m_j, measured
// slower: 4 more products and 64 more stores per super-block).
//
// Layout. In a group block, qs chunk 8c + j holds bytes qs[32c + 4j .. + 3] of
// rows 0..15: its low nibbles are elements 64c + 4j .. + 3 of each row, its
// high nibbles elements 64c + 32 + 4j .. + 3 — one 64-byte row of an AMX B tile
// in the VNNI layout (16 columns = 16 weight rows x 4 consecutive k). So the
// B tile of K step c (elements 64c .. 64c + 63) is rows 0..7 = the low nibbles
// of chunks 8c .. 8c + 7 (sub-block 2c) and rows 8..15 = their high nibbles
// (sub-block 2c + 1); a vpmullw of the nibble words by the row's scale part
// (both bytes of a word belong to the same weight row) forms q * sl and
// q * sh without carries between bytes. The A tiles are the Q8_K codes,
// copied per call into [super-block][row][256] (aligned rows 256 bytes apart).
//
// Blocking. Per call: activation rows in blocks (<= kBlockActs + 15 rows,
// L2-resident); per 16-row group and super-block the B tiles are formed once
// into a stack buffer (8 KiB, L1) and used by every 16-row activation tile of
// the block; the per-row f32 accumulators live in a stack buffer across the
// super-blocks. A block whose row count is not a multiple of 16 ends with a
// tile that overlaps the previous one (only its new rows are accumulated), so
// every tile loads 16 rows that exist; a call with fewer than 16 rows
// configures its tiles with that many rows. Two tiles are in flight: a tile's
// f32 updates run after the next tile's products are issued, and the next
// super-block's B tiles are formed meanwhile. The tile configuration is loaded
// once per call on the calling thread (each pool thread configures its own)
// and released at the end.
//
// Measured (docs/PERFORMANCE.md, session 14): the tile work has a fixed cost
// per group and super-block (forming the B tiles: 128 stores, 128 vpmullw)
// that the VNNI kernel does not pay: through matmul AMX is slower at 8
// activation rows, even at 16, ahead from 32 (1.2x at 64, 1.3x at 256).
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "kernels/matmul_kquant_x16_simd.h"
#include "quant/kquant_blocks.h"

#define CHIMERA_T_AMX __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,amx-tile,amx-int8")))
#define CHIMERA_T_AMX_INLINE \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,amx-tile,amx-int8"), always_inline)) inline

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

constexpr size_t kAb = sizeof(q::block_q8_K);
constexpr size_t kBlock = kX16Rows * sizeof(q::block_q4_K);  // 2304-byte group block
constexpr size_t kQs = 256;                                   // qs chunks' offset in it
constexpr int kTileRows = 16;                                 // activation rows per A / C tile
constexpr int64_t kBlockActs = 128;                           // activation rows per block (max)
// Below this many activation rows the AVX-512 VNNI kernel runs (measured:
// docs/PERFORMANCE.md, session 14).
constexpr int64_t kAmxMinActs = 32;

// B tiles of one super-block: per K step c, B_lo and B_hi (1 KiB each), then
// the 4 mins word vectors Mk (as the VNNI kernel forms them).
constexpr size_t kBTile = 16 * 64;
constexpr size_t kBStep = 2 * kBTile;
constexpr size_t kBMins = 4 * kBStep;
constexpr size_t kBBytes = kBMins + 4 * 64;

// Tiles: C_lo, C_hi; A and B_lo, B_hi double-buffered over the K steps (even
// steps tmm2, tmm4, tmm5; odd tmm3, tmm6, tmm7) so that a step's loads need
// not wait for the previous step's products to read their tiles. Macros, not
// constants: the tile intrinsics paste their operands into the asm text.
#define CHIMERA_TCLO 0
#define CHIMERA_TCHI 1

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// vpshufb control: every byte of dword i of a 128-bit lane = byte 4i + u of it
// (on a scale plane: row r's value u in all 4 bytes of 32-bit lane r).
CHIMERA_T_AMX_INLINE __m512i splat_byte(int u) {
  return _mm512_broadcast_i32x4(
      _mm_add_epi32(_mm_set1_epi32(u * 0x01010101), _mm_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C)));
}

// The B tiles and mins words of the super-block at group block `B` into `out`.
CHIMERA_T_AMX void form_b(const uint8_t* B, uint8_t* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m6 = _mm512_set1_epi8(0x3F);
  const __m512i X0 = _mm512_load_si512(B + 64), X1 = _mm512_load_si512(B + 128), X2 = _mm512_load_si512(B + 192);
  // O_t: row r's values 4t .. 4t + 3 in 32-bit lane r (sc0..3, sc4..7, m0..3, m4..7)
  const __m512i O0 = _mm512_and_si512(X0, m6), O1 = _mm512_and_si512(X1, m6), O2 = _mm512_and_si512(X2, m6);
  const __m512i O3 =
      _mm512_or_si512(_mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(X0, 6), _mm512_set1_epi8(0x03)),
                                      _mm512_and_si512(_mm512_srli_epi16(X1, 4), _mm512_set1_epi8(0x0C))),
                      _mm512_and_si512(_mm512_srli_epi16(X2, 2), _mm512_set1_epi8(0x30)));
  // mins: the VNNI kernel's word pairs (m_2k', m_2k'+1) of 16 rows
  for (int k = 0; k < 4; ++k) {
    _mm512_store_si512(out + kBMins + 64 * k,
                       _mm512_shuffle_epi8(k < 2 ? O2 : O3, x16::pick_words(2 * (k % 2), 2 * (k % 2) + 1)));
  }
  const __m512i w15 = _mm512_set1_epi16(0x000F), w3 = _mm512_set1_epi16(0x0003);
  for (int c = 0; c < 4; ++c) {
    uint8_t* o = out + c * kBStep;
    __m512i SL[2], SH[2];
    for (int h = 0; h < 2; ++h) {
      const int j = 2 * c + h;  // sub-block
      const __m512i sc = _mm512_shuffle_epi8(j < 4 ? O0 : O1, splat_byte(j % 4));
      SL[h] = _mm512_and_si512(sc, w15);                       // (sl, 0) words
      SH[h] = _mm512_and_si512(_mm512_srli_epi16(sc, 4), w3);  // (sh, 0) words
    }
    const uint8_t* qs = B + kQs + 64 * 8 * c;
    for (int l = 0; l < 8; ++l) {
      const __m512i W = _mm512_load_si512(qs + 64 * l);
      const __m512i lo = _mm512_and_si512(W, m4), hi = _mm512_and_si512(_mm512_srli_epi16(W, 4), m4);
      _mm512_store_si512(o + 64 * l, _mm512_mullo_epi16(lo, SL[0]));
      _mm512_store_si512(o + 64 * (8 + l), _mm512_mullo_epi16(hi, SL[1]));
      _mm512_store_si512(o + kBTile + 64 * l, _mm512_mullo_epi16(lo, SH[0]));
      _mm512_store_si512(o + kBTile + 64 * (8 + l), _mm512_mullo_epi16(hi, SH[1]));
    }
  }
}

// One activation tile (the configured rows of codes at A, 256 bytes apart) x
// the formed B tiles -> C (C_lo, C_hi: 16 rows x 64 bytes each).
#define CHIMERA_AMX_STEP(c, TA, TL, TH)                     \
  _tile_loadd(TA, A + 64 * (c), 256);                        \
  _tile_loadd(TL, Bt + (c) * kBStep, 64);                    \
  _tile_loadd(TH, Bt + (c) * kBStep + kBTile, 64);           \
  _tile_dpbsud(CHIMERA_TCLO, TA, TL);                        \
  _tile_dpbsud(CHIMERA_TCHI, TA, TH);
CHIMERA_T_AMX_INLINE void tile_products(const uint8_t* A, const uint8_t* Bt, int32_t* C) {
  _tile_zero(CHIMERA_TCLO);
  _tile_zero(CHIMERA_TCHI);
  CHIMERA_AMX_STEP(0, 2, 4, 5)
  CHIMERA_AMX_STEP(1, 3, 6, 7)
  CHIMERA_AMX_STEP(2, 2, 4, 5)
  CHIMERA_AMX_STEP(3, 3, 6, 7)
  _tile_stored(CHIMERA_TCLO, C, 64);
  _tile_stored(CHIMERA_TCHI, C + 256, 64);
}
#undef CHIMERA_AMX_STEP

// The f32 updates of one tile's rows, run one tile late (below).
struct Pending {
  const int32_t* c = nullptr;   // C row of the first row
  const float* dy = nullptr;    // the rows' Q8_K d
  const int16_t* bp = nullptr;  // the rows' sub-block sums (8 words each)
  const uint8_t* mk = nullptr;  // the super-block's mins words
  float *acc = nullptr, *accm = nullptr;
  int64_t n = 0;
  __m512 d16, dmin16;
};

// The VNNI kernel's per-row f32 updates, with S = C_lo + 16 C_hi and its
// mins sum Bm (same exact integers, same operations).
CHIMERA_T_AMX_INLINE void update(const Pending& u) {
  const __m512i Mk0 = _mm512_load_si512(u.mk), Mk1 = _mm512_load_si512(u.mk + 64);
  const __m512i Mk2 = _mm512_load_si512(u.mk + 128), Mk3 = _mm512_load_si512(u.mk + 192);
  for (int64_t i = 0; i < u.n; ++i) {
    const int32_t* c = u.c + 16 * i;
    const float dy = u.dy[i];
    const __m512i bp = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i*)(u.bp + 8 * i)));
    __m512i Bm = _mm512_madd_epi16(Mk0, _mm512_shuffle_epi32(bp, (_MM_PERM_ENUM)0x00));
    Bm = x16::dpwssd<true>(Bm, Mk1, _mm512_shuffle_epi32(bp, (_MM_PERM_ENUM)0x55));
    Bm = x16::dpwssd<true>(Bm, Mk2, _mm512_shuffle_epi32(bp, (_MM_PERM_ENUM)0xAA));
    Bm = x16::dpwssd<true>(Bm, Mk3, _mm512_shuffle_epi32(bp, (_MM_PERM_ENUM)0xFF));
    const __m512i S = _mm512_add_epi32(_mm512_load_si512(c), _mm512_slli_epi32(_mm512_load_si512(c + 256), 4));
    float* ac = u.acc + kX16Rows * i;
    float* am = u.accm + kX16Rows * i;
    const __m512 dmv = _mm512_mul_ps(_mm512_set1_ps(-dy), u.dmin16);
    _mm512_store_ps(am, _mm512_fmadd_ps(dmv, _mm512_cvtepi32_ps(Bm), _mm512_load_ps(am)));
    _mm512_store_ps(ac, _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dy), u.d16), _mm512_cvtepi32_ps(S),
                                        _mm512_load_ps(ac)));
  }
}

// Per-thread buffer for one block's activation codes in tile order; grows
// only (steady-state calls do not allocate).
uint8_t* act_tiles_scratch(size_t bytes) {
  struct Buf {
    struct Free {
      void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<uint8_t, Free> p;
    size_t cap = 0;
  };
  thread_local Buf b;
  if (bytes > b.cap) {
    const size_t n = (std::max(bytes, 2 * b.cap) + 63) / 64 * 64;
    void* q = std::aligned_alloc(64, n);
    if (!q) throw std::bad_alloc();
    b.p.reset(static_cast<uint8_t*>(q));
    b.cap = n;
  }
  return b.p.get();
}

CHIMERA_T_AMX void q4_gemm_amx_tiles(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const int64_t nsb = g.k / 256;
  const int64_t n_acts = i1 - i0;
  TileConfig cfg;
  const int arows = (int)std::min<int64_t>(n_acts, kTileRows);
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = t < 4 ? (uint8_t)arows : 16;  // C and A: activation rows; B: 16 K rows
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);

  // B tiles and C of two steps in flight: the f32 update of a tile's rows
  // runs after the next tile's products are issued (and the next
  // super-block's B tiles are formed while the last tile's run), so the
  // vector work overlaps the tile unit's.
  alignas(64) uint8_t bt[2][kBBytes];
  alignas(64) int32_t C[2][2 * 256];
  alignas(64) float acc[kBlockActs + kTileRows][kX16Rows], accm[kBlockActs + kTileRows][kX16Rows];
  Pending p;
  // Blocks of at least 16 rows (or all of a call with fewer), L2-resident.
  int64_t blk = (int64_t)((1u << 20) / (g.a_stride ? g.a_stride : 1));
  blk = std::clamp<int64_t>(blk / kTileRows * kTileRows, kTileRows, kBlockActs);
  int cur = 0;
  // A block's Q8_K codes copied as [super-block][row][256]: each A tile is 16
  // cache-line-aligned rows 256 bytes apart (in the Q8_K rows they start 4
  // bytes into a line, and rows are a_stride apart); with them the rows' d
  // and sub-block sums (the VNNI kernel's hadd of the bsums) as [sb][row].
  // A block is never shorter than a tile: one that would leave fewer than 16
  // rows after it takes them too.
  const size_t max_nb = (size_t)std::min(blk + kTileRows, n_acts);
  uint8_t* at = act_tiles_scratch(max_nb * (size_t)nsb * (256 + 16 + sizeof(float)));
  int16_t* bps = reinterpret_cast<int16_t*>(at + max_nb * (size_t)nsb * 256);     // [sb][row][8]
  float* dys = reinterpret_cast<float*>(at + max_nb * (size_t)nsb * (256 + 16));  // [sb][row]
  for (int64_t ib = i0, ie; ib < i1; ib = ie) {
    ie = i1 - ib < blk + kTileRows ? i1 : ib + blk;
    const int64_t nb = ie - ib;
    for (int64_t i = ib; i < ie; ++i) {
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* src = g.a + (size_t)i * g.a_stride + (size_t)sb * kAb;
        const size_t at_row = (size_t)sb * nb + (size_t)(i - ib);
        uint8_t* dst = at + at_row * 256;
        for (int c = 0; c < 4; ++c) _mm512_store_si512(dst + 64 * c, _mm512_loadu_si512(src + 4 + 64 * c));
        _mm_store_si128((__m128i*)(bps + 8 * at_row), _mm_hadd_epi16(_mm_loadu_si128((const __m128i*)(src + 260)),
                                                                      _mm_loadu_si128((const __m128i*)(src + 276))));
        std::memcpy(&dys[at_row], src, 4);
      }
    }
    for (int64_t r = r0; r < r1; r += kX16Rows) {
      const uint8_t* group = g.w + (size_t)r * g.w_stride;
      for (int64_t i = 0; i < nb; ++i) {
        _mm512_store_ps(acc[i], _mm512_setzero_ps());
        _mm512_store_ps(accm[i], _mm512_setzero_ps());
      }
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* B = group + (size_t)sb * kBlock;
        uint8_t* bts = bt[sb & 1];
        form_b(B, bts);
        const __m512 d16 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)B));
        const __m512 dmin16 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)(B + 32)));
        // Tiles of arows rows from ib; a last tile that would pass ie starts
        // arows before it (the rows the tile before it accumulated are
        // loaded again but not used).
        for (int64_t done = ib; done < ie;) {
          const int64_t t0 = std::min<int64_t>(done, ie - arows);
          const int64_t end = std::min<int64_t>(t0 + arows, ie);
          const uint8_t* a = at + ((size_t)sb * nb + (size_t)(t0 - ib)) * 256;
          tile_products(a, bts, C[cur]);
          // the next tile's (or super-block's) codes into L1 meanwhile
          for (int l = 0; l < 4 * arows; ++l) _mm_prefetch((const char*)(a + (size_t)arows * 256) + 64 * l, _MM_HINT_T0);
          if (p.n) update(p);
          const size_t first = (size_t)sb * nb + (size_t)(done - ib);
          p.c = C[cur] + 16 * (done - t0);
          p.dy = dys + first;
          p.bp = bps + 8 * first;
          p.mk = bts + kBMins;
          p.acc = acc[done - ib];
          p.accm = accm[done - ib];
          p.n = end - done;
          p.d16 = d16;
          p.dmin16 = dmin16;
          cur ^= 1;
          done = end;
        }
      }
      update(p);
      p.n = 0;
      for (int64_t i = ib; i < ie; ++i) {
        _mm512_storeu_ps(g.y + i * g.ldy + r, _mm512_add_ps(_mm512_load_ps(acc[i - ib]), _mm512_load_ps(accm[i - ib])));
      }
    }
  }
  _tile_release();
}

void q4_gemm_amx(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static const GemmFn vnni = kq_x16_gemm_avx512(GgmlType::Q4_K, true);
  if (i1 - i0 < kAmxMinActs) {
    vnni(g, r0, r1, i0, i1);
    return;
  }
  q4_gemm_amx_tiles(g, r0, r1, i0, i1);
}

}  // namespace

GemmFn kq_x16_gemm_amx(GgmlType type) { return type == GgmlType::Q4_K ? q4_gemm_amx : nullptr; }
GemmFn kq_x16_gemm_amx_tiles() { return q4_gemm_amx_tiles; }

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
GemmFn kq_x16_gemm_amx(format::GgmlType) { return nullptr; }
GemmFn kq_x16_gemm_amx_tiles() { return nullptr; }
}  // namespace chimera::kernels

#endif
