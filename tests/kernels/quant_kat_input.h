// The input rows of the quantizer known-answer vectors (tests/data/quant_kat.txt).
// Included both by the test and by the generator that runs llama.cpp's
// quantizers (scripts/llamacpp_refs/quant_kat.cpp), so both sides quantize the
// very same floats. Plain C++ with integer arithmetic and exact float
// conversions only: the values do not depend on compiler or flags.
#pragma once

#include <cstdint>
#include <vector>

namespace chimera::kat {

inline constexpr int kRows = 8;
inline constexpr int kPerRow = 512;  // two 256-value super-blocks, sixteen 32-value blocks

// xorshift32: deterministic integer stream.
struct Rng {
  uint32_t s;
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
  }
  // Uniform in [-1, 1) on a 2^-23 grid (exact in float).
  float uniform() { return (float)((int32_t)(next() >> 8) - (1 << 23)) / (float)(1 << 23); }
};

// Row r of the known-answer input. Each row stresses one thing:
//  0 uniform [-1, 1)            1 bell-shaped (sum of four uniforms)
//  2 small values with rare ±50 outliers (scale-driven blocks)
//  3 zero blocks, constant blocks, alternating signs
//  4 tiny (1e-7, f16-subnormal scales) next to large (3e4) blocks
//  5 all negative (the signed-max rules of Q4_0/Q8_0/Q8_K)
//  6 values on a coarse grid (ties in rounding: x.5 steps)
//  7 ternary-like {-s, 0, s} with a per-block s (TQ quantizers' home ground)
inline std::vector<float> kat_input() {
  std::vector<float> x((size_t)kRows * kPerRow);
  Rng rng{0x9E3779B9u};
  for (int r = 0; r < kRows; ++r) {
    float* row = x.data() + (size_t)r * kPerRow;
    for (int i = 0; i < kPerRow; ++i) {
      const float u = rng.uniform();
      const int block = i / 32;
      float v = 0;
      switch (r) {
        case 0: v = u; break;
        case 1: {  // calls sequenced explicitly (operand order of + is unspecified)
          const float a = rng.uniform(), b = rng.uniform(), c = rng.uniform();
          v = (((u + a) + b) + c) * 0.5f;
          break;
        }
        case 2: v = (rng.next() % 61 == 0) ? (u < 0 ? -50.f : 50.f) : u * 0.01f; break;
        case 3:
          v = block % 4 == 0 ? 0.f : block % 4 == 1 ? 0.5f : block % 4 == 2 ? (i % 2 ? -0.75f : 0.75f) : u;
          break;
        case 4: v = block % 2 == 0 ? u * 1e-7f : u * 3e4f; break;
        case 5: v = -(u < 0 ? -u : u) - 0.001f; break;
        case 6: v = (float)((int32_t)(rng.next() % 33) - 16) * 0.125f; break;
        case 7: {
          const float s = 0.02f * (float)(1 + block % 5);
          const uint32_t t = rng.next() % 3;
          v = t == 0 ? -s : t == 1 ? 0.f : s;
          break;
        }
      }
      row[i] = v;
    }
  }
  return x;
}

// FNV-1a over bytes: the digest of dequantized rows in the vector file.
inline uint64_t fnv1a(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace chimera::kat
