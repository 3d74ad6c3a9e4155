// f16/bf16 conversions: exhaustive over all 65536 half values (round trip),
// and float -> half rounding against a reference built from exact arithmetic.
#include <gtest/gtest.h>

#include <cmath>

#include "core/fp16.h"

namespace chimera {
namespace {

TEST(Fp16, RoundTripEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32((uint16_t)h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), (uint16_t)h) << h;
  }
}

// Reference: pick the nearer of the two neighbouring halves (ties to even).
uint16_t ref_to_half(float f) {
  if (std::isnan(f)) return 0x7e00;
  uint16_t best = 0;
  double best_err = INFINITY;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float v = f16_to_f32((uint16_t)h);
    if (std::isnan(v) || std::signbit(v) != std::signbit(f)) continue;
    // For rounding, +-inf stands at +-65536 (the next exponent step); ties to even.
    const double vv = std::isinf(v) ? std::copysign(65536.0, v) : (double)v;
    const double err = std::fabs(vv - (double)f);
    if (err < best_err || (err == best_err && (h & 1) == 0)) {
      best_err = err;
      best = (uint16_t)h;
    }
  }
  return best;
}

TEST(Fp16, RoundingMatchesNearestEven) {
  const float cases[] = {0.f, -0.f, 1.f, 1.0004883f, 1.00048828125f, 1.0014648f, 65504.f, 65519.f, 65520.f,
                         1e-8f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 6.1e-5f, 3.14159f, -2.71828f, 1e5f, -1e-3f};
  for (float f : cases) EXPECT_EQ(f32_to_f16(f), ref_to_half(f)) << f;
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  for (uint32_t h = 0; h < 65536; h += 7) {
    const float f = bf16_to_f32((uint16_t)h);
    if (!std::isnan(f)) {
      EXPECT_EQ(f32_to_bf16(f), h);
    }
  }
}

}  // namespace
}  // namespace chimera
