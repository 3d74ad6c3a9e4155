// Internal to the matmul kernels: shared pieces of the legacy block-quant
// kernels (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL weights; matmul_q_legacy_*.cpp).
//
// Activations: every ISA packs an f32 row with the same function (scalar,
// bit-exact to llama.cpp's AVX2 quantize_row_q8_0 / q8_1, so every ISA
// multiplies identical integers) into this layout, nb = k / 32 blocks:
//   [0, k)               int8 qs                    (block b at 32 b)
//   [k, k + 32 nb)       f32 dexp[8 nb]             (block's f16-rounded d, x8)
//   [+32 nb, +64 nb)     i32 bias[8 nb]             (lane l = -off * sum(qs[4l..4l+3]))
//   [+64 nb, +96 nb)     f32 sexp[8 nb]             (lane 0 = Q8_1 s = f16(d*sum(qs)); lane 1 = the
//                                                   block's total bias -off * sum(qs) as int32 bits,
//                                                   0 for the _1 types; rest 0)
// The weight block is read as unsigned codes u = w + off (off = 8 for Q4_0,
// 16 for Q5_0, 128 for Q8_0/IQ4_NL, 0 for the _1 types), so
//   sum_j w_j a_j = sum_j u_j a_j - off * sum_j a_j   (exact int32)
// and SIMD kernels start each block's int32 accumulator at `bias`: lane l
// then holds exactly sum_{j=4l..4l+3} w_j a_j on every ISA (vpmaddubsw +
// vpmaddwd and vpdpbusd group bytes the same way), so AVX2 and AVX-512 VNNI
// agree bit for bit whichever trick (sign or offset) they use. The
// expanded (x8) scales let a kernel multiply a block's 8 int32 lanes by
// d_w * d_a with one vector op.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/fp16.h"
#include "format/gguf/ggml_types.h"
#include "kernels/type_traits.h"

