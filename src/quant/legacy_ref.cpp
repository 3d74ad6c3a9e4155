// Scalar reference conversions for the legacy ggml block types (see
// legacy_blocks.h for the layouts). Dequantizers compute x*d (+ m) in f32 per
// element exactly as ggml's dequantize_row_*; weight quantizers follow ggml's
// quantize_row_*_ref (f32 arithmetic, truncating casts after +0.5/+8.5/+16.5,
// scales rounded to f16 RNE); the activation quantizers reproduce llama.cpp's
// AVX2 quantize_row_q8_0/q8_1 (id = 127/amax, round-half-even, packs
// saturation) bit for bit. No tolerance applies here: every function is an
// exact specification that the tests compare bit-wise.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/legacy_blocks.h"

namespace chimera::quant {
namespace {

uint32_t load_qh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

// _mm256_cvtps_epi32 on an already-integral value, then the packs_epi32 /
// packs_epi16 saturation to int8. Out-of-range and NaN give INT32_MIN -> -128.
int8_t cvt_pack_i8(float r) {
  if (!(std::fabs(r) < 2147483648.f)) return -128;
  const int32_t v = (int32_t)r;
  return (int8_t)std::clamp(v, -128, 127);
}

}  // namespace

// ---------------------------------------------------------------- dequantize
void dequantize_row_q8_0(const block_q8_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < 32; ++j) y[i * 32 + j] = x[i].qs[j] * d;
  }
}

void dequantize_row_q8_1(const block_q8_1* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < 32; ++j) y[i * 32 + j] = x[i].qs[j] * d;
  }
}

void dequantize_row_q4_0(const block_q4_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[i * 32 + j] = ((x[i].qs[j] & 0x0F) - 8) * d;
      y[i * 32 + j + 16] = ((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1(const block_q4_1* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d), m = f16_to_f32(x[i].m);
    for (int j = 0; j < 16; ++j) {
      y[i * 32 + j] = (x[i].qs[j] & 0x0F) * d + m;
      y[i * 32 + j + 16] = (x[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const block_q5_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < 16; ++j) {
      const int h0 = (int)((qh >> j) & 1u) << 4, h1 = (int)((qh >> (j + 16)) & 1u) << 4;
      y[i * 32 + j] = (((x[i].qs[j] & 0x0F) | h0) - 16) * d;
      y[i * 32 + j + 16] = (((x[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

void dequantize_row_q5_1(const block_q5_1* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d), m = f16_to_f32(x[i].m);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < 16; ++j) {
      const int h0 = (int)((qh >> j) & 1u) << 4, h1 = (int)((qh >> (j + 16)) & 1u) << 4;
      y[i * 32 + j] = ((x[i].qs[j] & 0x0F) | h0) * d + m;
      y[i * 32 + j + 16] = ((x[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

void dequantize_row_iq4_nl(const block_iq4_nl* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[i * 32 + j] = d * kIq4nlValues[x[i].qs[j] & 0x0F];
      y[i * 32 + j + 16] = d * kIq4nlValues[x[i].qs[j] >> 4];
    }
  }
}

// ----------------------------------------------------- reference quantizers
void quantize_row_q8_0_ref(const float* x, block_q8_0* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i, x += 32) {
    float amax = 0.f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < 32; ++j) y[i].qs[j] = (int8_t)std::round(x[j] * id);
  }
}

// Shared by Q4_0 / Q5_0: the element of largest magnitude, sign kept (first wins).
static float signed_absmax(const float* x) {
  float amax = 0.f, max = 0.f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void quantize_row_q4_0_ref(const float* x, block_q4_0* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i, x += 32) {
    const float d = signed_absmax(x) / -8;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < 16; ++j) {
      const uint8_t q0 = (uint8_t)std::min<int>(15, (int8_t)(x[j] * id + 8.5f));
      const uint8_t q1 = (uint8_t)std::min<int>(15, (int8_t)(x[j + 16] * id + 8.5f));
      y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
  }
}

void quantize_row_q4_1_ref(const float* x, block_q4_1* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i, x += 32) {
    float mn = FLT_MAX, mx = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
      if (x[j] < mn) mn = x[j];
      if (x[j] > mx) mx = x[j];
    }
    const float d = (mx - mn) / 15;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(mn);
    for (int j = 0; j < 16; ++j) {
      const uint8_t q0 = (uint8_t)std::min<int>(15, (int8_t)((x[j] - mn) * id + 0.5f));
      const uint8_t q1 = (uint8_t)std::min<int>(15, (int8_t)((x[j + 16] - mn) * id + 0.5f));
      y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
  }
}

void quantize_row_q5_0_ref(const float* x, block_q5_0* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i, x += 32) {
    const float d = signed_absmax(x) / -16;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[i].d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t q0 = (uint8_t)std::min<int>(31, (int8_t)(x[j] * id + 16.5f));
      const uint8_t q1 = (uint8_t)std::min<int>(31, (int8_t)(x[j + 16] * id + 16.5f));
      y[i].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= (uint32_t)((q0 & 0x10u) >> 4) << j;
      qh |= (uint32_t)((q1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void quantize_row_q5_1_ref(const float* x, block_q5_1* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i, x += 32) {
    float mn = FLT_MAX, mx = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
      if (x[j] < mn) mn = x[j];
      if (x[j] > mx) mx = x[j];
    }
    const float d = (mx - mn) / 31;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(mn);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t q0 = (uint8_t)((x[j] - mn) * id + 0.5f);
      const uint8_t q1 = (uint8_t)((x[j + 16] - mn) * id + 0.5f);
      y[i].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= (uint32_t)((q0 & 0x10u) >> 4) << j;
      qh |= (uint32_t)((q1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

// ------------------------------------------- activation quantizers (AVX2)
float quantize_block_q8_avx2_semantics(const float* x, int8_t* q) {
  float amax = 0.f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  const float id = amax != 0.f ? 127.f / amax : 0.f;
  for (int j = 0; j < 32; ++j) q[j] = cvt_pack_i8(std::nearbyint(x[j] * id));
  return d;
}

void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i) y[i].d = f32_to_f16(quantize_block_q8_avx2_semantics(x + i * 32, y[i].qs));
}

void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i) {
    const float d = quantize_block_q8_avx2_semantics(x + i * 32, y[i].qs);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += y[i].qs[j];
    y[i].d = f32_to_f16(d);
    y[i].s = f32_to_f16(d * (float)sum);
  }
}

}  // namespace chimera::quant
