// K-quant ggml block formats (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and the Q8_K
// activation type): byte-exact mirrors of ggml-common.h's structs as GGUF
// stores them, plus the scalar reference conversions (kquant_ref.cpp).
//
// Layout: every type packs a super-block of 256 weights (kQK_K). Scales are
// per sub-block (16 elements: Q2_K, Q3_K, Q6_K; 32 elements: Q4_K, Q5_K):
//   Q2_K  w = d*(sc&15)*q - dmin*(sc>>4)          q 2 bit, sc 4+4 bit per 16
//   Q3_K  w = d*(sc-32)*(q-4)                      q 2 bit + hmask bit, sc 6 bit
//   Q4_K  w = d*sc*q - dmin*m                      q 4 bit, sc/m 6 bit (12 bytes)
//   Q5_K  w = d*sc*q - dmin*m                      q 4 bit + qh bit, as Q4_K
//   Q6_K  w = d*sc*(q-32)                          q 4 bit ql + 2 bit qh, sc int8
//   Q8_K  a = d*q (f32 d, int8 q) with bsums[j] = sum of q[16j..16j+15]
// Element orders (which byte/bit holds element e) are documented next to the
// scalar decoders in kquant_ref.cpp; they follow ggml's dequantize_row_*.
//
// Precision: dequantization is f32 arithmetic exactly as ggml writes it
// (d*sc computed first, then times q, minus dmin*m). The weight quantizers are
// ports of ggml's *_ref quantizers (make_qkx2_quants / make_qx_quants /
// make_q3_quants; nearest_int = round-half-even via the 1.5*2^23 magic). The
// activation quantizer quantize_row_q8_K is bit-exact to llama.cpp's x86 build
// (which uses quantize_row_q8_K_ref there): max = signed value of largest
// magnitude (first occurrence), iscale = -127/max, q = min(127, nearest_int(
// iscale*x)), d = 1/iscale, bsums over 16 elements; an all-zero block gives
// d = 0, q = 0, bsums = 0.
// Round-trip error budgets (RMSE of quantize->dequantize relative to the RMS of
// Gaussian input), tested in tests/kernels/quant_kquant_test.cpp:
//   Q2_K 0.40, Q3_K 0.20, Q4_K 0.10, Q5_K 0.05, Q6_K 0.025, Q8_K 0.008
// (measured: Q2_K 0.294, Q3_K 0.149, Q4_K 0.072, Q5_K 0.036, Q6_K 0.018, Q8_K 0.0067).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace chimera::quant {

constexpr int kQK_K = 256;  // elements per K-quant super-block

struct block_q2_K {
  uint8_t scales[16];  // low nibble: scale, high nibble: min, per 16 elements
  uint8_t qs[64];      // 2-bit quants
  uint16_t d;          // f16 super-block scale for scales
  uint16_t dmin;       // f16 super-block scale for mins
};
struct block_q3_K {
  uint8_t hmask[32];   // high bit of each quant
  uint8_t qs[64];      // low 2 bits
  uint8_t scales[12];  // 16 6-bit scales, packed
  uint16_t d;          // f16 super-block scale
};
struct block_q4_K {
  uint16_t d;          // f16 super-block scale for scales
  uint16_t dmin;       // f16 super-block scale for mins
  uint8_t scales[12];  // 8 6-bit scales + 8 6-bit mins, packed
  uint8_t qs[128];     // 4-bit quants
};
struct block_q5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];  // as Q4_K
  uint8_t qh[32];      // 5th bit of each quant
  uint8_t qs[128];     // low 4 bits
};
struct block_q6_K {
  uint8_t ql[128];    // low 4 bits
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // 8-bit scales per 16 elements
  uint16_t d;         // f16 super-block scale
};
struct block_q8_K {
  float d;             // scale (f32, 1/iscale)
  int8_t qs[256];      // quants
  int16_t bsums[16];   // sum of qs over each group of 16
};

static_assert(sizeof(block_q2_K) == 84);
static_assert(sizeof(block_q3_K) == 110);
static_assert(sizeof(block_q4_K) == 144);
static_assert(sizeof(block_q5_K) == 176);
static_assert(sizeof(block_q6_K) == 210);
static_assert(sizeof(block_q8_K) == 292);
static_assert(offsetof(block_q2_K, d) == 80 && offsetof(block_q3_K, d) == 108);
static_assert(offsetof(block_q4_K, qs) == 16 && offsetof(block_q5_K, qh) == 16 && offsetof(block_q5_K, qs) == 48);
static_assert(offsetof(block_q6_K, scales) == 192 && offsetof(block_q6_K, d) == 208);
static_assert(offsetof(block_q8_K, qs) == 4 && offsetof(block_q8_K, bsums) == 260);

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the packed
// 12 bytes (ggml's get_scale_min_k4).
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}
// Q3_K: the signed scale (-32..31) of sub-block j (0..15).
inline int q3_K_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}
// Q3_K: all 16 stored six-bit scales at once, out[j] = q3_K_scale(s, j) + 32
// (0..63): low nibbles from bytes 0..7, top two bits from bytes 8..11, as
// byte-wise operations on 32-bit words (what the SIMD decoders widen).
inline void q3_K_scales_biased(const uint8_t* s, uint8_t out[16]) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  constexpr uint32_t kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const uint32_t w[4] = {(u[0] & kLow4) | ((u[2] & kLow2) << 4), (u[1] & kLow4) | (((u[2] >> 2) & kLow2) << 4),
                         ((u[0] >> 4) & kLow4) | (((u[2] >> 4) & kLow2) << 4),
                         ((u[1] >> 4) & kLow4) | (((u[2] >> 6) & kLow2) << 4)};
  std::memcpy(out, w, 16);
}

// --- reference dequantization (k = elements, a multiple of 256) ---
void dequantize_row_q2_K(const block_q2_K* x, float* y, int64_t k);
void dequantize_row_q3_K(const block_q3_K* x, float* y, int64_t k);
void dequantize_row_q4_K(const block_q4_K* x, float* y, int64_t k);
void dequantize_row_q5_K(const block_q5_K* x, float* y, int64_t k);
void dequantize_row_q6_K(const block_q6_K* x, float* y, int64_t k);
void dequantize_row_q8_K(const block_q8_K* x, float* y, int64_t k);

// --- reference weight quantizers (ggml's quantize_row_*_ref, no imatrix) ---
void quantize_row_q2_K_ref(const float* x, block_q2_K* y, int64_t k);
void quantize_row_q3_K_ref(const float* x, block_q3_K* y, int64_t k);
void quantize_row_q4_K_ref(const float* x, block_q4_K* y, int64_t k);
void quantize_row_q5_K_ref(const float* x, block_q5_K* y, int64_t k);
void quantize_row_q6_K_ref(const float* x, block_q6_K* y, int64_t k);

// --- activation quantizer, bit-exact to llama.cpp's x86 build ---
void quantize_row_q8_K(const float* x, block_q8_K* y, int64_t k);

}  // namespace chimera::quant
