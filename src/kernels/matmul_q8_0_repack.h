// Internal to the matmul kernels: Q8_0 weights repacked at load
// (MatmulKernel::repack, kernels/repack.h) into groups of 8 interleaved rows,
// so one 32-byte vector of codes feeds vpdpbusd for 8 rows at once and the
// f32 scaling is done once per block for 8 rows instead of once per row.
//
// Packed layout of one group of kGroup = 8 rows, nb = k / 32 blocks
// (group g starts at g * 8 * repack_row_bytes(k) = g * 272 nb bytes; the same
// size as the storage rows):
//   [0, 16 nb)            f16 d[nb][8]        block b's scales of rows 0..7
//   [16 nb, 272 nb)       u8  code[nb][8][8][4]
//                         code[b][c][r][j] = w_r[32 b + 4 c + j] + 128
// i.e. for each block, 8 chunks c of 32 bytes, each holding the 4 elements
// 4c..4c+3 of rows 0..7 as unsigned codes (u = w ^ 0x80 = w + 128). A chunk
// times the broadcast 4 activation bytes 4c..4c+3 is one vpdpbusd; the 8
// chunks of a block leave lane r = sum_j u_rj a_j, and adding the block's
// activation bias -128 * sum_j a_j (the block's total-bias lane of the
// shared legacy activation layout, matmul_q_legacy.h) gives the exact int32
// sumi of row r.
//
// Arithmetic (every ISA implementing it, scalar reference included): per
// output one f32 accumulator, blocks in order,
//   acc = fma((float)sumi_b, d_w * d_a, acc)      (d_w * d_a rounded to f32)
// so the packed kernels agree bit for bit with each other (scalar == AVX2 ==
// AVX-512 VNNI, tested) and are independent of tiling, m and threads. They
// are NOT bit-identical to the storage-layout Q8_0 kernels (those keep 8 lanes
// per output and sum them at the end); both are within the same bound against
// the exact dot: (nb + 4) * 2^-23 * sum_b |d_w d_a sumi_b|.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/type_traits.h"

namespace chimera::kernels::legacy::q8r {

constexpr int kGroup = 8;

inline size_t row_bytes(int64_t k) { return (size_t)(k / 32) * 34; }
// Byte offset of the codes inside a group.
inline size_t codes_offset(int64_t nb) { return (size_t)nb * 16; }

// Storage-layout Q8_0 rows -> packed groups (n % 8 == 0).
void repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst);

// The packed gemm of each ISA (GemmFn; r0 % 8 == 0, r1 % 8 == 0).
void gemm_packed_scalar(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1);
#if defined(__x86_64__)
void gemm_packed_avx2(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1);
void gemm_packed_avx2vnni(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1);
void gemm_packed_avx512vnni(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1);
#endif

// Fills the repacking fields of a Q8_0 kernel-table entry with `gemm_packed`.
inline void add_repacking(MatmulKernel& k, GemmFn gemm_packed) {
  k.repack_rows = kGroup;
  k.repack_row_bytes = row_bytes;
  k.repack = repack;
  k.gemm_packed = gemm_packed;
}

}  // namespace chimera::kernels::legacy::q8r
