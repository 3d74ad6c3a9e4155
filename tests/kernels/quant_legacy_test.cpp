// Legacy block quants (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; Q8_0/Q8_1
// activations): block layouts byte-exact (known bytes -> known values),
// quantize -> dequantize error budgets, the activation quantizers bit-exact
// against an independent implementation of llama.cpp's AVX2 formula, and the
// matmul kernels of every available ISA against a double reference.
//
// Kernel reference: per block b, sum_j (d_w q_w_j) * (d_a q_a_j) in double over
// the weight's signed codes and the activation's int8 codes, plus m_w * s_a
// (s_a the f16 value the Q8_1 block stores) for the _1 types. Tolerance:
//   |y - ref| <= (nb + 8) * 2^-23 * sum_b (|d_w d_a| sum_j |q_w_j q_a_j| + |m_w s_a|)
// Exact checks: 1 vs 2 threads, m == 1 vs batch, arbitrary gemm partitions,
// and AVX2 vs AVX-512 VNNI (same lane sums, same f32 operation order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/type_traits.h"
#include "quant/legacy_blocks.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
using namespace quant;

const GgmlType kTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                           GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL};

bool has_min(GgmlType t) { return t == GgmlType::Q4_1 || t == GgmlType::Q5_1; }
size_t block_bytes(GgmlType t) { return format::ggml_type_info((uint32_t)t)->type_size; }

// ------------------------------------------------------------ block layout

TEST(QuantLegacyLayout, KnownBytesDecode) {
  // Q8_0: d = 0.5 (0x3800), qs[j] = j - 16.
  {
    uint8_t raw[34] = {0x00, 0x38};
    for (int j = 0; j < 32; ++j) raw[2 + j] = (uint8_t)(int8_t)(j - 16);
    block_q8_0 b;
    std::memcpy(&b, raw, 34);
    float y[32];
    dequantize_row_q8_0(&b, y, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j - 16) * 0.5f);
  }
  // Q4_0: d = 1.0 (0x3C00); byte j = low (j) | high (15 - j).
  {
    uint8_t raw[18] = {0x00, 0x3C};
    for (int j = 0; j < 16; ++j) raw[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    block_q4_0 b;
    std::memcpy(&b, raw, 18);
    float y[32];
    dequantize_row_q4_0(&b, y, 32);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[j], (float)(j - 8));
      EXPECT_EQ(y[j + 16], (float)(15 - j - 8));
    }
  }
  // Q4_1: d = 2.0 (0x4000), m = -1.0 (0xBC00), byte 0 = 0xF3.
  {
    uint8_t raw[20] = {0x00, 0x40, 0x00, 0xBC, 0xF3};
    block_q4_1 b;
    std::memcpy(&b, raw, 20);
    float y[32];
    dequantize_row_q4_1(&b, y, 32);
    EXPECT_EQ(y[0], 3 * 2.f - 1.f);
    EXPECT_EQ(y[16], 15 * 2.f - 1.f);
    EXPECT_EQ(y[1], -1.f);
  }
  // Q5_0: d = 1, qh = 0x80000001 (bit 4 of elements 0 and 31), qs[0] = 0x21, qs[15] = 0x70.
  {
    uint8_t raw[22] = {0x00, 0x3C, 0x01, 0x00, 0x00, 0x80};
    raw[6] = 0x21;
    raw[6 + 15] = 0x70;
    block_q5_0 b;
    std::memcpy(&b, raw, 22);
    float y[32];
    dequantize_row_q5_0(&b, y, 32);
    EXPECT_EQ(y[0], (float)((0x1 | 0x10) - 16));  // 1
    EXPECT_EQ(y[16], (float)(0x2 - 16));          // -14
    EXPECT_EQ(y[15], (float)(0x0 - 16));          // -16
    EXPECT_EQ(y[31], (float)((0x7 | 0x10) - 16)); // 7
    EXPECT_EQ(y[5], -16.f);
  }
  // Q5_1: d = 0.5, m = 1, qh bit 16 -> element 16.
  {
    uint8_t raw[24] = {0x00, 0x38, 0x00, 0x3C, 0x00, 0x00, 0x01, 0x00};
    raw[8] = 0x5A;
    block_q5_1 b;
    std::memcpy(&b, raw, 24);
    float y[32];
    dequantize_row_q5_1(&b, y, 32);
    EXPECT_EQ(y[0], 0xA * 0.5f + 1.f);
    EXPECT_EQ(y[16], (0x5 | 0x10) * 0.5f + 1.f);
  }
  // IQ4_NL: d = 1, byte 0 = 0xF0 -> elements 0 (-127) and 16 (113).
  {
    uint8_t raw[18] = {0x00, 0x3C, 0xF0};
    block_iq4_nl b;
    std::memcpy(&b, raw, 18);
    float y[32];
    dequantize_row_iq4_nl(&b, y, 32);
    EXPECT_EQ(y[0], -127.f);
    EXPECT_EQ(y[16], 113.f);
    EXPECT_EQ(y[1], -127.f);
  }
}

