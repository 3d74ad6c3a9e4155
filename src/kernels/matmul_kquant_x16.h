// Internal: the 16-row interleaved ("x16") load-time layout of K-quant
// weights (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and IQ4_XS, used by the AVX-512 and
// AVX2 kernels:
// 16 rows per vector, GEMV and GEMM without a decoded weight panel.
//
// Rows are repacked in groups of kX16Rows; a group stores, per super-block sb
// of k, one "group block" of 16 * block_bytes bytes, and the group blocks of
// a group follow each other (the whole tensor is one stream). Within a group
// block the 16 rows' data is interleaved so that one 64-byte load holds the
// same 4 bytes of every row: a vpmaddubsw / vpdpbusd against one broadcast
// activation dword then yields, in 32-bit lane r, row r's 4-element partial
// sum. Those are the partials llama.cpp's AVX2 vec_dot keeps in its lane
// l = (e mod 32) / 4 (matmul_kquant.h), so a kernel may keep that f32 order
// lane for lane (bit-identical to the storage kernels), or sum whole
// sub-blocks per lane first (the Q4_K kernels, arithmetic below).
//
// Q4_K group block (2304 bytes = 16 x 144):
//   [0, 32)      d[16]     f16, row r at 2r
//   [32, 64)     dmin[16]  f16
//   [64, 256)    scales: X0, X1, X2 (64 bytes each) — the 16 six-bit values
//                of each row, v0..v7 = scales sc0..sc7, v8..v15 = mins
//                m0..m7 (ggml get_scale_min_k4), as four 64-byte planes
//                O0..O3 where byte 16q + 4i + u of plane t is value 4t + u
//                of row 4q + i; X_t = O_t | (bits 2t, 2t+1 of O3) << 6.
//                Decode: O_t = X_t & 63 (t < 3), O3 = the X_t's top 2 bits.
//   [256, 2304)  qs: 32 chunks of 64 bytes, chunk 8c + j holding bytes
//                qs[32c + 4j .. 32c + 4j + 3] of rows 0..15 (4 bytes each).
// The 12 storage scale bytes encode exactly the 16 six-bit values, so the
// layout is a lossless re-arrangement (same byte count as storage).
//
// Q5_K group block (2816 bytes = 16 x 176): d, dmin and the scale planes as
// Q4_K ([0, 256)), then [256, 768) qh: 8 chunks of 64 bytes, chunk l holding
// qh[4l .. 4l + 3] of rows 0..15, then [768, 2816) qs chunks as Q4_K's. The
// level of element 64c + 4l + u (low nibble) takes bit 2c of qh[4l + u] as
// its fifth bit, element 64c + 32 + 4l + u (high nibble) bit 2c + 1.
//
// Q4_K arithmetic of the x16 kernels (kq_x16_dot_ref is its scalar form, Q5_K likewise;
// GEMV and GEMM of every m, bounds and thread count give the same bits):
// per super-block, the exact int32 S = sum_j sc_j * sum_{e in sub-block j}
// q_e * a_e and Bm = sum_j m_j * (bsums_2j + bsums_2j+1), then
//   acc = fma(dy * d, (float)S, acc),  accm = fma(-dy * dmin, (float)Bm, accm)
// and y = acc + accm. This is not llama.cpp's AVX2 order (8 f32 lanes per
// output, matmul_kquant.h): one rounding per super-block instead of eight, so
// it is at least as accurate; it stays within matmul_kquant.h's tolerance,
//   (k/256 + 8) * 2^-23 * sum_e (|w_e| + |w0_e|) * |a_e|,
// and it lets vpdpbusd sum 16 elements of a sub-block before one vpdpwssd
// applies the scale (10 instead of 16 multiply-class instructions per 512
// multiply-adds), which is what makes the x16 Q4_K GEMM ~2x the storage one.
//
// Q6_K group block (3360 bytes = 16 x 210). Element e has the 6-bit level
// q_e (decode_q6_K) and the int8 scale sc_g of its group g = e / 16; the 16
// elements of group g are its four dwords c = 0..3 (elements 16g + 4c + u,
// u = 0..3).
//   [0, 32)      d[16]     f16, row r at 2r
//   [32, 288)    scales: four 64-byte planes P0..P3, byte 16q + 4i + u of
//                plane k = int8 scale 4k + u of row 4q + i (as Q4_K's O_t):
//                dword r of plane k holds row r's scales 4k .. 4k + 3
//                (a shift pair sign-extends one into the 32-bit lane; a
//                vpshufb + vpsraw 8 gives the (sc, sc) word pairs).
//   [288, 3360)  levels: 48 chunks of 64 bytes, chunks 3g .. 3g + 2 those of
//                group g: chunk 3g + c (c < 3) holds, at byte 4r + u,
//                X_c = q_{16g + 4c + u} | (bits 2c, 2c + 1 of q_{16g + 12 + u}) << 6
//                for row r. Decode: dword c = X_c & 63 (c < 3), dword 3 =
//                the X_c's top 2 bits. So three consecutive chunks hold the
//                whole group (16 elements) of all 16 rows, and the chunks
//                follow the element order.
// The 192 ql/qh bytes hold exactly the 256 levels, so this too is a lossless
// re-arrangement. 3360 is not a multiple of 64: every other group block in
// the stream starts 32 bytes into a cache line (the GEMV uses unaligned loads;
// it reads each group block front to back, which the prefetchers need).
// Q6_K arithmetic of the x16 kernels (kq_x16_dot_ref; as Q4_K's, one
// rounding per super-block): the exact int32
//   S = sum_g sc_g * (sum_{e in group g} q_e * a_e) - 32 * sum_g sc_g * bsum_g
// (bsum_g the activation block's bsums: the level offset 32 is not applied
// per element; |S| <= 16 * 128 * (16 * 63 * 128 + 32 * 16 * 128) < 2^29),
// then acc = fma(dy * d, (float)S, acc) and y = acc. Not llama.cpp's AVX2
// order (8 f32 lanes per output; the storage kernels keep it, and so do the
// tail rows of a tensor whose row count is not a multiple of 16): within
// matmul_kquant.h's tolerance like Q4_K's. It lets a 16-element group be
// summed exactly in int32 (VNNI: 4 vpdpbusd; AVX2: two int16 pairs of
// vpmaddubsw, |.| <= 2 * 2 * 63 * 128 = 32256) before its scale is applied,
// with one int32 sum and one f32 accumulator per activation row, where
// llama.cpp's order needs 8 of each (session 15).
//
// Q2_K and Q3_K group blocks hold f16 fields as arrays of 16 (row r at 2r)
// and byte fields in 64-byte chunks, chunk c of a field holding its bytes
// 4c .. 4c + 3 of rows 0..15 (row r at byte 4r). Element e = 128h + 32j +
// 4l + u (half h = 0..1, quarter j = 0..3, lane l = 0..7, u = 0..3; "quarter
// k" = 4h + j) is in lane l of llama.cpp's AVX2 vec_dot, and its scale group
// is g = e / 16 = 8h + 2j + l / 4.
// Q2_K group block (1344 bytes = 16 x 84 = 21 cache lines), a byte
// permutation of the storage fields:
//   [0, 32) d[16], [32, 64) dmin[16],
//   [64, 320)    scales: 4 chunks; byte 16q + 4i + u of chunk t = scales[4t + u]
//                of row 4q + i (Q4_K's plane order: a vpshufb gives the
//                (value, value) word pair of 16 rows; & 15 = scale, >> 4 = min),
//   [320, 1344)  qs: 16 chunks; element e's level is bits 2j, 2j + 1 of byte
//                u of row r in chunk 8h + l (qs[32h + 4l + u]).
// Q3_K group block (1760 bytes = 16 x 110):
//   [0, 32) d[16],
//   [32, 224)    scales: 3 chunks of the 12 packed scale bytes; the word
//                operations of q3_K_scales_biased on 32-bit lanes turn them
//                into 4 planes of the 16 biased six-bit scales (plane t, byte
//                4r + u = scale 4t + u of row r, + 32),
//   [224, 1760)  levels: 24 chunks, chunk 3l + t holding at byte 4r + u, from
//                the 3-bit levels q_k (decode_q3_K) of elements 32k + 4l + u
//                of row r,
//                  X0 = q_0 | q_1 << 3 | (q_6 & 3) << 6
//                  X1 = q_2 | q_3 << 3 | (q_7 & 3) << 6
//                  X2 = q_4 | q_5 << 3 | (q_6 >> 2) << 6 | (q_7 >> 2) << 7
//                so that 19 byte operations give all 8 levels of a lane (and
//                the hmask bits need no per-quarter shifts). The 96 qs/hmask
//                bytes hold exactly the 256 levels: lossless.
// Both keep llama.cpp's per-lane S_l and f32 order (Q2_K: the mins' fma
// first, as matmul_kquant.h): bit-identical to the storage kernels.
// (Summing each 16-element group in int16 before its scale, as Q4_K, would
// save ~20% of the integer instructions but not the per-lane f32 work of
// Q2_K's mins; bit-identity keeps the golden references of llama.cpp's AVX2
// build exact and needs no second reference order.)
//
// IQ4_XS group block (2176 bytes = 16 x 136 = 34 cache lines), a byte
// permutation of the storage fields (quant/iq4xs_blocks.h):
//   [0, 32) d[16] (f16), [32, 64) scales_h[16] (u16, row r at 2r),
//   [64, 128)    scales_l: one chunk, row r's 4 bytes at 4r,
//   [128, 2176)  qs: 32 chunks; chunk 4j + l holds qs[16j + 4l .. + 3] of
//                rows 0..15: the low nibbles are elements 32j + 4l + u of
//                sub-block j (llama.cpp AVX2 lane l), the high nibbles
//                elements 32j + 16 + 4l + u (lane l + 4).
// The AVX2 and AVX-512 kernels (matmul_iq4xs_x16_{avx2,avx512}.cpp) keep
// matmul_iq4xs.h's per-lane S_l and f32 order: bit-identical to the scalar and
// storage kernels. The AVX-512 one reads the AVX-512 storage kernel's
// regrouped Q8_K activations (matmul_iq4xs_avx512.cpp), not kq_pack_act's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gemv_prefetch.h"
#include "kernels/type_traits.h"

