// Scalar half-precision conversions (IEEE binary16 and bfloat16), exact and
// branch-light. These are the reference conversions; SIMD kernels convert in
// registers and are tested against these.
#pragma once

#include <cstdint>
#include <cstring>

namespace chimera {

inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t bits_from_f32(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

// binary16 -> float, exact for all inputs including subnormals, inf and NaN.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return f32_from_bits(sign);
    // subnormal: value = mant * 2^-24
    float v = (float)mant * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

// float -> binary16, round to nearest even (matches F16C _cvtss_sh with RNE).
inline uint16_t f32_to_f16(float f) {
  uint32_t x = bits_from_f32(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u));
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to >= 65520 -> inf
  if (x < 0x38800000u) {  // subnormal or zero in f16
    // Add 0.5 to shift mantissa into place with RNE via float arithmetic.
    float a = f32_from_bits(x) + 0.5f;
    return (uint16_t)(sign | (uint16_t)(bits_from_f32(a) - 0x3f000000u));
  }
  uint32_t mant_odd = (x >> 13) & 1u;
  x += 0xc8000fffu + mant_odd;  // rebias exponent (-112<<23) and round
  return (uint16_t)(sign | (x >> 13));
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

// float -> bfloat16, round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t x = bits_from_f32(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

}  // namespace chimera