TEST(QuantLegacyLayout, SizesMatchGgmlTypeTable) {
  EXPECT_EQ(sizeof(block_q8_0), block_bytes(GgmlType::Q8_0));
  EXPECT_EQ(sizeof(block_q8_1), block_bytes(GgmlType::Q8_1));
  EXPECT_EQ(sizeof(block_q4_0), block_bytes(GgmlType::Q4_0));
  EXPECT_EQ(sizeof(block_q4_1), block_bytes(GgmlType::Q4_1));
  EXPECT_EQ(sizeof(block_q5_0), block_bytes(GgmlType::Q5_0));
  EXPECT_EQ(sizeof(block_q5_1), block_bytes(GgmlType::Q5_1));
  EXPECT_EQ(sizeof(block_iq4_nl), block_bytes(GgmlType::IQ4_NL));
  for (GgmlType t : kTypes) {
    const WeightTypeTraits* tr = weight_type_traits(t);
    ASSERT_NE(tr, nullptr);
    EXPECT_EQ(tr->block_size, 32);
    EXPECT_EQ(tr->type_size, block_bytes(t));
    EXPECT_EQ(tr->vec_dot_type, has_min(t) ? GgmlType::Q8_1 : GgmlType::Q8_0);
  }
}

// ------------------------------------------------- quantize -> dequantize

// Quantizes x with the type's reference quantizer into bytes.
std::vector<uint8_t> quantize_ref(GgmlType t, const float* x, int64_t k) {
  std::vector<uint8_t> out((size_t)(k / 32) * block_bytes(t));
  void* o = out.data();
  switch (t) {
    case GgmlType::Q8_0: quantize_row_q8_0_ref(x, (block_q8_0*)o, k); break;
    case GgmlType::Q4_0: quantize_row_q4_0_ref(x, (block_q4_0*)o, k); break;
    case GgmlType::Q4_1: quantize_row_q4_1_ref(x, (block_q4_1*)o, k); break;
    case GgmlType::Q5_0: quantize_row_q5_0_ref(x, (block_q5_0*)o, k); break;
    case GgmlType::Q5_1: quantize_row_q5_1_ref(x, (block_q5_1*)o, k); break;
    case GgmlType::IQ4_NL: quantize_row_iq4_nl_ref(x, (block_iq4_nl*)o, k); break;
    default: ADD_FAILURE();
  }
  return out;
}

double budget(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return 0.007;  // measured 0.0053
    case GgmlType::Q4_0: return 0.10;   // 0.086
    case GgmlType::Q4_1: return 0.09;   // 0.078
    case GgmlType::Q5_0: return 0.05;   // 0.042
    case GgmlType::Q5_1: return 0.045;  // 0.038
    default: return 0.09;               // IQ4_NL (simple quantizer) 0.079
  }
}

TEST(QuantLegacyRoundTrip, RmseWithinBudget) {
  const int64_t k = 32 * 512;
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> x((size_t)k), y((size_t)k);
  for (auto& v : x) v = n(rng);
  for (GgmlType t : kTypes) {
    const std::vector<uint8_t> q = quantize_ref(t, x.data(), k);
    weight_type_traits(t)->row_to_f32(q.data(), y.data(), k);
    double se = 0, ss = 0;
    for (int64_t j = 0; j < k; ++j) {
      se += (double)(y[j] - x[j]) * (y[j] - x[j]);
      ss += (double)x[j] * x[j];
    }
    const double rel = std::sqrt(se / ss);
    EXPECT_LE(rel, budget(t)) << format::ggml_type_name(t);
    EXPECT_GE(rel, budget(t) / 8) << format::ggml_type_name(t) << " (budget too loose)";
  }
}

TEST(QuantLegacyRoundTrip, Q8_0RefRoundsHalfAway) {
  float x[32] = {};
  x[0] = 127.f;  // amax = 127 -> d = 1
  x[1] = 2.5f;
  x[2] = -3.5f;
  block_q8_0 b;
  quantize_row_q8_0_ref(x, &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), 1.f);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -4);
}