namespace chimera::kernels {

constexpr int kX16Rows = 16;

// Writes the storage-layout super-block sb of row rr (0..15) of the group
// whose first group block is at `group` into out (block_bytes bytes).
using KqX16UnpackFn = void (*)(const uint8_t* group, int rr, int64_t sb, uint8_t* out);

struct KqX16Layout {
  size_t block_bytes = 0;  // storage bytes of one super-block of one row
  KqX16UnpackFn unpack = nullptr;
};
// Null for types without an x16 layout.
const KqX16Layout* kq_x16_layout(format::GgmlType type);

// Fills repack_rows = kX16Rows, repack_row_bytes, repack of an x16 type's
// kernel and sets gemm_packed = packed. No-op for other types.
void kq_x16_set_repack(format::GgmlType type, GemmFn packed, MatmulKernel& k);

// The x16 dot product (type) of one storage-layout weight row and one Q8_K
// activation row (k values), in the kernels' order (above): Q4_K / Q5_K / Q6_K
// their own, Q2_K / Q3_K / IQ4_XS the storage
// kernels' (the scalar one's result).
float kq_x16_dot_ref(format::GgmlType type, const uint8_t* w_row, const uint8_t* a_row, int64_t k);

// The x16 kernels: GEMM for any m (m == 1 is the decode GEMV) over x16 rows
// [r0, r1) (multiples of kX16Rows), straight from the packed bytes. A type is
// repacked into x16 exactly where its ISA has one; null otherwise.
//   AVX-512: Q4_K, Q5_K (matmul_kquant_x16_q4_avx512.cpp), Q6_K (_q6_avx512.cpp),
//   Q2_K, Q3_K (_q23_avx512.cpp), IQ4_XS (matmul_iq4xs_x16_avx512.cpp; regrouped
//   activations, above)
GemmFn kq_x16_gemm_avx512(format::GgmlType type, bool vnni);
GemmFn kq_x16_q6_gemm_avx512(bool vnni);
GemmFn kq_x16_q23_gemm_avx512(format::GgmlType type, bool vnni);
GemmFn kq_x16_iq4xs_gemm_avx512(bool vnni);
//   AMX (Isa::kAmx): Q4_K (_q4_amx.cpp: AMX tiles from kAmxMinActs activation
//   rows, below that kq_x16_gemm_avx512(Q4_K, true); the same bits); null for
//   the other types (their AVX-512 VNNI kernels run)
GemmFn kq_x16_gemm_amx(format::GgmlType type);
//   its tile path for every m (tests: the rows below the threshold too)
GemmFn kq_x16_gemm_amx_tiles();
//   AVX2: Q4_K, Q5_K (_q4_avx2.cpp), Q6_K (_q6_avx2.cpp), Q2_K, Q3_K (_q23_avx2.cpp),
//   in tiles of 8 rows: each 64-byte chunk as two 256-bit halves
GemmFn kq_x16_gemm_avx2(format::GgmlType type);
//   AVX2 + AVX-VNNI: Q4_K (_q4_avx2.cpp, the same tiles with vpdpbusd), Q6_K
//   (_q6_avx2.cpp, vpdpbusd group sums); null for the other types (their
//   AVX2 kernels run)
GemmFn kq_x16_gemm_avx2vnni(format::GgmlType type);
GemmFn kq_x16_q6_gemm_avx2(bool vnni);
GemmFn kq_x16_q23_gemm_avx2(format::GgmlType type);
//   and IQ4_XS (matmul_iq4xs_x16_avx2.cpp; kq_x16_gemm_avx2(IQ4_XS) returns it)
GemmFn kq_x16_iq4xs_gemm_avx2();

// One x16 tile: the 16 rows of the group at `group` x M activation rows (a,
// a_stride bytes apart) -> y[m * ldy + 0..15]; M is the table index + 1.
using KqX16TileFn = void (*)(const uint8_t* group, const uint8_t* a, size_t a_stride, int64_t nsb, float* y,
                             int64_t ldy);
// The decode GEMV's multi-stream step: the kStreams (kq_x16_run's; by
// default kX16Streams) groups at group, group + group_bytes, ... x one
// activation row -> y[0 .. 16 * kStreams),
// interleaved chunk by chunk, each group with the M = 1 tile's arithmetic;
// pf != 0 (the next run of groups is the caller's): prefetch by the
// kernel's policy (gemv_step_pf / gemv_step_prefetch, gemv_prefetch.h).
using KqX16GemvFn = void (*)(const uint8_t* group, size_t group_bytes, const uint8_t* a, int64_t nsb, float* y,
                             size_t pf);

// The blocking every x16 GEMM shares: activation rows in blocks that stay
// L2-resident while the row groups stream past, each group run against the
// block kMaxActs rows at a time. The decode GEMV (one activation row, `gemv`
// given) reads kStreams groups at once and prefetches ahead of them by the
// kernel's policy (gemv_prefetch.h); the groups left over, and the GEMV
// of a type without `gemv`, run the M = 1 tile, which prefetches kPfX16
// group blocks ahead in its one stream, clipped to the group.
// kBalanced: the block's rows in tiles of equal height (within one) rather
// than kMaxActs-row tiles and a short last one (m = 8, kMaxActs = 6: 4 + 4,
// not 6 + 2), for kernels whose short tiles cost nearly as much as full ones.
template <int kStreams = kX16Streams, bool kBalanced = false, int kMaxActs>
void kq_x16_run(const KqX16TileFn (&tiles)[kMaxActs], const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0,
                int64_t i1, KqX16GemvFn gemv = nullptr) {
  const int64_t nsb = g.k / 256;
  if (gemv && i1 - i0 == 1) {
    const size_t group_bytes = (size_t)kX16Rows * g.w_stride;
    const uint8_t* a = g.a + (size_t)i0 * g.a_stride;
    float* y = g.y + i0 * g.ldy;
    gemv_stream_steps<kStreams, kX16Rows>(
        r0, r1, group_bytes,
        [&](int64_t r, size_t pf) { gemv(g.w + (size_t)r * g.w_stride, group_bytes, a, nsb, y + r, pf); },
        [&](int64_t r) { tiles[0](g.w + (size_t)r * g.w_stride, a, 0, nsb, y + r, 0); });
    return;
  }
  const size_t per_block = (256u * 1024u) / (g.a_stride ? g.a_stride : 1) / kMaxActs;
  const int64_t ib_rows = (int64_t)(per_block ? per_block : 1) * kMaxActs;
  for (int64_t ib = i0; ib < i1; ib += ib_rows) {
    const int64_t ie = ib + ib_rows < i1 ? ib + ib_rows : i1;
    for (int64_t r = r0; r < r1; r += kX16Rows) {
      const uint8_t* group = g.w + (size_t)r * g.w_stride;
      if constexpr (kBalanced) {
        const int64_t n = ie - ib, nt = (n + kMaxActs - 1) / kMaxActs, h = n / nt, extra = n % nt;
        for (int64_t t = 0, i = ib; t < nt; ++t) {
          const int64_t mm = h + (t < extra ? 1 : 0);
          tiles[mm - 1](group, g.a + (size_t)i * g.a_stride, g.a_stride, nsb, g.y + i * g.ldy + r, g.ldy);
          i += mm;
        }
      } else {
        for (int64_t i = ib; i < ie; i += kMaxActs) {
          const int64_t mm = ie - i < kMaxActs ? ie - i : kMaxActs;
          tiles[mm - 1](group, g.a + (size_t)i * g.a_stride, g.a_stride, nsb, g.y + i * g.ldy + r, g.ldy);
        }
      }
    }
  }
}

}  // namespace chimera::kernels
