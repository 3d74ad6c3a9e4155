// K-quant formats and kernels (quant/kquant_blocks.h, kernels/matmul_kquant*.cpp):
//  - layout: hand-built blocks (raw bytes at ggml's offsets) dequantize to
//    hand-computed values;
//  - quantize -> dequantize round trip within each type's error budget
//    (RMSE / RMS of Gaussian input, budgets in kquant_blocks.h);
//  - quantize_row_q8_K bit-exact against an independent transcription of
//    llama.cpp's quantize_row_q8_K_ref (ties, all-zero blocks, +-max ties);
//  - every kernel on every available ISA against the f64 dot of dequantized
//    weights and dequantized Q8_K activations, with the bound of
//    matmul_kquant.h: (k/256 + 8) * 2^-23 * sum (|w| + |w0|) |a|;
//  - bit-identical results across ISAs, 1 vs 2 threads, m == 1 vs batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/block_quant_budget.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kquant.h"
#include "kernels/matmul_kquant_x16.h"
#include "kernels/q8k_inputs.h"
#include "kernels/repack.h"
#include "kernels/type_traits.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

const GgmlType kKTypes[] = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q2_K, GgmlType::Q3_K};

ThreadPool& pool2() {
  static ThreadPool p(2);
  return p;
}

size_t block_bytes(GgmlType t) { return weight_type_traits(t)->type_size; }

void dequant(GgmlType t, const uint8_t* row, float* out, int64_t k) { weight_type_traits(t)->row_to_f32(row, out, k); }