namespace chimera::kernels::legacy {

// Geometry of one legacy weight type's block.
struct LegacyInfo {
  int bytes;     // block size in bytes
  int off_m;     // byte offset of the f16 min (or -1)
  int off_qh;    // byte offset of qh (or -1)
  int off_qs;    // byte offset of qs
  int bias;      // u - w for the unsigned code u (see above)
  bool has_min;  // _1 type (vec_dot_type Q8_1)
};

constexpr LegacyInfo legacy_info(format::GgmlType t) {
  using format::GgmlType;
  switch (t) {
    case GgmlType::Q8_0: return {34, -1, -1, 2, 128, false};
    case GgmlType::Q4_0: return {18, -1, -1, 2, 8, false};
    case GgmlType::Q4_1: return {20, 2, -1, 4, 0, true};
    case GgmlType::Q5_0: return {22, -1, 2, 6, 16, false};
    case GgmlType::Q5_1: return {24, 2, 4, 8, 0, true};
    case GgmlType::IQ4_NL: return {18, -1, -1, 2, 128, false};
    default: return {0, -1, -1, 0, 0, false};
  }
}

inline size_t act_bytes_legacy(int64_t k) { return (size_t)k + (size_t)(k / 32) * 96; }

struct ActView {
  const int8_t* qs;
  const float* dexp;
  const int32_t* bias;
  const float* sexp;
};
// Block b's total activation bias (the sum of its 8 bias lanes), which the
// packed 8-row kernels start every row's int32 sum at.
inline int32_t block_bias_total(const ActView& a, int64_t b) {
  int32_t v;
  std::memcpy(&v, a.sexp + 8 * b + 1, 4);
  return v;
}
inline ActView act_view(const uint8_t* a, int64_t k) {
  const size_t nb = (size_t)(k / 32);
  return {reinterpret_cast<const int8_t*>(a), reinterpret_cast<const float*>(a + k),
          reinterpret_cast<const int32_t*>(a + k + 32 * nb), reinterpret_cast<const float*>(a + k + 64 * nb)};
}

// pick.template operator()<T>() for the legacy type T == t, or null for any
// other type: the one list of types the packer lookups below dispatch over.
template <typename Pick>
PackActFn legacy_pick_packer(format::GgmlType t, Pick pick) {
  using format::GgmlType;
  switch (t) {
    case GgmlType::Q8_0: return pick.template operator()<GgmlType::Q8_0>();
    case GgmlType::Q4_0: return pick.template operator()<GgmlType::Q4_0>();
    case GgmlType::Q4_1: return pick.template operator()<GgmlType::Q4_1>();
    case GgmlType::Q5_0: return pick.template operator()<GgmlType::Q5_0>();
    case GgmlType::Q5_1: return pick.template operator()<GgmlType::Q5_1>();
    case GgmlType::IQ4_NL: return pick.template operator()<GgmlType::IQ4_NL>();
    default: return nullptr;
  }
}

// The packer for weight type t (bias and sexp filled per the type), or null.
PackActFn legacy_pack_fn(format::GgmlType t);
#if defined(__x86_64__)
// The same bytes from AVX2 code (matmul_q_legacy_pack_avx2.cpp), for the
// AVX2 and AVX-512 VNNI entries.
PackActFn legacy_pack_fn_avx2(format::GgmlType t);
#endif

// Kernel-table entries of one SIMD ISA. K provides
//   static constexpr const char* kIsa;   // name suffix, e.g. "avx2"
//   template <format::GgmlType T> static void gemm(const GemmArgs&, int64_t, int64_t, int64_t, int64_t);
// and the entry of type T is named "gemm_<type>_<vec_dot_type>_<kIsa>".
template <class K, format::GgmlType T>
MatmulKernel legacy_entry(const char* stem) {
  constexpr format::GgmlType vd = legacy_info(T).has_min ? format::GgmlType::Q8_1 : format::GgmlType::Q8_0;
  static const std::string name = std::string("gemm_") + stem + "_" + K::kIsa;
  return {legacy_pack_fn(T), act_bytes_legacy, &K::template gemm<T>, name.c_str(), vd};
}

// The entry for legacy type t (empty for other types).
template <class K>
MatmulKernel legacy_kernel_for(format::GgmlType t) {
  using format::GgmlType;
  switch (t) {
    case GgmlType::Q8_0: return legacy_entry<K, GgmlType::Q8_0>("q8_0_q8_0");
    case GgmlType::Q4_0: return legacy_entry<K, GgmlType::Q4_0>("q4_0_q8_0");
    case GgmlType::Q4_1: return legacy_entry<K, GgmlType::Q4_1>("q4_1_q8_1");
    case GgmlType::Q5_0: return legacy_entry<K, GgmlType::Q5_0>("q5_0_q8_0");
    case GgmlType::Q5_1: return legacy_entry<K, GgmlType::Q5_1>("q5_1_q8_1");
    case GgmlType::IQ4_NL: return legacy_entry<K, GgmlType::IQ4_NL>("iq4_nl_q8_0");
    default: return {};
  }
}

// Kernel providers (empty kernel for non-legacy types / other architectures).
MatmulKernel legacy_quant_kernel_scalar(format::GgmlType t);
MatmulKernel legacy_quant_kernel_avx2(format::GgmlType t);
// Isa::kAvx2Vnni: Q8_0 and Q4_0 only (their packed GEMM / GEMV with the VEX
// vpdpbusd; everything else as legacy_quant_kernel_avx2); empty for the others.
MatmulKernel legacy_quant_kernel_avx2vnni(format::GgmlType t);
MatmulKernel legacy_quant_kernel_avx512vnni(format::GgmlType t);

// The scalar reference of the load-time packed 8-row-group layouts (Q8_0:
// matmul_q8_0_repack.h, Q4_0: matmul_q4_0_repack.h): a group holds the f16
// scales d[nb][8] first, then codes_per_block bytes of codes per block;
// block_sumi(codes of block b, row rr in the group, activation qs of block b)
// is the exact int32 sum of the row's block, and per output
// acc = fma((float)sumi_b, d_w * d_a, acc) over the blocks in order.
template <class BlockSumi>
void gemm_packed_groups_scalar(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1,
                               size_t codes_per_block, BlockSumi block_sumi) {
  constexpr int kGroupRows = 8;
  const int64_t nb = g.k / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const int rr = (int)(r % kGroupRows);
    const uint8_t* base = g.w + (size_t)(r / kGroupRows) * kGroupRows * g.w_stride;
    const uint8_t* codes = base + (size_t)nb * 16;
    for (int64_t i = i0; i < i1; ++i) {
      const ActView a = act_view(g.a + (size_t)i * g.a_stride, g.k);
      float acc = 0.f;
      for (int64_t b = 0; b < nb; ++b) {
        const int32_t sumi = block_sumi(codes + (size_t)b * codes_per_block, rr, a.qs + 32 * b);
        uint16_t h;
        std::memcpy(&h, base + (size_t)b * 16 + 2 * rr, 2);
        acc = std::fma((float)sumi, f16_to_f32(h) * a.dexp[8 * b], acc);
      }
      g.y[i * g.ldy + r] = acc;
    }
  }
}

}  // namespace chimera::kernels::legacy

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_tile.h"

// 256-bit block decoders shared by the AVX2 and AVX-512 VNNI kernels (AVX2
// target, always inlined into callers whose target is a superset). One block
// = one ymm of 32 bytes in element order.
#define CHIMERA_T_QL_AVX2 __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace chimera::kernels::legacy::x86 {