// ------------------------------------------------ activation quantizers

// Independent implementation of llama.cpp's AVX2 quantize_row_q8_0 / q8_1:
// RNE via the 1.5 * 2^23 magic constant (|v| <= 127 here).
void q8_expected(const float* x, int8_t* q, float* d_out, int* sum) {
  float amax = 0.f;
  for (int j = 31; j >= 0; --j) amax = std::fabs(x[j]) > amax ? std::fabs(x[j]) : amax;
  *d_out = amax / 127.f;
  const float id = amax == 0.f ? 0.f : 127.f / amax;
  *sum = 0;
  for (int j = 0; j < 32; ++j) {
    volatile float v = x[j] * id;
    volatile float r = (v + 12582912.f) - 12582912.f;
    q[j] = (int8_t)(int)r;
    *sum += q[j];
  }
}

std::vector<float> activation_cases() {
  std::vector<float> x;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  // Ties: amax 127 -> id 1, so x.5 values round to even.
  for (int j = 0; j < 32; ++j) x.push_back(j == 0 ? 127.f : (float)(j - 16) + 0.5f);
  for (int j = 0; j < 32; ++j) x.push_back(0.f);  // zero block
  for (int j = 0; j < 32; ++j) x.push_back(j == 5 ? -1e-30f : 0.f);
  for (int b = 0; b < 200; ++b) {
    const float scale = std::ldexp(1.f, (b % 40) - 20);
    for (int j = 0; j < 32; ++j) x.push_back(scale * u(rng));
  }
  return x;
}

TEST(QuantLegacyActivation, Q8_0AndQ8_1BitExact) {
  const std::vector<float> x = activation_cases();
  const int64_t k = (int64_t)x.size(), nb = k / 32;
  std::vector<block_q8_0> q0((size_t)nb);
  std::vector<block_q8_1> q1((size_t)nb);
  quantize_row_q8_0(x.data(), q0.data(), k);
  quantize_row_q8_1(x.data(), q1.data(), k);
  for (int64_t b = 0; b < nb; ++b) {
    int8_t q[32];
    float d;
    int sum;
    q8_expected(x.data() + 32 * b, q, &d, &sum);
    EXPECT_EQ(q0[b].d, f32_to_f16(d)) << b;
    EXPECT_EQ(q1[b].d, f32_to_f16(d)) << b;
    EXPECT_EQ(q1[b].s, f32_to_f16(d * (float)sum)) << b;
    EXPECT_EQ(std::memcmp(q0[b].qs, q, 32), 0) << b;
    EXPECT_EQ(std::memcmp(q1[b].qs, q, 32), 0) << b;
  }
  // Ties to even: 0.5 -> 0, 1.5 -> 2, -0.5 -> -0, -1.5 -> -2, 2.5 -> 2.
  EXPECT_EQ(q0[0].qs[16], 0);
  EXPECT_EQ(q0[0].qs[17], 2);
  EXPECT_EQ(q0[0].qs[15], 0);
  EXPECT_EQ(q0[0].qs[14], -2);
  EXPECT_EQ(q0[0].qs[18], 2);
  // The table's act_from_f32 is this quantizer.
  std::vector<block_q8_0> t0((size_t)nb);
  weight_type_traits(GgmlType::Q4_0)->act_from_f32(x.data(), t0.data(), k);
  EXPECT_EQ(std::memcmp(t0.data(), q0.data(), t0.size() * sizeof(block_q8_0)), 0);
  std::vector<block_q8_1> t1((size_t)nb);
  weight_type_traits(GgmlType::Q5_1)->act_from_f32(x.data(), t1.data(), k);
  EXPECT_EQ(std::memcmp(t1.data(), q1.data(), t1.size() * sizeof(block_q8_1)), 0);
}