void quantize(GgmlType t, const float* x, uint8_t* out, int64_t k) {
  switch (t) {
    case GgmlType::Q2_K: q::quantize_row_q2_K_ref(x, reinterpret_cast<q::block_q2_K*>(out), k); break;
    case GgmlType::Q3_K: q::quantize_row_q3_K_ref(x, reinterpret_cast<q::block_q3_K*>(out), k); break;
    case GgmlType::Q4_K: q::quantize_row_q4_K_ref(x, reinterpret_cast<q::block_q4_K*>(out), k); break;
    case GgmlType::Q5_K: q::quantize_row_q5_K_ref(x, reinterpret_cast<q::block_q5_K*>(out), k); break;
    case GgmlType::Q6_K: q::quantize_row_q6_K_ref(x, reinterpret_cast<q::block_q6_K*>(out), k); break;
    default: FAIL();
  }
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// ------------------------------------------------------------------ layout

TEST(KQuantLayout, Q4_K) {
  uint8_t b[144] = {};
  put16(b + 0, 0x3C00);  // d = 1
  put16(b + 2, 0x3800);  // dmin = 0.5
  // sub-block scales/mins: j<4 in the low 6 bits of bytes j / j+4; j>=4 split.
  const int sc[8] = {1, 2, 3, 63, 17, 33, 48, 5}, mn[8] = {4, 0, 62, 7, 21, 35, 9, 60};
  for (int j = 0; j < 4; ++j) {
    b[4 + j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
    b[8 + j] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
    b[12 + j] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  for (int i = 0; i < 128; ++i) b[16 + i] = (uint8_t)((i % 16) | ((15 - i % 7) << 4));
  float y[256];
  q::dequantize_row_q4_K(reinterpret_cast<const q::block_q4_K*>(b), y, 256);
  EXPECT_EQ(y[0], 1.f * 1 * 0 - 0.5f * 4);     // element 0: low nibble of qs[0], sub-block 0
  EXPECT_EQ(y[33], 1.f * 2 * 14 - 0.5f * 0);   // element 33: high nibble of qs[1] = 15-1
  EXPECT_EQ(y[64 + 5], 3.f * 5 - 0.5f * 62);   // sub-block 2, qs[37] low = 5
  EXPECT_EQ(y[255], 5.f * (15 - 127 % 7) - 0.5f * 60);  // sub-block 7, high nibble of qs[127]
  EXPECT_EQ(y[128 + 3], 17.f * 3 - 0.5f * 21);  // sub-block 4 (split 6-bit fields)
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, byte = 32 * (e / 64) + e % 32;
    const int qv = (e % 64) < 32 ? (b[16 + byte] & 15) : (b[16 + byte] >> 4);
    ASSERT_EQ(y[e], 1.f * sc[j] * qv - 0.5f * mn[j]) << e;
  }
}

TEST(KQuantLayout, Q5_K) {
  uint8_t b[176] = {};
  put16(b + 0, 0x4000);  // d = 2
  put16(b + 2, 0x3400);  // dmin = 0.25
  for (int j = 0; j < 4; ++j) {
    b[4 + j] = (uint8_t)(j + 1);
    b[8 + j] = (uint8_t)(10 + j);
  }
  for (int j = 4; j < 8; ++j) b[12 + j - 4] = (uint8_t)((j + 1) | ((10 + j % 4) << 4));
  for (int l = 0; l < 32; ++l) b[16 + l] = (uint8_t)(l * 37);  // qh
  for (int i = 0; i < 128; ++i) b[48 + i] = (uint8_t)(i * 11);
  float y[256];
  q::dequantize_row_q5_K(reinterpret_cast<const q::block_q5_K*>(b), y, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32, byte = 48 + 32 * (e / 64) + l;
    const int lo = (e % 64) < 32 ? (b[byte] & 15) : (b[byte] >> 4);
    const int hi = (b[16 + l] >> j) & 1;  // bit j of qh[l] for sub-block j
    ASSERT_EQ(y[e], 2.f * (j + 1) * (lo + 16 * hi) - 0.25f * (10 + j % 4)) << e;
  }
  EXPECT_EQ(y[1], 2.f * 1 * ((11 & 15) + 16 * (37 & 1)) - 0.25f * 10);
}

TEST(KQuantLayout, Q6_K) {
  uint8_t b[210] = {};
  for (int i = 0; i < 128; ++i) b[i] = (uint8_t)(i * 13 + 1);
  for (int i = 0; i < 64; ++i) b[128 + i] = (uint8_t)(i * 29 + 3);
  const int8_t sc[16] = {1, -2, 3, -128, 127, 5, -6, 7, 8, 9, -10, 11, 12, -13, 14, 15};
  std::memcpy(b + 192, sc, 16);
  put16(b + 208, 0x3800);  // d = 0.5
  float y[256];
  q::dequantize_row_q6_K(reinterpret_cast<const q::block_q6_K*>(b), y, 256);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, t = (e % 128) / 32, l = e % 32;
    const uint8_t ql = b[64 * h + 32 * (t & 1) + l];
    const int lo = t < 2 ? (ql & 15) : (ql >> 4);
    const int hi = (b[128 + 32 * h + l] >> (2 * t)) & 3;
    ASSERT_EQ(y[e], 0.5f * sc[e / 16] * ((lo | (hi << 4)) - 32)) << e;
  }
  // element 0: ql[0] = 1, qh[0] = 3 -> q = 1 | 3<<4 = 49 -> 0.5 * 1 * 17
  EXPECT_EQ(y[0], 8.5f);
}

TEST(KQuantLayout, Q2_K) {
  uint8_t b[84] = {};
  for (int g = 0; g < 16; ++g) b[g] = (uint8_t)(((g + 1) & 15) | ((15 - g) << 4));
  for (int i = 0; i < 64; ++i) b[16 + i] = (uint8_t)(i * 57 + 5);
  put16(b + 80, 0x3C00);  // d = 1
  put16(b + 82, 0x3800);  // dmin = 0.5
  float y[256];
  q::dequantize_row_q2_K(reinterpret_cast<const q::block_q2_K*>(b), y, 256);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, j = (e % 128) / 32, l = e % 32, g = e / 16;
    const int qv = (b[16 + 32 * h + l] >> (2 * j)) & 3;
    ASSERT_EQ(y[e], 1.f * ((g + 1) & 15) * qv - 0.5f * (15 - g)) << e;
  }
  EXPECT_EQ(y[0], 1.f * 1 * (5 & 3) - 0.5f * 15);
}

