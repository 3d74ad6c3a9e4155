// Scalar reference conversions for the ternary block formats TQ1_0 / TQ2_0
// (layouts and element orders: ternary_blocks.h). Ports of ggml's
// dequantize_row_tq*_0 / quantize_row_tq*_0_ref, byte-exact: the quantizers
// use d = f16(max|x|) and lroundf(x / d) (round half away from zero) exactly
// as ggml does, and the TQ1_0 base-3 packing stores ceil(v * 256 / 243).
// Precision: dequantization (t - 1) * d is exact in f32.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/ternary_blocks.h"

namespace chimera::quant {
namespace {

constexpr uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};

inline uint8_t trit_of(uint8_t byte, int n) {
  const uint8_t q = (uint8_t)(byte * kPow3[n]);
  return (uint8_t)(((uint16_t)q * 3) >> 8);
}

// Base-3 packing of `count` trits (first trit most significant), padded to 5
// digits, stored as the ceiling of v * 256 / 243.
inline uint8_t pack_base3(const uint8_t* t, int count, int stride) {
  uint8_t q = 0;
  for (int n = 0; n < count; ++n) q = (uint8_t)(q * 3 + t[n * stride]);
  for (int n = count; n < 5; ++n) q = (uint8_t)(q * 3);
  return (uint8_t)(((uint16_t)q * 256 + (243 - 1)) / 243);
}

// Per-block trits of ternary quantization: d = max|x| (as ggml: f32 amax,
// stored f16), t = lroundf(x * (1/d)) + 1.
uint16_t block_trits(const float* x, uint8_t* t) {
  float amax = 0.f;
  for (int j = 0; j < kQK_K; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float id = amax != 0.f ? 1.0f / amax : 0.0f;
  for (int j = 0; j < kQK_K; ++j) {
    long v = std::lroundf(x[j] * id) + 1;
    t[j] = (uint8_t)(v & 3);
  }
  return f32_to_f16(amax);
}

}  // namespace

void tq1_0_trits(const block_tq1_0& b, uint8_t* t) {
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; ++m) t[32 * n + m] = trit_of(b.qs[m], n);
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; ++m) t[160 + 16 * n + m] = trit_of(b.qs[32 + m], n);
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < 4; ++j) t[240 + 4 * n + j] = trit_of(b.qh[j], n);
}

void tq2_0_trits(const block_tq2_0& b, uint8_t* t) {
  for (int h = 0; h < 2; ++h)
    for (int n = 0; n < 4; ++n)
      for (int m = 0; m < 32; ++m) t[128 * h + 32 * n + m] = (uint8_t)((b.qs[32 * h + m] >> (2 * n)) & 3);
}

void pack_tq1_0(const uint8_t* t, uint16_t d, block_tq1_0* out) {
  for (int m = 0; m < 32; ++m) out->qs[m] = pack_base3(t + m, 5, 32);
  for (int m = 0; m < 16; ++m) out->qs[32 + m] = pack_base3(t + 160 + m, 5, 16);
  for (int j = 0; j < 4; ++j) out->qh[j] = pack_base3(t + 240 + j, 4, 4);
  out->d = d;
}

void pack_tq2_0(const uint8_t* t, uint16_t d, block_tq2_0* out) {
  for (int h = 0; h < 2; ++h) {
    for (int m = 0; m < 32; ++m) {
      uint8_t q = 0;
      for (int n = 0; n < 4; ++n) q = (uint8_t)(q | ((t[128 * h + 32 * n + m] & 3) << (2 * n)));
      out->qs[32 * h + m] = q;
    }
  }
  out->d = d;
}

void dequantize_row_tq1_0(const block_tq1_0* x, float* y, int64_t k) {
  uint8_t t[kQK_K];
  for (int64_t i = 0; i < k / kQK_K; ++i) {
    const float d = f16_to_f32(x[i].d);
    tq1_0_trits(x[i], t);
    for (int e = 0; e < kQK_K; ++e) y[i * kQK_K + e] = (float)((int)t[e] - 1) * d;
  }
}

void dequantize_row_tq2_0(const block_tq2_0* x, float* y, int64_t k) {
  uint8_t t[kQK_K];
  for (int64_t i = 0; i < k / kQK_K; ++i) {
    const float d = f16_to_f32(x[i].d);
    tq2_0_trits(x[i], t);
    for (int e = 0; e < kQK_K; ++e) y[i * kQK_K + e] = (float)((int)t[e] - 1) * d;
  }
}

void quantize_row_tq1_0(const float* x, block_tq1_0* y, int64_t k) {
  uint8_t t[kQK_K];
  for (int64_t i = 0; i < k / kQK_K; ++i) {
    const uint16_t d = block_trits(x + i * kQK_K, t);
    pack_tq1_0(t, d, &y[i]);
  }
}

void quantize_row_tq2_0(const float* x, block_tq2_0* y, int64_t k) {
  uint8_t t[kQK_K];
  for (int64_t i = 0; i < k / kQK_K; ++i) {
    const uint16_t d = block_trits(x + i * kQK_K, t);
    pack_tq2_0(t, d, &y[i]);
  }
}

}  // namespace chimera::quant
