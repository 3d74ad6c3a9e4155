// Internal to the ternary matmul kernels (TQ1_0, TQ2_0, I2_S weights x Q8_K
// activations): the decoded block forms, the kernel-private activation
// layouts, and the row drivers the ISAs share.
//
// Accumulation — exactly llama.cpp's AVX2 ggml_vec_dot_tq{1,2}_0_q8_K (the
// build the golden references come from), identical bits on every ISA here:
// per output 8 f32 lanes; lane l of super-block b gets the exact int32
//   S_l = sum over e with (e mod 32) / 4 == l of t_e * a_e  - bsums[2l] - bsums[2l+1]
// (the -1 offset of the trits folded in through the Q8_K block sums the way
// llama.cpp does it, which changes the per-lane values but not their sum), as
// acc_l = fma(dy * d, (float)S_l, acc_l) (llama.cpp writes mul + add, which
// GCC contracts to an FMA in its -march=native build), and
// y = ((acc0+acc4) + (acc2+acc6)) + ((acc1+acc5) + (acc3+acc7)).
// Only the integer S_l are fixed, not how they are formed, so the SIMD kernels
// use their own element orders (below) and stay bit-identical to the scalar
// kernel. I2_S (quant/i2s.h) uses the same accumulation with d = the tensor's
// f32 scale for every block (bitnet.cpp itself quantizes activations per row;
// chimera uses Q8_K blocks for all ternary types).
// Tolerance vs the f64 dot of dequantized operands (w = d (t-1), a = dy q):
//   (k/256 + 8) * 2^-23 * sum_e |w_e| |a_e| + same with |w| -> |d|.
//
// Layouts:
//   - scalar kernel (and AVX2 TQ1_0 with CHIMERA_TQ1_2BIT=0): block_q8_K
//     activations, each weight row decoded into TqDecoded (trits in natural
//     element order) once per call.
//   - TQ2_0 / I2_S (AVX2, AVX-512): TqAct8 activations in "plane order":
//     chunk n (0..3) = bytes 64n..64n+63 = elements [32n..32n+31 |
//     128+32n..128+32n+31], which is the order (x >> shift_n) & 3 yields from
//     the 64 qs bytes of a TQ2_0 block (or two I2_S blocks) — so decode is one
//     shift + and per 64 elements, straight from storage. Every 4-byte group
//     holds one lane class: byte p of a chunk has class (p / 4) mod 8.
//   - TQ1_0 (AVX2, AVX-512) by default: TqAct8 too; the weights are repacked
//     at load into the 2-bit grouped layout below (the TQ2_0 packed kernels).
//   - TQ1_0 (AVX-512, CHIMERA_TQ1_2BIT=0): TqAct16, int16 activations in 9 chunks of 32 matching
//     the base-3 decoder's u16 lanes (matmul_ternary_avx512.cpp); the int32
//     lane j of a vpdpwssd / vpmaddwd has class j / 2.
// TqAct*.corr[l] = bsums[2l] + bsums[2l+1] (subtracted from S_l).
// GEMV (m == 1) decodes in registers with an L2 prefetch of the rows ahead;
// GEMM decodes each weight row once into a plane-order panel (AVX2: up to
// kTqGroup rows per panel, register tiles of up to 4 activation rows; AVX-512
// packed: row-pair panels, two rows' chunks in one 512-bit vector). Repacked
// weights (TQ2_0, TQ1_0; AVX2 and AVX-512): kTqGroup rows per pass, the decode
// GEMV kTqStreams groups at once (tq_packed_gemv), bit-identical to the
// storage-layout kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/gemv_prefetch.h"
#include "kernels/type_traits.h"
#include "quant/kquant_blocks.h"
#include "quant/ternary_blocks.h"