TEST(KQuantLayout, Q3_K) {
  uint8_t b[110] = {};
  for (int i = 0; i < 32; ++i) b[i] = (uint8_t)(i * 91 + 7);       // hmask
  for (int i = 0; i < 64; ++i) b[32 + i] = (uint8_t)(i * 23 + 9);  // qs
  int s6[16];
  for (int g = 0; g < 16; ++g) s6[g] = (g * 19 + 4) & 63;  // stored 6-bit, value = s6 - 32
  for (int g = 0; g < 16; ++g) {
    if (g < 8) b[96 + g] |= (uint8_t)(s6[g] & 15);
    else b[96 + g - 8] |= (uint8_t)((s6[g] & 15) << 4);
    b[96 + 8 + g % 4] |= (uint8_t)((s6[g] >> 4) << (2 * (g / 4)));
  }
  put16(b + 108, 0x3C00);
  float y[256];
  q::dequantize_row_q3_K(reinterpret_cast<const q::block_q3_K*>(b), y, 256);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, j = (e % 128) / 32, l = e % 32;
    const int lo = (b[32 + 32 * h + l] >> (2 * j)) & 3;
    const int hb = (b[l] >> (4 * h + j)) & 1;
    ASSERT_EQ(y[e], 1.f * (s6[e / 16] - 32) * (lo - (hb ? 0 : 4))) << e;
  }
  EXPECT_EQ(q::q3_K_scale(b + 96, 0), 4 - 32);
}

// The all-at-once scale decode (used by the SIMD decoders) equals the
// per-scale one on every bit pattern of each scale byte.
TEST(KQuantLayout, Q3_KScalesBiasedMatchPerScale) {
  uint8_t s[12];
  for (int v = 0; v < 256; ++v) {
    for (int i = 0; i < 12; ++i) s[i] = (uint8_t)(v * (2 * i + 1) + 37 * i);
    uint8_t got[16];
    q::q3_K_scales_biased(s, got);
    for (int j = 0; j < 16; ++j) ASSERT_EQ(got[j], q::q3_K_scale(s, j) + 32) << "v=" << v << " j=" << j;
  }
}

TEST(KQuantLayout, Q8_K) {
  q::block_q8_K b{};
  b.d = 0.25f;
  for (int j = 0; j < 256; ++j) b.qs[j] = (int8_t)(j - 128);
  float y[256];
  q::dequantize_row_q8_K(&b, y, 256);
  for (int j = 0; j < 256; ++j) ASSERT_EQ(y[j], 0.25f * (j - 128));
  const uint8_t* raw = reinterpret_cast<const uint8_t*>(&b);
  EXPECT_EQ((int8_t)raw[4], -128);
  EXPECT_EQ(raw[4 + 255], 127);
}

// ------------------------------------------------------------------ round trip

