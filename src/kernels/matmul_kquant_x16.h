// Internal: the 16-row interleaved ("x16") load-time layout of K-quant
// weights, used by the AVX-512 kernels (decode GEMV with 16 rows per vector).
//
// Rows are repacked in groups of kX16Rows; a group stores, per super-block sb
// of k, one "group block" of 16 * block_bytes bytes, and the group blocks of
// a group follow each other (the whole tensor is one stream). Within a group
// block the 16 rows' data is interleaved so that one 64-byte load holds the
// same 4 bytes of every row: a vpmaddubsw against one broadcast activation
// dword then yields, in 32-bit lane r, row r's 4-element partial sum, which
// is exactly what llama.cpp's AVX2 vec_dot accumulates in its lane
// l = (e mod 32) / 4 (matmul_kquant.h), so the GEMV keeps those integer sums
// and the f32 order lane for lane: bit-identical to the storage kernels.
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
#pragma once

#include <cstddef>
#include <cstdint>

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

// GEMV over x16 rows [r0, r1) (multiples of kX16Rows) of g.w for the single
// activation row g.a, writing g.y[r]. Null where the type has no such kernel.
using KqX16GemvFn = void (*)(const GemmArgs& g, int64_t r0, int64_t r1);
KqX16GemvFn kq_x16_gemv_avx512(format::GgmlType type, bool vnni);
// GEMM (any m) over x16 rows [r0, r1) (multiples of kX16Rows) without a
// decoded panel. Null where the type has none (kq_gemm then unpacks blocks).
GemmFn kq_x16_gemm_avx512(format::GgmlType type, bool vnni);

}  // namespace chimera::kernels