namespace chimera::kernels {

struct alignas(64) TqDecoded {
  uint8_t t[256];
};

// Decodes one storage block into 256 trits and returns its f32 scale.
using TqDecodeFn = float (*)(const uint8_t* blk, TqDecoded* out);
// Dot of one decoded weight row (nsb blocks, scales wd) with one Q8_K row.
using TqDotFn = float (*)(const TqDecoded* w, const float* wd, const uint8_t* act, int64_t nsb);

float tq1_0_decode(const uint8_t* blk, TqDecoded* out);
float tq2_0_decode(const uint8_t* blk, TqDecoded* out);
// 256 I2_S elements (64 bytes, two blocks) in natural order; returns 0 (the
// scale is per tensor: GemmArgs::w_tail).
float i2s_decode(const uint8_t* blk, TqDecoded* out);

// Plane-order activations for TQ2_0 / I2_S SIMD kernels (one per 256 elements).
struct alignas(64) TqAct8 {
  int8_t qs[256];
  int32_t corr[8];
  float d;
};
// TQ1_0 AVX-512 activations (one per 256 elements; unused slots are 0).
struct alignas(64) TqAct16 {
  int16_t qs[288];
  int32_t corr[8];
  float d;
};
static_assert(sizeof(TqAct8) == 320 && sizeof(TqAct16) == 640);

size_t tq_act8_bytes(int64_t k);
void tq_pack_act8(const float* x, int64_t k, void* out);
#if defined(__x86_64__)
// The same bytes from AVX2 code (matmul_ternary_pack_avx2.cpp), for the AVX2
// and AVX-512 kernel entries.
void tq_pack_act8_avx2(const float* x, int64_t k, void* out);
#endif
size_t tq_act16_bytes(int64_t k);
void tq_pack_act16(const float* x, int64_t k, void* out);

// Load-time repacked TQ2_0 (MatmulKernel::repack, AVX2 / AVX-512 kernels): groups of
// kTqGroup rows; group layout = [f16 scales, [block sb][row j], zero-padded to
// a multiple of 64 bytes] then [64 qs bytes of block sb of row j at
// (sb * kTqGroup + j) * 64] — storage bytes unchanged, so every 64-byte qs
// unit is cache-line aligned and a GEMV streams one contiguous buffer, reading
// kTqGroup rows per pass with one set of activation loads.
// Group of 4 rather than 8: 1-thread cold GEMV, us, 2560x2560 / 6912x2560 /
// 2560x6912 / 640x2560 (loaded machine, 3 alternating rounds): 4 rows
// 91-129 / 315-349 / 347-371 / 32-38, 8 rows 119-134 / 322-357 / 504-561 /
// 33-37 (the storage-layout kernel: 134-197 / 367-532 / 464-643).
constexpr int kTqGroup = 4;
size_t tq_packed_scale_bytes(int64_t k);  // per group
size_t tq_packed_row_bytes(int64_t k);    // averaged over a group
void tq2_0_repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst);
// TQ1_0 rows re-encoded into the same 2-bit layout (trits and f16 scales
// unchanged: the packed kernel is TQ2_0's; 66 instead of 54 bytes per block,
// but a shift + and per 64 weights instead of the base-3 multiplies).
void tq1_0_repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst);
// Fills the repacking fields of a TQ2_0 / TQ1_0 kernel-table entry: the
// group layout above, `repack` converting into it, `gemm_packed` reading it.
inline void tq_add_repacking(MatmulKernel& k, void (*repack)(const uint8_t*, size_t, int64_t, int64_t, uint8_t*),
                             GemmFn gemm_packed) {
  k.repack_rows = kTqGroup;
  k.repack_row_bytes = tq_packed_row_bytes;
  k.repack = repack;
  k.gemm_packed = gemm_packed;
}
// TQ1_0 kernels (AVX2, AVX-512) run on TqAct8 activations and 2-bit repacked
// weights unless CHIMERA_TQ1_2BIT=0 (read when the kernel table is built)
// selects the base-3 kernels (block_q8_K / TqAct16 activations), kept for
// comparison: 1-thread cold GEMV, us, 2560x2560 / 6912x2560 / 2560x6912 /
// 640x2560, AVX-512 VNNI, loaded 2-vCPU Zen 4: base-3 227-338 / 629-880 /
// 659-939 / 79-88, 2-bit packed 114 / 279-285 / 211-308 / 32-33 (TQ2_0
// packed 115 / 204-278 / 312-329 / 29-31). The storage-layout TQ1_0 kernels
// on TqAct8 (tensors left unpacked) re-encode each row with the scalar
// decoder: correct, slow for GEMV.
bool tq1_as_2bit();
// One TQ1_0 block as the 64 qs bytes of the TQ2_0 block of the same trits;
// returns its f16 scale bits.
uint16_t tq1_0_to_tq2_qs(const uint8_t* blk, uint8_t* qs);