// Every ISA's activation packer (the kernels' own layout, act_bytes) writes the
// same bytes as the scalar one: ties, zero / tiny / wide-range blocks, and
// blocks with NaN, +-inf and -0.0 elements (NaN skipped by the maximum,
// inf scale -> id 0, NaN products -> -128).
TEST(QuantLegacyActivation, EveryIsaPacksTheScalarBytes) {
  std::vector<float> x = activation_cases();
  const float inf = INFINITY, nan = NAN;
  for (int j = 0; j < 32; ++j) x.push_back(j == 3 ? nan : (float)j - 7.25f);
  for (int j = 0; j < 32; ++j) x.push_back(j == 9 ? inf : (float)j);
  for (int j = 0; j < 32; ++j) x.push_back(j == 1 ? -inf : j == 2 ? nan : -0.f);
  for (int j = 0; j < 32; ++j) x.push_back(j % 2 ? -0.f : 1e-40f);  // denormal amax
  const int64_t k = (int64_t)x.size();
  const GgmlType types[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                            GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL};
  int compared = 0;
  for (GgmlType t : types) {
    const MatmulKernel* ref = matmul_kernel(t, Isa::kScalar);
    ASSERT_NE(ref, nullptr);
    const size_t bytes = ref->act_bytes(k);
    std::vector<uint8_t> want(bytes, 0xAB);
    ref->pack_act(x.data(), k, want.data());
    // Lane 1 of each block's sexp holds the sum of its 8 bias lanes (what the
    // packed 8-row kernels start from), as int32 bits.
    const int64_t nb = k / 32;
    for (int64_t b = 0; b < nb; ++b) {
      int32_t lanes[8], total;
      std::memcpy(lanes, want.data() + k + 32 * nb + 32 * b, 32);
      std::memcpy(&total, want.data() + k + 64 * nb + 32 * b + 4, 4);
      int64_t sum = 0;
      for (int32_t v : lanes) sum += v;
      ASSERT_EQ(total, sum) << format::ggml_type_name(t) << " block " << b;
    }
    for (Isa isa : available_isas()) {
      const MatmulKernel* kern = matmul_kernel(t, isa);
      if (!kern || kern->pack_act == ref->pack_act) continue;
      ASSERT_EQ(kern->act_bytes(k), bytes) << kern->name;
      std::vector<uint8_t> got(bytes, 0xCD);
      kern->pack_act(x.data(), k, got.data());
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(got[i], want[i]) << kern->name << " byte " << i;
      ++compared;
    }
  }
  if (compared == 0) GTEST_SKIP() << "no ISA with its own packer on this machine";
}

// ------------------------------------------------------------- kernels

// Random block bytes covering every code (Q8_0 -128 included), with sane
// random f16 scales (and minimums).
std::vector<uint8_t> random_weights(GgmlType t, int64_t rows, int64_t k, uint32_t seed) {
  const size_t bb = block_bytes(t), nb = (size_t)(k / 32);
  std::vector<uint8_t> w((size_t)rows * nb * bb);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& v : w) v = (uint8_t)byte(rng);
  for (size_t blk = 0; blk < (size_t)rows * nb; ++blk) {
    uint8_t* p = w.data() + blk * bb;
    const uint16_t d = f32_to_f16(u(rng) * 0.05f), m = f32_to_f16(u(rng) * 0.5f);
    std::memcpy(p, &d, 2);
    if (has_min(t)) std::memcpy(p + 2, &m, 2);
  }
  return w;
}

// Signed codes q_w and (d, m) of one weight block, decoded independently.
void decode_ref(GgmlType t, const uint8_t* p, int q[32], double* d, double* m) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  *d = f16_to_f32(h);
  *m = 0;
  if (has_min(t)) {
    std::memcpy(&h, p + 2, 2);
    *m = f16_to_f32(h);
  }
  if (t == GgmlType::Q8_0) {
    for (int j = 0; j < 32; ++j) q[j] = (int8_t)p[2 + j];
    return;
  }
  const bool five = t == GgmlType::Q5_0 || t == GgmlType::Q5_1;
  const int qs_off = t == GgmlType::Q5_1 ? 8 : t == GgmlType::Q5_0 ? 6 : t == GgmlType::Q4_1 ? 4 : 2;
  uint32_t qh = 0;
  if (five) std::memcpy(&qh, p + (t == GgmlType::Q5_1 ? 4 : 2), 4);
  for (int j = 0; j < 32; ++j) {
    const uint8_t byte = p[qs_off + (j % 16)];
    int v = j < 16 ? (byte & 15) : (byte >> 4);
    if (five) v |= (int)((qh >> j) & 1u) << 4;
    if (t == GgmlType::IQ4_NL) v = kIq4nlValues[v];
    else if (t == GgmlType::Q4_0) v -= 8;
    else if (t == GgmlType::Q5_0) v -= 16;
    q[j] = v;
  }
}

struct Ref {
  std::vector<double> y, bound;
};

