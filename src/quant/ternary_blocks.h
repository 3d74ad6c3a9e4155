// Ternary ggml block formats TQ1_0 and TQ2_0 (BitNet b1.58 weights): byte-exact
// mirrors of ggml-common.h's block_tq1_0 / block_tq2_0 as GGUF stores them, and
// the scalar reference conversions (ternary_ref.cpp).
//
// Layout: super-blocks of 256 weights (kQK_K), each weight w = d * (t - 1)
// with a trit t in {0, 1, 2} and one f16 scale d per block.
//   TQ2_0 (66 bytes): qs[64] 2-bit trits, d. Element e = 128*h + 32*n + m sits
//     in qs[32*h + m] at bits 2n..2n+1 (h in 0..1, n in 0..3, m in 0..31).
//   TQ1_0 (54 bytes): qs[48] base-3 packed 5 trits per byte, qh[4] 4 trits per
//     byte, d. Elements 0..159: e = 32*n + m is trit n of qs[m]; 160..239:
//     e = 160 + 16*n + m is trit n of qs[32 + m]; 240..255: e = 240 + 4*n + j
//     is trit n of qh[j]. A byte b holds its trits as a fixed-point fraction
//     b = ceil(v * 256 / 243) (v the base-3 number, trit 0 most significant);
//     trit n = ((uint8_t)(b * 3^n) * 3) >> 8 (ggml's decoder, exact for every
//     byte the quantizer writes).
// Precision: dequantization is (float)(t - 1) * d, exact. The reference
// quantizers are ports of ggml's quantize_row_tq{1,2}_0_ref: d = f16(max|x|)
// per block, t = lroundf(x / d) + 1 (so ternary-valued input {-s, 0, s} is
// reproduced exactly when s is f16-representable). Round-trip error tests:
// tests/kernels/quant_ternary_test.cpp (exact on ternary data).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/kquant_blocks.h"

namespace chimera::quant {

struct block_tq1_0 {
  uint8_t qs[48];  // 5 trits per byte (3^5 = 243 < 256)
  uint8_t qh[4];   // 4 trits per byte
  uint16_t d;      // f16 block scale
};
struct block_tq2_0 {
  uint8_t qs[64];  // 2 bits per trit
  uint16_t d;      // f16 block scale
};
static_assert(sizeof(block_tq1_0) == 54);
static_assert(sizeof(block_tq2_0) == 66);

// Decodes one block's trits (0, 1, 2) in natural element order into t[256].
void tq1_0_trits(const block_tq1_0& b, uint8_t* t);
void tq2_0_trits(const block_tq2_0& b, uint8_t* t);

// k must be a multiple of 256.
void dequantize_row_tq1_0(const block_tq1_0* x, float* y, int64_t k);
void dequantize_row_tq2_0(const block_tq2_0* x, float* y, int64_t k);
void quantize_row_tq1_0(const float* x, block_tq1_0* y, int64_t k);
void quantize_row_tq2_0(const float* x, block_tq2_0* y, int64_t k);

// Packs 256 trits (0..2, natural order) with block scale d (already f16) into
// a block; the inverse of the *_trits decoders.
void pack_tq1_0(const uint8_t* t, uint16_t d, block_tq1_0* out);
void pack_tq2_0(const uint8_t* t, uint16_t d, block_tq2_0* out);

}  // namespace chimera::quant