TEST(KQuantRoundTrip, ErrorWithinBudget) {
  struct Budget {
    GgmlType t;
    double rel_rmse;
  };
  const Budget budgets[] = {{GgmlType::Q2_K, 0.40}, {GgmlType::Q3_K, 0.20}, {GgmlType::Q4_K, 0.10},
                            {GgmlType::Q5_K, 0.05}, {GgmlType::Q6_K, 0.025}};
  const int64_t k = 4096;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(k), y(k);
  for (float& v : x) v = nd(rng) * 0.02f;
  double ss = 0;
  for (float v : x) ss += (double)v * v;
  for (const Budget& b : budgets) {
    std::vector<uint8_t> buf((size_t)(k / 256) * block_bytes(b.t));
    quantize(b.t, x.data(), buf.data(), k);
    dequant(b.t, buf.data(), y.data(), k);
    double se = 0;
    for (int64_t j = 0; j < k; ++j) se += ((double)y[j] - x[j]) * ((double)y[j] - x[j]);
    const double rel = std::sqrt(se / ss);
    EXPECT_LT(rel, b.rel_rmse) << format::ggml_type_name(b.t);
    RecordProperty(format::ggml_type_name(b.t) + "_rel_rmse", std::to_string(rel));
  }
  // Q8_K activations.
  std::vector<q::block_q8_K> a(k / 256);
  q::quantize_row_q8_K(x.data(), a.data(), k);
  q::dequantize_row_q8_K(a.data(), y.data(), k);
  double se = 0;
  for (int64_t j = 0; j < k; ++j) se += ((double)y[j] - x[j]) * ((double)y[j] - x[j]);
  EXPECT_LT(std::sqrt(se / ss), 0.008);
  // All-zero input round-trips to zeros.
  std::vector<float> z(512, 0.f), zo(512, 1.f);
  for (GgmlType t : kKTypes) {
    std::vector<uint8_t> buf(2 * block_bytes(t));
    quantize(t, z.data(), buf.data(), 512);
    dequant(t, buf.data(), zo.data(), 512);
    for (float v : zo) ASSERT_EQ(v, 0.f) << format::ggml_type_name(t);
  }
}

// ------------------------------------------------------------------ Q8_K

// Independent transcription of llama.cpp's quantize_row_q8_K_ref (x86 uses it).
void q8_K_llama(const float* x, int8_t* qs, int16_t* bsums, float* d) {
  float max = 0, amax = 0;
  for (int j = 0; j < 256; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax == 0) {
    *d = 0;
    std::memset(qs, 0, 256);
    std::memset(bsums, 0, 32);
    return;
  }
  const float iscale = -127.f / max;
  for (int j = 0; j < 256; ++j) {
    float val = iscale * x[j] + 12582912.f;
    int i;
    std::memcpy(&i, &val, 4);
    const int v = (i & 0x007fffff) - 0x00400000;
    qs[j] = (int8_t)(v < 127 ? v : 127);
  }
  for (int j = 0; j < 16; ++j) {
    int s = 0;
    for (int l = 0; l < 16; ++l) s += qs[16 * j + l];
    bsums[j] = (int16_t)s;
  }
  *d = 1 / iscale;
}

TEST(KQuantQ8K, BitExactWithLlamaFormula) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<std::vector<float>> blocks;
  for (int t = 0; t < 200; ++t) {
    std::vector<float> x(256);
    const float scale = std::ldexp(1.f, (int)(rng() % 40) - 20);
    for (float& v : x) v = nd(rng) * scale;
    blocks.push_back(x);
  }
  {  // exact ties: max = -127 -> iscale = 1, x = k + 0.5 rounds half to even
    std::vector<float> x(256);
    for (int j = 0; j < 256; ++j) x[j] = (float)(j % 64) - 31.5f;
    x[7] = -127.f;
    blocks.push_back(x);
  }
  {  // +max and -max: the first one sets the sign
    std::vector<float> x(256, 0.25f);
    x[3] = 2.f;
    x[9] = -2.f;
    blocks.push_back(x);
    x[3] = -2.f;
    x[9] = 2.f;
    blocks.push_back(x);
  }
  blocks.push_back(std::vector<float>(256, 0.f));
  blocks.push_back(std::vector<float>(256, -1e-30f));
  std::vector<float> all;
  for (auto& b : blocks) all.insert(all.end(), b.begin(), b.end());
  const int64_t n = (int64_t)blocks.size();
  std::vector<q::block_q8_K> got((size_t)n);
  q::quantize_row_q8_K(all.data(), got.data(), n * 256);
  for (int64_t i = 0; i < n; ++i) {
    int8_t qs[256];
    int16_t bs[16];
    float d;
    q8_K_llama(all.data() + i * 256, qs, bs, &d);
    ASSERT_EQ(bits_from_f32(got[i].d), bits_from_f32(d)) << i;
    ASSERT_EQ(std::memcmp(got[i].qs, qs, 256), 0) << i;
    ASSERT_EQ(std::memcmp(got[i].bsums, bs, 32), 0) << i;
  }
  // Every ISA's activation packer writes the same bytes (ggml block_q8_K).
  for (GgmlType t : kKTypes) {
    EXPECT_EQ(weight_type_traits(t)->vec_dot_type, GgmlType::Q8_K);
    for (Isa isa : available_isas()) {
      const MatmulKernel* kern = matmul_kernel(t, isa);
      ASSERT_NE(kern, nullptr);
      ASSERT_EQ(kern->act_bytes(n * 256), got.size() * sizeof(q::block_q8_K));
      std::vector<q::block_q8_K> packed((size_t)n);
      kern->pack_act(all.data(), n * 256, packed.data());
      ASSERT_EQ(std::memcmp(packed.data(), got.data(), got.size() * sizeof(q::block_q8_K)), 0) << kern->name;
    }
  }
}

