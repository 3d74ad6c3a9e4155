// IQ4_XS (quant/iq4xs_blocks.h, kernels/matmul_iq4xs_*.cpp):
//  - layout: a hand-built block (raw bytes at ggml's offsets) dequantizes to
//    hand-computed values;
//  - quantize -> dequantize round trip within the budget in iq4xs_blocks.h,
//    all-zero blocks, and the quantizer beating a naive absmax choice;
//  - every kernel on every available ISA against the f64 dot of dequantized
//    weights and dequantized Q8_K activations, bound of matmul_iq4xs.h:
//    (k/256 + 8) * 2^-23 * sum |w| |a|; stress weights are random bytes (every
//    index / 6-bit scale combination);
//  - bit-identical results across ISAs, 1..3 threads, m == 1 vs batch, and
//    odd row counts; row-length errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/block_quant_budget.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/type_traits.h"
#include "quant/iq4xs_blocks.h"
#include "quant/kquant_blocks.h"
#include "quant/legacy_blocks.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

ThreadPool& pool(int n) {
  static ThreadPool p2(2), p3(3);
  return n == 2 ? p2 : p3;
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

TEST(Iq4xsLayout, HandBuiltBlock) {
  ASSERT_EQ(sizeof(q::block_iq4_xs), 136u);
  ASSERT_EQ(format::ggml_row_size(GgmlType::IQ4_XS, 256), 136u);
  const WeightTypeTraits* tt = weight_type_traits(GgmlType::IQ4_XS);
  ASSERT_NE(tt, nullptr);
  EXPECT_EQ(tt->vec_dot_type, GgmlType::Q8_K);
  EXPECT_EQ(tt->block_size, 256);
  uint8_t b[136] = {};
  put16(b, f32_to_f16(0.5f));  // d
  // Scales ls_j (6 bit): j0 = 33 (-> +1), j1 = 0 (-> -32), j2 = 63 (-> +31), j3..7 = 32 + j.
  const int ls[8] = {33, 0, 63, 35, 36, 37, 38, 39};
  uint16_t sh = 0;
  for (int j = 0; j < 8; ++j) {
    b[4 + j / 2] |= (uint8_t)((ls[j] & 0xF) << (4 * (j % 2)));
    sh |= (uint16_t)((ls[j] >> 4) << (2 * j));
  }
  put16(b + 2, sh);
  // Sub-block j: qs[16j + l] = (l) | ((15 - l) << 4).
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 16; ++l) b[8 + 16 * j + l] = (uint8_t)(l | ((15 - l) << 4));
  float y[256];
  tt->row_to_f32(b, y, 256);
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 16; ++l) {
      EXPECT_EQ(y[32 * j + l], 0.5f * (ls[j] - 32) * q::kIq4nlValues[l]) << j << " " << l;
      EXPECT_EQ(y[32 * j + 16 + l], 0.5f * (ls[j] - 32) * q::kIq4nlValues[15 - l]) << j << " " << l;
    }
  }
  // Spot values written out by hand.
  EXPECT_EQ(y[0], -63.5f);         // 0.5 * 1 * -127
  EXPECT_EQ(y[16], 56.5f);         // 0.5 * 1 * 113
  EXPECT_EQ(y[32], 2032.f);        // 0.5 * -32 * -127
  EXPECT_EQ(y[64 + 15], 1751.5f);  // 0.5 * 31 * 113
  const auto* blk = reinterpret_cast<const q::block_iq4_xs*>(b);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(q::iq4_xs_scale(*blk, j), ls[j]);
}

double rel_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double se = 0, ss = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    se += ((double)y[j] - x[j]) * ((double)y[j] - x[j]);
    ss += (double)x[j] * x[j];
  }
  return std::sqrt(se / ss);
}