Ref reference(GgmlType t, const std::vector<uint8_t>& w, int64_t rows, int64_t k, const std::vector<float>& x,
              int64_t m) {
  const int64_t nb = k / 32;
  const size_t bb = block_bytes(t);
  Ref ref;
  ref.y.assign((size_t)(rows * m), 0.0);
  ref.bound.assign((size_t)(rows * m), 0.0);
  std::vector<block_q8_1> a((size_t)(m * nb));
  for (int64_t i = 0; i < m; ++i) quantize_row_q8_1(x.data() + i * k, a.data() + i * nb, k);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < m; ++i) {
      double s = 0, bound = 0;
      for (int64_t b = 0; b < nb; ++b) {
        int q[32];
        double d, mn;
        decode_ref(t, w.data() + ((size_t)r * nb + b) * bb, q, &d, &mn);
        const block_q8_1& ab = a[(size_t)(i * nb + b)];
        const double da = f16_to_f32(ab.d);
        double dot = 0, adot = 0;
        for (int j = 0; j < 32; ++j) {
          dot += (double)q[j] * ab.qs[j];
          adot += std::fabs((double)q[j] * ab.qs[j]);
        }
        s += d * da * dot;
        bound += std::fabs(d * da) * adot;
        if (has_min(t)) {
          s += mn * f16_to_f32(ab.s);
          bound += std::fabs(mn * f16_to_f32(ab.s));
        }
      }
      ref.y[(size_t)(i * rows + r)] = s;
      ref.bound[(size_t)(i * rows + r)] = (double)(nb + 8) * std::ldexp(1.0, -23) * bound + 1e-30;
    }
  }
  return ref;
}

std::vector<float> random_acts(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x((size_t)(m * k));
  for (size_t j = 0; j < x.size(); ++j) x[j] = u(rng) * (1.f + 3.f * (float)((j / 32) % 3));
  return x;
}

std::vector<float> run(GgmlType t, const std::vector<uint8_t>& w, int64_t rows, int64_t k, const std::vector<float>& x,
                       int64_t m, ThreadPool* pool) {
  WeightView v{t, w.data(), rows, k, (size_t)(k / 32) * block_bytes(t)};
  std::vector<float> y((size_t)(rows * m), NAN);
  matmul(v, x.data(), m, k, y.data(), rows, pool);
  return y;
}

ThreadPool& pool2() {
  static ThreadPool p(2);
  return p;
}

TEST(QuantLegacyMatmul, AllIsasMatchReference) {
  const int64_t ks[] = {32, 64, 96, 256, 4096};
  const int64_t rows_list[] = {1, 2, 3, 5, 17, 33};
  const int64_t ms[] = {1, 2, 3, 4, 5, 8, 9, 16};
  uint32_t seed = 100;
  for (GgmlType t : kTypes) {
    for (int64_t k : ks) {
      for (int64_t rows : rows_list) {
        const std::vector<uint8_t> w = random_weights(t, rows, k, ++seed);
        const std::vector<float> x = random_acts(16, k, ++seed);
        const Ref ref = reference(t, w, rows, k, x, 16);
        for (Isa isa : available_isas()) {
          ScopedIsa scoped(isa);
          // Full batch of 16 (which also holds every smaller m's rows: the
          // kernels are row independent, checked below for m == 1).
          const std::vector<float> y16 = run(t, w, rows, k, x, 16, nullptr);
          for (size_t e = 0; e < y16.size(); ++e) {
            ASSERT_LE(std::fabs(y16[e] - ref.y[e]), ref.bound[e])
                << format::ggml_type_name(t) << " isa=" << isa_name(isa) << " k=" << k << " rows=" << rows
                << " e=" << e << " got=" << y16[e] << " want=" << ref.y[e];
          }
          for (int64_t m : ms) {
            const std::vector<float> y = run(t, w, rows, k, x, m, nullptr);
            ASSERT_EQ(std::memcmp(y.data(), y16.data(), y.size() * 4), 0)
                << format::ggml_type_name(t) << " isa=" << isa_name(isa) << " k=" << k << " rows=" << rows
                << " m=" << m << " differs from the same rows in a batch of 16";
          }
          const std::vector<float> y2 = run(t, w, rows, k, x, 16, &pool2());
          ASSERT_EQ(std::memcmp(y2.data(), y16.data(), y2.size() * 4), 0) << isa_name(isa) << " 2 threads";
        }
      }
    }
  }
}