// ------------------------------------------------------------------ kernels

struct Problem {
  GgmlType t;
  int64_t rows, k, m;
  std::vector<uint8_t> w;
  std::vector<float> x;
  std::vector<double> ref, mag;
};

// Weights: reference-quantized Gaussian rows, or (stress) random bytes with
// sane f16 super-block scales, which reach every level/scale combination.
Problem make_problem(GgmlType t, int64_t rows, int64_t k, int64_t m, uint32_t seed, bool stress) {
  Problem p{t, rows, k, m, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const size_t bb = block_bytes(t), row_bytes = (size_t)(k / 256) * bb;
  p.w.resize((size_t)rows * row_bytes);
  if (!stress) {
    std::vector<float> src((size_t)(rows * k));
    for (float& v : src) v = nd(rng) * 0.05f + (rng() % 8 == 0 ? 0.03f : 0.f);
    for (int64_t r = 0; r < rows; ++r) quantize(t, src.data() + r * k, p.w.data() + r * row_bytes, k);
  } else {
    for (uint8_t& b : p.w) b = (uint8_t)rng();
    size_t d_off = 0, dmin_off = 0;
    bool has_min = false;
    switch (t) {
      case GgmlType::Q2_K: d_off = 80, dmin_off = 82, has_min = true; break;
      case GgmlType::Q3_K: d_off = 108; break;
      case GgmlType::Q4_K: case GgmlType::Q5_K: d_off = 0, dmin_off = 2, has_min = true; break;
      default: d_off = 208; break;
    }
    for (size_t blk = 0; blk < p.w.size() / bb; ++blk) {
      put16(p.w.data() + blk * bb + d_off, f32_to_f16(std::ldexp(1.f + (rng() % 100) / 100.f, -(int)(rng() % 12))));
      if (has_min) put16(p.w.data() + blk * bb + dmin_off, f32_to_f16(std::ldexp(1.f, -(int)(rng() % 12))));
    }
  }
  p.x.resize((size_t)(m * k));
  for (float& v : p.x) v = nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f);
  // f64 reference over dequantized operands; mag = sum (|w| + |w0|) |a|.
  std::vector<float> wd((size_t)(rows * k)), w0((size_t)(rows * k)), ad((size_t)(m * k));
  std::vector<uint8_t> zq = p.w;
  for (size_t blk = 0; blk < zq.size() / bb; ++blk) {
    uint8_t* b = zq.data() + blk * bb;
    switch (t) {  // zero the quants, keep scales
      case GgmlType::Q2_K: std::memset(b + 16, 0, 64); break;
      case GgmlType::Q3_K: std::memset(b, 0, 96); break;
      case GgmlType::Q4_K: std::memset(b + 16, 0, 128); break;
      case GgmlType::Q5_K: std::memset(b + 16, 0, 160); break;
      default: std::memset(b, 0, 192); break;
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    dequant(t, p.w.data() + r * row_bytes, wd.data() + r * k, k);
    dequant(t, zq.data() + r * row_bytes, w0.data() + r * k, k);
  }
  std::vector<q::block_q8_K> a((size_t)(k / 256));
  for (int64_t i = 0; i < m; ++i) {
    q::quantize_row_q8_K(p.x.data() + i * k, a.data(), k);
    q::dequantize_row_q8_K(a.data(), ad.data() + i * k, k);
  }
  p.ref.assign((size_t)(m * rows), 0);
  p.mag.assign((size_t)(m * rows), 0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0, mg = 0;
      for (int64_t j = 0; j < k; ++j) {
        const double av = ad[i * k + j];
        s += (double)wd[r * k + j] * av;
        mg += (std::fabs((double)wd[r * k + j]) + std::fabs((double)w0[r * k + j])) * std::fabs(av);
      }
      p.ref[i * rows + r] = s;
      p.mag[i * rows + r] = mg;
    }
  }
  return p;
}