CHIMERA_T_QL_AVX2 __m256 f16_bcast(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

// Block b's total activation bias in every 32-bit lane.
CHIMERA_T_QL_AVX2 __m256i bias_total(const ActView& a, int64_t b) { return _mm256_set1_epi32(block_bias_total(a, b)); }

// The 4 activation bytes at p in every 32-bit lane.
CHIMERA_T_QL_AVX2 __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// 16 bytes of nibbles -> 32 bytes: low nibbles (elements 0..15), then high.
CHIMERA_T_QL_AVX2 __m256i nibbles(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

// Bit j of the little-endian uint32 at qh -> byte j = 0x10 when set, else 0.
CHIMERA_T_QL_AVX2 __m256i high_bits(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32((int)v), _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// IQ4_NL codebook in both 128-bit lanes (for vpshufb), signed and +128.
CHIMERA_T_QL_AVX2 __m256i iq4nl_table(bool plus128) {
  alignas(32) int8_t t[32];
  for (int i = 0; i < 32; ++i) {
    static constexpr int8_t v[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    t[i] = (int8_t)(plus128 ? (int8_t)(v[i & 15] ^ (int8_t)0x80) : v[i & 15]);
  }
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(t));
}

// Weight codes of one block: for Q8_0 / IQ4_NL the signed values (w), for the
// others the unsigned codes u = w + off (legacy_info().bias, 0 for _1 types).
template <format::GgmlType T>
CHIMERA_T_QL_AVX2 __m256i decode(const uint8_t* blk, __m256i iq4_tab) {
  using format::GgmlType;
  constexpr LegacyInfo info = legacy_info(T);
  if constexpr (T == GgmlType::Q8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  } else if constexpr (T == GgmlType::IQ4_NL) {
    return _mm256_shuffle_epi8(iq4_tab, nibbles(blk + 2));
  } else if constexpr (info.off_qh >= 0) {
    return _mm256_or_si256(nibbles(blk + info.off_qs), high_bits(blk + info.off_qh));
  } else {
    return nibbles(blk + info.off_qs);
  }
}

CHIMERA_T_QL_AVX2 float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The pieces of a tile (R weight rows x M activation rows, matmul_tile.h)
// that the AVX2 and AVX-512 VNNI kernels share; only the int32 block dot
// differs between them.

// One weight block of row rr at block index b: its codes (decode<T>), d and
// (for _1 types) m broadcast. For GEMV (M == 1) it also prefetches the next
// row group's block at the same position (R rows ahead) into L2: the weights
// stream from DRAM there.
template <format::GgmlType T, int R, int M>
CHIMERA_T_QL_AVX2 void load_block(const uint8_t* blk, size_t w_stride, int64_t b, __m256i iq4_tab, __m256i& codes,
                                  __m256& dw, __m256& mw) {
  constexpr LegacyInfo info = legacy_info(T);
  if constexpr (M == 1) {
    if ((b & 1) == 0) _mm_prefetch((const char*)(blk + (size_t)R * w_stride), _MM_HINT_T1);
    if constexpr (info.bytes > 32) _mm_prefetch((const char*)(blk + (size_t)R * w_stride + 64), _MM_HINT_T1);
  }
  codes = decode<T>(blk, iq4_tab);
  dw = f16_bcast(blk);
  if constexpr (info.has_min) mw = f16_bcast(blk + info.off_m);
  else mw = _mm256_setzero_ps();  // unused
}

// acc += f32(sumi) * (d_w * d_a) lane-wise, then + m_w * s_a for _1 types
// (s_a in lane 0 of sexp; the other lanes are 0).
template <bool kHasMin>
CHIMERA_T_QL_AVX2 void accumulate(__m256i sumi, __m256 dw, __m256 da, __m256 mw, const float* sexp, __m256& acc) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(dw, da), acc);
  if constexpr (kHasMin) acc = _mm256_fmadd_ps(mw, _mm256_load_ps(sexp), acc);
}

// Writes the tile's outputs (fixed-order horizontal sums).
template <int R, int M>
CHIMERA_T_QL_AVX2 void store_tile(const GemmArgs& g, int64_t r, int64_t i, const __m256 (&acc)[R][M]) {
  CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) g.y[(i + mm) * g.ldy + r + rr] = hsum8(acc[rr][mm]);
  }
}

// The packed 8-row groups (Q8_0 / Q4_0 repack, matmul_q8_0_repack.h): block b's
// acc[rr][mm] = fma(f32(sum[rr][mm]), d_w * d_a, acc) with group rr's 8 f16
// scales at base + rr * gbytes + 16 b, then the tile's 8-row outputs stored.
template <int R, int M>
CHIMERA_T_QL_AVX2 void packed_block_fma(const uint8_t* base, size_t gbytes, int64_t b, const ActView (&av)[M],
                                        const __m256i (&sum)[R][M], __m256 (&acc)[R][M]) {
  CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base + rr * gbytes + 16 * b)));
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
      const __m256 scale = _mm256_mul_ps(dw, _mm256_load_ps(av[mm].dexp + 8 * b));
      acc[rr][mm] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[rr][mm]), scale, acc[rr][mm]);
    }
  }
}
template <int R, int M>
CHIMERA_T_QL_AVX2 void packed_store(const GemmArgs& g, int64_t grp, int64_t i, const __m256 (&acc)[R][M]) {
  CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) _mm256_storeu_ps(g.y + (i + mm) * g.ldy + (grp + rr) * 8, acc[rr][mm]);
  }
}

}  // namespace chimera::kernels::legacy::x86
#endif
