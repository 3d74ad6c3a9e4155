// IQ4_XS (ggml type 23): byte-exact mirror of ggml's block_iq4_xs plus its
// scalar reference conversions (iq4xs_ref.cpp).
//
// Layout of one super-block of 256 weights (136 bytes):
//   d         f16 super-block scale
//   scales_h  u16: bits 2j..2j+1 = high 2 bits of sub-block j's 6-bit scale
//   scales_l  u8[4]: nibble j%2 of byte j/2 = low 4 bits of that scale
//   qs        u8[128]: sub-block j (32 elements) uses qs[16j..16j+15]; element
//             32j+l (l < 16) = low nibble of qs[16j+l], 32j+16+l = high nibble.
//   w = d * (ls_j - 32) * kIq4nlValues[q]      (ls_j in 0..63, q in 0..15)
// The codebook is IQ4_NL's (legacy_blocks.h). Dequantization is f32 exactly as
// ggml's dequantize_row_iq4_xs: dl = d * (ls - 32), then dl * value.
//
// The reference quantizer is ggml's quantize_row_iq4_xs_ref without an
// importance matrix: per sub-block a scale search over 15 trial inverse scales
// (ntry = 7) minimising the x^2-weighted error on the non-linear grid, then one
// f16 super-block scale d = -max_scale/32 and 6-bit sub-block scales, and a
// final nearest-codebook assignment. Round-trip budget (RMSE / RMS of Gaussian
// input, tests/kernels/quant_iq4xs_test.cpp): 0.085 (measured 0.075).
#pragma once

#include <cstddef>
#include <cstdint>

namespace chimera::quant {

struct block_iq4_xs {
  uint16_t d;           // f16 super-block scale
  uint16_t scales_h;    // high 2 bits of the 8 sub-block scales
  uint8_t scales_l[4];  // low 4 bits of the 8 sub-block scales
  uint8_t qs[128];      // 4-bit codebook indices
};
static_assert(sizeof(block_iq4_xs) == 136);
static_assert(offsetof(block_iq4_xs, scales_h) == 2 && offsetof(block_iq4_xs, scales_l) == 4 &&
              offsetof(block_iq4_xs, qs) == 8);

// The 6-bit scale (0..63, bias 32 not removed) of sub-block j (0..7).
inline int iq4_xs_scale(const block_iq4_xs& b, int j) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b.scales_h >> (2 * j)) & 3) << 4);
}

// k = elements, a multiple of 256.
void dequantize_row_iq4_xs(const block_iq4_xs* x, float* y, int64_t k);
void quantize_row_iq4_xs_ref(const float* x, block_iq4_xs* y, int64_t k);

}  // namespace chimera::quant
