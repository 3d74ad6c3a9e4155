// Legacy ggml block formats (Q8_0, Q8_1, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL):
// byte-exact mirrors of ggml-common.h's structs as GGUF stores them, plus
// the scalar reference conversions (legacy_ref.cpp).
//
// Layout: every type packs 32 weights per block with an IEEE binary16 scale d
// (and for the "_1" types a binary16 minimum m, or for Q8_1 the binary16
// s = d * sum(qs)). 4-bit types store element j (0..15) in the LOW nibble of
// qs[j] and element j + 16 in the HIGH nibble; 5-bit types add bit 4 of element
// j (0..31) as bit j of the little-endian uint32 qh. Dequantized value:
//   Q8_0 d*q   Q4_0 d*(q-8)   Q4_1 d*q + m   Q5_0 d*(q-16)   Q5_1 d*q + m
//   IQ4_NL d*kIq4nlValues[q].
//
// Precision: dequantization is one f32 multiply (and add) per element, as
// ggml computes it (f16 -> f32 exact). The weight quantizers follow ggml's
// *_ref functions bit for bit (round-half-away via +0.5 truncation, f16 RNE
// scales). The activation quantizers quantize_row_q8_0 / _q8_1 reproduce
// llama.cpp's x86 AVX2 build bit for bit: amax over the block, d = amax/127,
// id = amax ? 127/amax : 0, q = round-to-nearest-EVEN(x * id) (not the
// round-half-away of the _ref variants), d stored as f16 (RNE); Q8_1 adds
// s = f16(d * sum(q)) with d the f32 value before rounding.
// Round-trip error budgets (RMSE of quantize->dequantize relative to the RMS of
// Gaussian input), tested in tests/kernels/quant_legacy_test.cpp:
//   Q8_0 0.007, Q4_0 0.10, Q4_1 0.09, Q5_0 0.05, Q5_1 0.045, IQ4_NL 0.09
// (measured 0.0053, 0.086, 0.078, 0.042, 0.038, 0.079 on N(0,1) input).
#pragma once

#include <cstddef>
#include <cstdint>

namespace chimera::quant {

constexpr int kQK = 32;  // elements per legacy block

struct block_q8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // quants
};
struct block_q8_1 {
  uint16_t d;     // f16 scale
  uint16_t s;     // f16 d * sum(qs)
  int8_t qs[32];
};
struct block_q4_0 {
  uint16_t d;
  uint8_t qs[16];  // nibbles: low = elements 0..15, high = 16..31
};
struct block_q4_1 {
  uint16_t d;
  uint16_t m;  // f16 minimum
  uint8_t qs[16];
};
struct block_q5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit j = 5th bit of element j (little-endian uint32)
  uint8_t qs[16];
};
struct block_q5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct block_iq4_nl {
  uint16_t d;
  uint8_t qs[16];  // nibble indices into kIq4nlValues, same order as Q4_0
};

static_assert(sizeof(block_q8_0) == 34 && alignof(block_q8_0) == 2);
static_assert(sizeof(block_q8_1) == 36);
static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q4_1) == 20);
static_assert(sizeof(block_q5_0) == 22);
static_assert(sizeof(block_q5_1) == 24);
static_assert(sizeof(block_iq4_nl) == 18);
static_assert(offsetof(block_q5_0, qs) == 6 && offsetof(block_q5_1, qh) == 4 && offsetof(block_q5_1, qs) == 8);
static_assert(offsetof(block_q4_1, qs) == 4 && offsetof(block_q8_1, qs) == 4);

// The IQ4_NL non-linear codebook (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// --- reference dequantization (k = elements, a multiple of 32) ---
void dequantize_row_q8_0(const block_q8_0* x, float* y, int64_t k);
void dequantize_row_q8_1(const block_q8_1* x, float* y, int64_t k);
void dequantize_row_q4_0(const block_q4_0* x, float* y, int64_t k);
void dequantize_row_q4_1(const block_q4_1* x, float* y, int64_t k);
void dequantize_row_q5_0(const block_q5_0* x, float* y, int64_t k);
void dequantize_row_q5_1(const block_q5_1* x, float* y, int64_t k);
void dequantize_row_iq4_nl(const block_iq4_nl* x, float* y, int64_t k);

// --- reference weight quantizers (ggml's quantize_row_*_ref) ---
void quantize_row_q8_0_ref(const float* x, block_q8_0* y, int64_t k);
void quantize_row_q4_0_ref(const float* x, block_q4_0* y, int64_t k);
void quantize_row_q4_1_ref(const float* x, block_q4_1* y, int64_t k);
void quantize_row_q5_0_ref(const float* x, block_q5_0* y, int64_t k);
void quantize_row_q5_1_ref(const float* x, block_q5_1* y, int64_t k);
// ggml's quantize_iq4_nl without importance weights (quantize_row_iq4_nl_impl
// for one 32-element block, ntry = 7); defined in iq4xs_ref.cpp with IQ4_XS,
// which shares its scale search.
void quantize_row_iq4_nl_ref(const float* x, block_iq4_nl* y, int64_t k);

// --- activation quantizers, bit-exact to llama.cpp's x86 AVX2 build ---
void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t k);
void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t k);

// Quantizes one 32-element block the way quantize_row_q8_0 does; returns the
// f32 scale d (before f16 rounding) and writes q. Shared with the matmul
// activation packers so every ISA sees identical integers.
float quantize_block_q8_avx2_semantics(const float* x, int8_t* q);

}  // namespace chimera::quant