// The packed decode GEMV (m == 1, AVX2 and AVX-512) reads kTqStreams groups
// at once, interleaved block by block (a block = kTqGroup 64-byte lines of
// one group, then the same block of the next group), and prefetches the same
// blocks of the next kTqStreams groups into L2 (gemv_prefetch.h); each
// group's arithmetic is the same as alone: bit-identical for any split.
constexpr int kTqStreams = 4;
// One step: S groups (group_bytes apart) at grp x one activation row -> y[0,
// S * kTqGroup); pf != 0: also prefetch the same lines pf bytes further.
using TqPackedStepFn = void (*)(const uint8_t* grp, size_t group_bytes, const TqAct8* act, int64_t k, float* y,
                                size_t pf);
// Rows [r0, r1) x activation row i: `multi` (S = kTqStreams) for every full
// step, prefetching the next step's groups only when they are this call's;
// `single` (S = 1) for the groups left over.
inline void tq_packed_gemv(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i, TqPackedStepFn multi,
                           TqPackedStepFn single) {
  const size_t group_bytes = (size_t)kTqGroup * g.w_stride;
  const auto* act = reinterpret_cast<const TqAct8*>(g.a + (size_t)i * g.a_stride);
  float* y = g.y + i * g.ldy;
  const auto grp = [&](int64_t r) { return g.w + (size_t)(r / kTqGroup) * group_bytes; };
  gemv_stream_steps<kTqStreams, kTqGroup>(
      r0, r1, group_bytes, [&](int64_t r, size_t pf) { multi(grp(r), group_bytes, act, g.k, y + r, pf); },
      [&](int64_t r) { single(grp(r), group_bytes, act, g.k, y + r, 0); });
}

// Per-ISA providers (empty kernel for non-ternary types / other architectures).
MatmulKernel ternary_kernel_scalar(format::GgmlType type);
MatmulKernel ternary_kernel_avx2(format::GgmlType type);
// Isa::kAvx2Vnni: repacked TQ2_0 / TQ1_0 only (empty for the rest, which run AVX2).
MatmulKernel ternary_kernel_avx2vnni(format::GgmlType type);
MatmulKernel ternary_kernel_avx512(format::GgmlType type);
MatmulKernel ternary_kernel_avx512vnni(format::GgmlType type);

namespace detail {

// Final reduction of one output's 8 lanes (fixed order, see above).
inline float tq_finish(const float* acc) {
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// Row driver shared by every ISA: each weight row is decoded block by block
// (decode_block(row, sb, out) returns the block's scale) and dotted with every
// activation row; results do not depend on [r0,r1) x [i0,i1).
template <TqDotFn Dot, class DecodeBlock>
void decoded_rows_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1, DecodeBlock decode_block) {
  const int64_t nsb = g.k / quant::kQK_K;
  thread_local std::vector<TqDecoded> dec;
  thread_local std::vector<float> dd;
  if ((int64_t)dec.size() < nsb) {
    dec.resize((size_t)nsb);
    dd.resize((size_t)nsb);
  }
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    for (int64_t sb = 0; sb < nsb; ++sb) dd[(size_t)sb] = decode_block(w, sb, &dec[(size_t)sb]);
    for (int64_t i = i0; i < i1; ++i) g.y[i * g.ldy + r] = Dot(dec.data(), dd.data(), g.a + (size_t)i * g.a_stride, nsb);
  }
}

// TQ1_0 / TQ2_0 storage blocks of kBlockBytes, each with its own scale.
template <TqDecodeFn Decode, size_t kBlockBytes, TqDotFn Dot>
void tq_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  decoded_rows_gemm<Dot>(g, r0, r1, i0, i1, [](const uint8_t* w, int64_t sb, TqDecoded* out) {
    return Decode(w + (size_t)sb * kBlockBytes, out);
  });
}

// Scalar-layout driver for I2_S: 64-byte decode units, one tensor scale.
template <TqDotFn Dot>
void i2s_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  float scale;
  std::memcpy(&scale, g.w_tail, sizeof(scale));
  decoded_rows_gemm<Dot>(g, r0, r1, i0, i1, [scale](const uint8_t* w, int64_t sb, TqDecoded* out) {
    i2s_decode(w + (size_t)sb * 64, out);
    return scale;
  });
}

}  // namespace detail
}  // namespace chimera::kernels