TEST(Iq4xsRoundTrip, ErrorWithinBudget) {
  const int64_t k = 4096;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(k), y(k);
  for (float& v : x) v = nd(rng) * 0.02f;
  std::vector<q::block_iq4_xs> b(k / 256);
  q::quantize_row_iq4_xs_ref(x.data(), b.data(), k);
  q::dequantize_row_iq4_xs(b.data(), y.data(), k);
  const double rel = rel_rmse(x, y);
  EXPECT_LT(rel, 0.085);
  RecordProperty("IQ4_XS_rel_rmse", std::to_string(rel));
  // The scale search must beat the plain absmax scale on the same grid
  // (one 6-bit scale per 32, nearest codebook entry).
  std::vector<float> naive(k);
  for (int64_t s = 0; s < k; s += 32) {
    float mx = 0;
    for (int j = 0; j < 32; ++j) mx = std::max(mx, std::fabs(x[s + j]));
    const float d = mx / 127.f;
    for (int j = 0; j < 32; ++j) {
      float best = 0, be = INFINITY;
      for (int8_t v : q::kIq4nlValues) {
        const float e = std::fabs(x[s + j] - d * v);
        if (e < be) be = e, best = d * v;
      }
      naive[s + j] = best;
    }
  }
  EXPECT_LT(rel, rel_rmse(x, naive));
  // Deterministic.
  std::vector<q::block_iq4_xs> b2(k / 256);
  q::quantize_row_iq4_xs_ref(x.data(), b2.data(), k);
  EXPECT_EQ(std::memcmp(b.data(), b2.data(), b.size() * sizeof(b[0])), 0);
  // All-zero input round-trips to zeros; a block with one zero sub-block keeps it zero.
  std::vector<float> z(512, 0.f), zo(512, 1.f);
  std::vector<q::block_iq4_xs> zb(2);
  q::quantize_row_iq4_xs_ref(z.data(), zb.data(), 512);
  q::dequantize_row_iq4_xs(zb.data(), zo.data(), 512);
  for (float v : zo) ASSERT_EQ(v, 0.f);
  for (int j = 64; j < 256; ++j) z[j] = nd(rng);
  q::quantize_row_iq4_xs_ref(z.data(), zb.data(), 256);
  q::dequantize_row_iq4_xs(zb.data(), zo.data(), 256);
  for (int j = 0; j < 64; ++j) ASSERT_EQ(zo[j], 0.f) << j;
  EXPECT_LT(rel_rmse(std::vector<float>(z.begin() + 64, z.begin() + 256),
                     std::vector<float>(zo.begin() + 64, zo.begin() + 256)),
            0.085);
}

// ------------------------------------------------------------------ kernels

struct Problem {
  int64_t rows, k, m;
  std::vector<uint8_t> w;
  std::vector<float> x;
  std::vector<double> ref, mag;
};

Problem make_problem(int64_t rows, int64_t k, int64_t m, uint32_t seed, bool stress) {
  Problem p{rows, k, m, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const size_t row_bytes = (size_t)(k / 256) * sizeof(q::block_iq4_xs);
  p.w.resize((size_t)rows * row_bytes);
  if (!stress) {
    std::vector<float> src((size_t)(rows * k));
    for (float& v : src) v = nd(rng) * 0.05f + (rng() % 8 == 0 ? 0.03f : 0.f);
    for (int64_t r = 0; r < rows; ++r)
      q::quantize_row_iq4_xs_ref(src.data() + r * k, reinterpret_cast<q::block_iq4_xs*>(p.w.data() + r * row_bytes),
                                 k);
  } else {
    for (uint8_t& b : p.w) b = (uint8_t)rng();
    for (size_t blk = 0; blk < p.w.size() / 136; ++blk)
      put16(p.w.data() + blk * 136, f32_to_f16(std::ldexp(1.f + (rng() % 100) / 100.f, -(int)(rng() % 12))));
  }
  p.x.resize((size_t)(m * k));
  for (float& v : p.x) v = nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f);
  std::vector<float> wd((size_t)(rows * k)), ad((size_t)(m * k));
  for (int64_t r = 0; r < rows; ++r)
    q::dequantize_row_iq4_xs(reinterpret_cast<const q::block_iq4_xs*>(p.w.data() + r * row_bytes), wd.data() + r * k,
                             k);
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
        const double av = ad[i * k + j], wv = wd[r * k + j];
        s += wv * av;
        mg += std::fabs(wv) * std::fabs(av);
      }
      p.ref[i * rows + r] = s;
      p.mag[i * rows + r] = mg;
    }
  }
  return p;
}