std::vector<float> run(const Problem& p, int64_t m, const float* x, ThreadPool* pool) {
  const WeightView w{p.t, p.w.data(), p.rows, p.k, (size_t)(p.k / 256) * block_bytes(p.t)};
  std::vector<float> y((size_t)(m * p.rows), -12345.f);
  matmul(w, x, m, p.k, y.data(), p.rows, pool);
  return y;
}

// The SIMD Q8_K packers (kq_pack_act_avx2 behind the AVX2 / AVX-512 K-quant
// and TQ1_0 entries) against quantize_row_q8_K on rows with NaN payloads,
// +-inf, -0.0, denormal maxima, tied maxima and .5 ties (q8k_inputs.h).
TEST(KQuantQ8K, EveryIsaPackerMatchesScalarOnHostileRows) {
  const std::vector<float> x = test_inputs::q8k_hostile_blocks(11);
  const int64_t k = (int64_t)x.size();
  std::vector<q::block_q8_K> want((size_t)(k / 256));
  q::quantize_row_q8_K(x.data(), want.data(), k);
  const size_t bytes = want.size() * sizeof(q::block_q8_K);
  int compared = 0;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::TQ1_0}) {
    for (Isa isa : available_isas()) {
      const MatmulKernel* kern = matmul_kernel(t, isa);
      ASSERT_NE(kern, nullptr);
      if (t == GgmlType::TQ1_0 && kern->act_bytes(k) != bytes) continue;  // its own TqAct8 layout
      ASSERT_EQ(kern->act_bytes(k), bytes) << kern->name;
      std::vector<uint8_t> got(bytes, 0xAB);
      kern->pack_act(x.data(), k, got.data());
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(got[i], reinterpret_cast<const uint8_t*>(want.data())[i]) << kern->name << " byte " << i;
      compared += kern->pack_act != kq_pack_act;
    }
  }
#if defined(__x86_64__)
  if (cpu_features().avx2) {
    std::vector<uint8_t> got(bytes, 0xCD);
    kq_pack_act_avx2(x.data(), k, got.data());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), bytes), 0);
    ++compared;
  }
#endif
  if (compared == 0) GTEST_SKIP() << "no SIMD Q8_K packer on this machine";
}

