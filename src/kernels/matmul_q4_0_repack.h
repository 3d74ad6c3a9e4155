// Internal to the matmul kernels: Q4_0 weights repacked at load
// (MatmulKernel::repack, kernels/repack.h) into groups of 8 interleaved rows,
// the Q8_0 scheme of matmul_q8_0_repack.h for 4-bit codes: one 32-byte load
// holds 4 code bytes of each of 8 rows, so a broadcast activation dword feeds
// vpdpbusd (or vpmaddubsw + vpmaddwd) for 8 rows at once, and the f32 scaling
// is done once per block for 8 rows. This is the GEMM that llama.cpp's
// q4_0_8x8 repacking gives its prefill; the storage-layout Q4_0 kernels decode
// one row at a time.
//
// Packed layout of one group of kGroup = 8 rows, nb = k / 32 blocks (group g
// starts at g * 8 * row_bytes(k) = g * 144 nb bytes; the same size as the
// storage rows):
//   [0, 16 nb)            f16 d[nb][8]          block b's scales of rows 0..7
//   [16 nb, 144 nb)       u8  qs[nb][4][8][4]
//                         qs[b][c][r][j] = storage byte qs_r[4 c + j] of block b
// A storage byte j holds element j (low nibble) and element j + 16 (high
// nibble), both as unsigned codes u = w + 8. So chunk c of a block, masked to
// its low nibbles, times the broadcast activation bytes 4c..4c+3 leaves lane r
// = sum of u * a over elements 4c..4c+3 of row r; its high nibbles times bytes
// 16+4c..16+4c+3 the same for elements 16+4c..; the block's activation bias
// (-8 * sum_j a_j, the shared legacy activation layout, matmul_q_legacy.h)
// makes the int32 sumi of each row exact.
//
// Arithmetic: q8r's (matmul_q8_0_repack.h): per output one f32 accumulator,
// blocks in order, acc = fma((float)sumi_b, d_w * d_a, acc), so the packed
// kernels agree bit for bit with each other (scalar reference, AVX2,
// AVX-512 VNNI) and are independent of tiling, m and threads; against the
// storage-layout Q4_0 kernels they agree within q8r's bound.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/type_traits.h"

namespace chimera::kernels::legacy::q4r {

constexpr int kGroup = 8;

inline size_t row_bytes(int64_t k) { return (size_t)(k / 32) * 18; }
// Byte offset of the codes inside a group; block b's codes at + 128 b.
inline size_t codes_offset(int64_t nb) { return (size_t)nb * 16; }

// Storage-layout Q4_0 rows -> packed groups (n % 8 == 0).
void repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst);

// The packed gemm of each ISA (GemmFn; r0 % 8 == 0, r1 % 8 == 0).
void gemm_packed_scalar(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1);
#if defined(__x86_64__)
void gemm_packed_avx2(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1);
void gemm_packed_avx2vnni(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1);
void gemm_packed_avx512vnni(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1);
#endif

// Fills the repacking fields of a Q4_0 kernel-table entry with `gemm_packed`.
inline void add_repacking(MatmulKernel& k, GemmFn gemm_packed) {
  k.repack_rows = kGroup;
  k.repack_row_bytes = row_bytes;
  k.repack = repack;
  k.gemm_packed = gemm_packed;
}

}  // namespace chimera::kernels::legacy::q4r
