// Activation rows that stress the exact Q8_K quantizer (quantize_row_q8_K and
// the SIMD packers that must reproduce its bytes): 256-element blocks of
// random values over many magnitudes, a tie of the first-occurrence maximum
// (+x and -x), an all-zero block, blocks with NaN (several payloads), +-inf,
// -0.0 with a denormal maximum, and an all-NaN block.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace chimera::kernels::test_inputs {

inline std::vector<float> q8k_hostile_blocks(uint32_t seed = 5) {
  constexpr int kB = 256;
  std::vector<float> x;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int b = 0; b < 24; ++b) {
    const float scale = std::ldexp(1.f, (b % 12) * 3 - 18);
    for (int j = 0; j < kB; ++j) x.push_back(scale * u(rng));
  }
  for (int j = 0; j < kB; ++j) x.push_back(j == 40 ? -3.f : j == 200 ? 3.f : 0.25f * (float)(j % 9) - 1.f);
  for (int j = 0; j < kB; ++j) x.push_back(0.f);
  const uint32_t nan_bits[3] = {0x7fc00000u, 0x7fc12345u, 0xffc0abcdu};
  for (int j = 0; j < kB; ++j) {
    float v = 0.01f * (float)(j % 17) - 0.08f;
    if (j % 50 == 7) std::memcpy(&v, &nan_bits[(j / 50) % 3], 4);
    x.push_back(v);
  }
  for (int j = 0; j < kB; ++j) x.push_back(j == 77 ? INFINITY : j == 78 ? -INFINITY : (float)j);
  for (int j = 0; j < kB; ++j) x.push_back(j == 3 ? 1e-39f : j % 2 ? -0.f : 1e-41f);
  for (int j = 0; j < kB; ++j) x.push_back(NAN);
  // Exact .5 ties after scaling: max 127 gives iscale -1, so x = k + 0.5 rounds to even.
  for (int j = 0; j < kB; ++j) x.push_back(j == 9 ? -127.f : (float)(j % 100) - 50.5f);
  return x;
}

}  // namespace chimera::kernels::test_inputs