TEST(KQuantMatmul, EveryIsaMatchesReference) {
  int cases = 0;
  for (GgmlType t : kKTypes) {
    for (int64_t k : {256, 512, 4096}) {
      for (int64_t rows : {1, 2, 3, 5, 17, 33}) {
        const bool stress = rows == 17;
        const Problem p = make_problem(t, rows, k, 16, (uint32_t)(k * 131 + rows), stress);
        std::vector<float> first;
        for (Isa isa : available_isas()) {
          ScopedIsa scoped(isa);
          const std::string name = matmul_kernel(t, isa)->name;
          for (int64_t m : {1, 2, 3, 4, 5, 8, 9, 16}) {
            const std::vector<float> y = run(p, m, p.x.data(), &pool2());
            ASSERT_TRUE(within_block_quant_budget(y.data(), p.ref.data(), p.mag.data(), m, rows, k))
                << name << " k=" << k << " rows=" << rows << " m=" << m << (stress ? " (stress)" : "");
            if (m == 16) {
              // Integer sums + identical f32 steps: every ISA gives the same bits.
              if (first.empty()) first = y;
              ASSERT_EQ(std::memcmp(first.data(), y.data(), y.size() * 4), 0) << name << " k=" << k;
            }
            ++cases;
          }
        }
      }
    }
  }
  RecordProperty("cases", cases);
}

TEST(KQuantMatmul, IdenticalAcrossThreadsAndBatching) {
  for (GgmlType t : kKTypes) {
    const Problem p = make_problem(t, 67, 1024, 11, 77, false);
    for (Isa isa : available_isas()) {
      ScopedIsa scoped(isa);
      const std::string name = matmul_kernel(t, isa)->name;
      const std::vector<float> y1 = run(p, p.m, p.x.data(), nullptr);
      const std::vector<float> y2 = run(p, p.m, p.x.data(), &pool2());
      ASSERT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0) << name;
      for (int64_t i = 0; i < p.m; ++i) {
        const std::vector<float> yi = run(p, 1, p.x.data() + i * p.k, &pool2());
        ASSERT_EQ(std::memcmp(yi.data(), y1.data() + i * p.rows, (size_t)p.rows * 4), 0) << name << " i=" << i;
      }
    }
  }
}

// Large prefill batch (more activation rows than one L2 block) and a zero
// activation row: still the batch/row identity, zero output for zero input.
TEST(KQuantMatmul, LargeBatchAndZeroRows) {
  const Problem p = make_problem(GgmlType::Q4_K, 9, 4096, 1, 5, false);
  const int64_t m = 300;
  std::vector<float> x((size_t)(m * p.k));
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (float& v : x) v = nd(rng);
  std::fill(x.begin() + 17 * p.k, x.begin() + 18 * p.k, 0.f);
  for (Isa isa : available_isas()) {
    ScopedIsa scoped(isa);
    const std::vector<float> y = run(p, m, x.data(), &pool2());
    for (int64_t r = 0; r < p.rows; ++r) ASSERT_EQ(y[17 * p.rows + r], 0.f);
    for (int64_t i : {0, 17, 150, 299}) {
      const std::vector<float> yi = run(p, 1, x.data() + i * p.k, nullptr);
      ASSERT_EQ(std::memcmp(yi.data(), y.data() + i * p.rows, (size_t)p.rows * 4), 0) << isa_name(isa) << " " << i;
    }
  }
}

// The x16 Q4_K / Q5_K / Q6_K kernels' own order (matmul_kquant_x16.h), row by row
// from the scalar reference: y[i][r] for activation rows [0, m).
std::vector<float> x16_q4_expected(const Problem& p, int64_t m) {
  const size_t row_bytes = (size_t)(p.k / 256) * block_bytes(p.t);
  std::vector<q::block_q8_K> a((size_t)(p.k / 256));
  std::vector<float> y((size_t)(m * p.rows));
  for (int64_t i = 0; i < m; ++i) {
    q::quantize_row_q8_K(p.x.data() + i * p.k, a.data(), p.k);
    for (int64_t r = 0; r < p.rows; ++r) {
      y[i * p.rows + r] = kq_x16_dot_ref(p.t, p.w.data() + r * row_bytes, (const uint8_t*)a.data(), p.k);
    }
  }
  return y;
}