// Calls the kernel directly on odd (r, i) partitions: every split must give
// the same bits as one call over everything (tiling independence).
TEST(QuantLegacyMatmul, PartitionIndependent) {
  const int64_t k = 160, rows = 37, m = 11;
  for (GgmlType t : kTypes) {
    const std::vector<uint8_t> w = random_weights(t, rows, k, 3);
    const std::vector<float> x = random_acts(m, k, 4);
    for (Isa isa : available_isas()) {
      const MatmulKernel* kern = matmul_kernel(t, isa);
      ASSERT_NE(kern, nullptr);
      const size_t stride = (kern->act_bytes(k) + 63) / 64 * 64;
      std::vector<uint8_t> abuf(stride * m + 64);
      uint8_t* a = abuf.data() + (64 - (uintptr_t)abuf.data() % 64) % 64;
      for (int64_t i = 0; i < m; ++i) kern->pack_act(x.data() + i * k, k, a + i * stride);
      GemmArgs g;
      g.w = w.data();
      g.w_stride = (size_t)(k / 32) * block_bytes(t);
      g.a = a;
      g.a_stride = stride;
      g.k = k;
      g.ldy = rows;
      std::vector<float> whole((size_t)(rows * m)), parts((size_t)(rows * m));
      g.y = whole.data();
      kern->gemm(g, 0, rows, 0, m);
      g.y = parts.data();
      const int64_t rs[] = {0, 1, 4, 13, 30, rows}, is[] = {0, 3, 4, 10, m};
      for (int a0 = 0; a0 + 1 < 6; ++a0) {
        for (int b0 = 0; b0 + 1 < 5; ++b0) kern->gemm(g, rs[a0], rs[a0 + 1], is[b0], is[b0 + 1]);
      }
      EXPECT_EQ(std::memcmp(whole.data(), parts.data(), whole.size() * 4), 0) << kern->name;
    }
  }
}

// AVX2 and AVX-512 VNNI kernels form identical int32 lane sums and the same
// f32 operations, so they agree bit for bit.
TEST(QuantLegacyMatmul, Avx2AndVnniAgree) {
  const std::vector<Isa> isas = available_isas();
  if (std::find(isas.begin(), isas.end(), Isa::kAvx512Vnni) == isas.end()) GTEST_SKIP() << "no AVX-512 VNNI";
  const int64_t k = 4096, rows = 9, m = 5;
  for (GgmlType t : kTypes) {
    const std::vector<uint8_t> w = random_weights(t, rows, k, 21);
    const std::vector<float> x = random_acts(m, k, 22);
    std::vector<float> y2, y5;
    {
      ScopedIsa s(Isa::kAvx2);
      y2 = run(t, w, rows, k, x, m, nullptr);
    }
    {
      ScopedIsa s(Isa::kAvx512Vnni);
      y5 = run(t, w, rows, k, x, m, nullptr);
    }
    EXPECT_EQ(std::memcmp(y2.data(), y5.data(), y2.size() * 4), 0) << format::ggml_type_name(t);
  }
}

// Every ISA's entry is named after its type, activation type and ISA (the
// benchmarks label results with it), e.g. gemm_q4_1_q8_1_avx2; Isa::kAvx512
// has no legacy kernels of its own and falls back to AVX2, Isa::kAvx2Vnni
// too except for Q8_0 and Q4_0 (packed VEX-VNNI GEMMs), Isa::kAmx to AVX-512 VNNI.
TEST(QuantLegacyMatmul, KernelNames) {
#if defined(__x86_64__)
  const std::pair<Isa, const char*> isas[] = {
      {Isa::kScalar, "scalar"},       {Isa::kAvx2, "avx2"}, {Isa::kAvx2Vnni, "avx2"}, {Isa::kAvx512, "avx2"},
      {Isa::kAvx512Vnni, "avx512vnni"}, {Isa::kAmx, "avx512vnni"}};
#else
  const std::pair<Isa, const char*> isas[] = {{Isa::kScalar, "scalar"}};
#endif
  for (const auto& [isa, suffix] : isas) {
    for (GgmlType t : kTypes) {
      const MatmulKernel* k = matmul_kernel(t, isa);
      ASSERT_NE(k, nullptr);
      ASSERT_NE(k->name, nullptr);
      std::string type = format::ggml_type_name(t);
      std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return (char)std::tolower(c); });
      const bool own_vnni = isa == Isa::kAvx2Vnni && (t == GgmlType::Q8_0 || t == GgmlType::Q4_0);
      const std::string want =
          "gemm_" + type + "_" + (has_min(t) ? "q8_1" : "q8_0") + "_" + (own_vnni ? "avx2vnni" : suffix);
      EXPECT_EQ(std::string(k->name), want) << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace chimera::kernels