std::vector<float> run(const Problem& p, int64_t m, const float* x, ThreadPool* tp) {
  const WeightView w{GgmlType::IQ4_XS, p.w.data(), p.rows, p.k, (size_t)(p.k / 256) * sizeof(q::block_iq4_xs)};
  std::vector<float> y((size_t)(m * p.rows), -12345.f);
  matmul(w, x, m, p.k, y.data(), p.rows, tp);
  return y;
}

TEST(Iq4xsMatmul, EveryIsaMatchesReference) {
  int cases = 0;
  for (int64_t k : {256, 512, 2304}) {
    for (int64_t rows : {1, 2, 3, 5, 17, 33}) {
      const bool stress = rows == 17 || rows == 3;
      const Problem p = make_problem(rows, k, 16, (uint32_t)(k * 131 + rows), stress);
      std::vector<float> first;
      for (Isa isa : available_isas()) {
        ScopedIsa scoped(isa);
        const std::string name = matmul_kernel(GgmlType::IQ4_XS, isa)->name;
        for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 16}) {
          const std::vector<float> y = run(p, m, p.x.data(), &pool(2));
          ASSERT_TRUE(within_block_quant_budget(y.data(), p.ref.data(), p.mag.data(), m, rows, k))
              << name << " k=" << k << " rows=" << rows << " m=" << m << (stress ? " (stress)" : "");
          if (m == 16) {
            // Exact integer lane sums + identical f32 steps: every ISA gives the same bits.
            if (first.empty()) first = y;
            ASSERT_EQ(std::memcmp(first.data(), y.data(), y.size() * 4), 0) << name << " k=" << k;
          }
          ++cases;
        }
      }
    }
  }
  RecordProperty("cases", cases);
}

TEST(Iq4xsMatmul, IdenticalAcrossThreadsAndBatching) {
  const Problem p = make_problem(67, 1024, 11, 77, false);
  for (Isa isa : available_isas()) {
    ScopedIsa scoped(isa);
    const std::string name = matmul_kernel(GgmlType::IQ4_XS, isa)->name;
    const std::vector<float> y1 = run(p, p.m, p.x.data(), nullptr);
    for (int n : {2, 3}) {
      const std::vector<float> yn = run(p, p.m, p.x.data(), &pool(n));
      ASSERT_EQ(std::memcmp(y1.data(), yn.data(), y1.size() * 4), 0) << name << " threads=" << n;
    }
    for (int64_t i = 0; i < p.m; ++i) {
      const std::vector<float> yi = run(p, 1, p.x.data() + i * p.k, &pool(3));
      ASSERT_EQ(std::memcmp(yi.data(), y1.data() + i * p.rows, (size_t)p.rows * 4), 0) << name << " i=" << i;
    }
  }
}

// More activation rows than one L2 block, and a zero activation row.
TEST(Iq4xsMatmul, LargeBatchAndZeroRows) {
  const Problem p = make_problem(9, 4096, 1, 5, false);
  const int64_t m = 300;
  std::vector<float> x((size_t)(m * p.k));
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (float& v : x) v = nd(rng);
  std::fill(x.begin() + 17 * p.k, x.begin() + 18 * p.k, 0.f);
  for (Isa isa : available_isas()) {
    ScopedIsa scoped(isa);
    const std::vector<float> y = run(p, m, x.data(), &pool(2));
    for (int64_t r = 0; r < p.rows; ++r) ASSERT_EQ(y[17 * p.rows + r], 0.f);
    for (int64_t i : {0, 17, 150, 299}) {
      const std::vector<float> yi = run(p, 1, x.data() + i * p.k, nullptr);
      ASSERT_EQ(std::memcmp(yi.data(), y.data() + i * p.rows, (size_t)p.rows * 4), 0) << isa_name(isa) << " " << i;
    }
  }
}

TEST(Iq4xsMatmul, RowLengthErrors) {
  EXPECT_TRUE(check_matmul_shape(GgmlType::IQ4_XS, 512).is_ok());
  const Status s = check_matmul_shape(GgmlType::IQ4_XS, 96);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("256"), std::string::npos) << s.message();
  EXPECT_EQ(format::ggml_row_size(GgmlType::IQ4_XS, 96), 0u);
}

}  // namespace
}  // namespace chimera::kernels