// Load-time repacked K-quant weights (super-blocks of 4 rows interleaved, or
// the 16-row x16 layout of the AVX-512 kernels): through kernels::matmul with
// a view packed by PackedWeights, on every ISA, row counts that are multiples
// of the group, m across the tile and GEMV paths, 1-3 threads. The packed
// kernels must give the storage-layout kernel's bits (same integer sums, same
// f32 order) — x16 Q4_K / Q5_K / Q6_K those of their own scalar reference —
// and stay within the reference tolerance.
TEST(KQuantRepack, PackedMatchesStorageLayoutBitForBit) {
  ThreadPool pool3(3);
  int packed_isas = 0;
  for (GgmlType t : kKTypes) {
    for (int64_t k : {256, 1024}) {
      for (int64_t rows : {4, 12, 16, 36, 48, 68}) {
        const Problem p = make_problem(t, rows, k, 17, (uint32_t)(k * 7 + rows), rows == 12);
        const size_t row_bytes = (size_t)(k / 256) * block_bytes(t);
        for (Isa isa : available_isas()) {
          ScopedIsa scoped(isa);
          const std::string name = matmul_kernel(t, isa)->name;
          // PackedWeights releases the storage pages it packed from: pack a copy.
          std::vector<uint8_t> copy = p.w;
          WeightView wp{t, copy.data(), rows, k, row_bytes};
          PackedWeights packs;
          const bool packed = packs.pack(wp);
          const MatmulKernel* kern = matmul_kernel(t, isa);
          if (!packed) {
            EXPECT_TRUE(kern->repack == nullptr || rows < kern->repack_rows) << name;
            continue;
          }
          ++packed_isas;
          // The whole groups are packed; the rest (36, 68 rows: 4) stays in storage layout.
          const int64_t prows = rows / kern->repack_rows * kern->repack_rows;
          ASSERT_EQ(wp.packed_rows, prows) << name;
          ASSERT_EQ(packs.bytes(), (size_t)prows * row_bytes) << name;
          // the packed path must not read the storage of the packed rows
          std::fill(copy.begin(), copy.begin() + (ptrdiff_t)((size_t)prows * row_bytes), (uint8_t)0xA5);
          // x16 Q4_K / Q5_K / Q6_K have their own order: bit-exact against their scalar reference
          const bool x16_q4 = (t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K) &&
                              kern->repack_rows == kX16Rows;
          for (int64_t m : {1, 2, 3, 4, 5, 9, 17}) {
            for (ThreadPool* pool : {(ThreadPool*)nullptr, &pool2(), &pool3}) {
              const std::vector<float> ys = run(p, m, p.x.data(), pool);
              std::vector<float> y0 = x16_q4 ? x16_q4_expected(p, m) : ys;
              for (int64_t i = 0; i < m; ++i)  // the storage-layout rest: the storage kernel's bits
                for (int64_t r = prows; r < rows; ++r) y0[(size_t)(i * rows + r)] = ys[(size_t)(i * rows + r)];
              std::vector<float> y((size_t)(m * rows), -12345.f);
              matmul(wp, p.x.data(), m, k, y.data(), rows, pool);
              ASSERT_EQ(std::memcmp(y0.data(), y.data(), y.size() * 4), 0)
                  << name << " k=" << k << " rows=" << rows << " m=" << m;
              ASSERT_TRUE(within_block_quant_budget(y.data(), p.ref.data(), p.mag.data(), m, rows, k)) << name;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(packed_isas, 0);
  RecordProperty("packed_isa_cases", packed_isas);
}

// Fewer rows than a group are left in storage layout.
TEST(KQuantRepack, FewerRowsThanAGroupStayUnpacked) {
  const Problem p = make_problem(GgmlType::Q4_K, 6, 256, 1, 3, false);
  std::vector<uint8_t> copy = p.w;
  WeightView w{GgmlType::Q4_K, copy.data(), 6, 256, block_bytes(GgmlType::Q4_K)};
  PackedWeights packs;
  EXPECT_FALSE(packs.pack(w));
  EXPECT_EQ(w.packed, nullptr);
}

}  // namespace
}  // namespace chimera::kernels
