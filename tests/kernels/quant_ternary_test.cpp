// Ternary formats and kernels (quant/ternary_blocks.h, kernels/matmul_ternary*):
//  - layout: hand-built TQ2_0 / TQ1_0 blocks decode to hand-computed trits in
//    ggml's element order (independent transcription of ggml's decoders);
//  - quantize -> dequantize is exact on ternary-valued input, and TQ1_0 and
//    TQ2_0 hold identical values; TQ1_0 packing round-trips every trit vector;
//  - every kernel on every available ISA equals, bit for bit, an independent
//    transcription of llama.cpp's AVX2 vec_dot_tq*_0_q8_K float order, and is
//    within the bound of matmul_ternary.h of the f64 dot of dequantized operands;
//  - bit-identical across ISAs, 1 vs 2 threads, m == 1 vs batch.
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
#include "kernels/matmul_ternary.h"
#include "kernels/q8k_inputs.h"
#include "kernels/type_traits.h"
#include "quant/kquant_blocks.h"
#include "quant/ternarize.h"
#include "quant/ternary_blocks.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

ThreadPool& pool2() {
  static ThreadPool p(2);
  return p;
}

size_t block_bytes(GgmlType t) { return weight_type_traits(t)->type_size; }

// ggml: uint8_t q = byte * pow3[n]; trit = ((uint16_t) q * 3) >> 8.
int ggml_trit(uint8_t byte, int n) {
  static const int pow3[5] = {1, 3, 9, 27, 81};
  const uint8_t qv = (uint8_t)(byte * pow3[n]);
  return ((uint16_t)qv * 3) >> 8;
}

TEST(TernaryLayout, TQ2_0) {
  uint8_t b[66];
  for (int i = 0; i < 64; ++i) b[i] = (uint8_t)((i * 37 + 11) & 0xFF);
  for (int i = 0; i < 64; ++i)  // keep trits in 0..2
    for (int n = 0; n < 4; ++n)
      if (((b[i] >> (2 * n)) & 3) == 3) b[i] = (uint8_t)(b[i] & ~(1 << (2 * n)));
  const uint16_t d = f32_to_f16(0.75f);
  std::memcpy(b + 64, &d, 2);
  float y[256];
  q::dequantize_row_tq2_0(reinterpret_cast<const q::block_tq2_0*>(b), y, 256);
  for (int j = 0; j < 2; ++j)
    for (int l = 0; l < 4; ++l)
      for (int m = 0; m < 32; ++m) {
        const int e = 128 * j + 32 * l + m;
        ASSERT_EQ(y[e], (float)(((b[32 * j + m] >> (2 * l)) & 3) - 1) * 0.75f) << e;
      }
}

TEST(TernaryLayout, TQ1_0) {
  uint8_t b[54];
  for (int i = 0; i < 52; ++i) b[i] = (uint8_t)((i * 53 + 7) & 0xFF);
  const uint16_t d = f32_to_f16(2.f);
  std::memcpy(b + 52, &d, 2);
  float y[256];
  q::dequantize_row_tq1_0(reinterpret_cast<const q::block_tq1_0*>(b), y, 256);
  int e = 0;
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; ++m, ++e) ASSERT_EQ(y[e], (float)(ggml_trit(b[m], n) - 1) * 2.f) << e;
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; ++m, ++e) ASSERT_EQ(y[e], (float)(ggml_trit(b[32 + m], n) - 1) * 2.f) << e;
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < 4; ++j, ++e) ASSERT_EQ(y[e], (float)(ggml_trit(b[48 + j], n) - 1) * 2.f) << e;
  // Known packing: trits (2,1,0,0,0) = 2*81 + 27 = 189 -> ceil(189*256/243) = 200.
  uint8_t t[256] = {};
  t[0] = 2;
  t[32] = 1;
  q::block_tq1_0 blk;
  q::pack_tq1_0(t, d, &blk);
  EXPECT_EQ(blk.qs[0], 200);
}

std::vector<float> ternary_data(int64_t n, uint32_t seed, std::vector<float>* scale_per_block) {
  std::mt19937 rng(seed);
  std::vector<float> x((size_t)n);
  for (int64_t b = 0; b < n / 256; ++b) {
    const float s = f16_to_f32(f32_to_f16(std::ldexp(1.f + (rng() % 1000) / 1000.f, -(int)(rng() % 10))));
    for (int e = 0; e < 256; ++e) x[(size_t)(b * 256 + e)] = s * (float)((int)(rng() % 3) - 1);
    x[(size_t)(b * 256 + rng() % 256)] = (rng() & 1) ? s : -s;  // amax == s
    if (scale_per_block) scale_per_block->push_back(s);
  }
  return x;
}

TEST(TernaryRoundTrip, ExactOnTernaryInput) {
  const int64_t n = 256 * 64;
  const std::vector<float> x = ternary_data(n, 3, nullptr);
  std::vector<q::block_tq1_0> b1((size_t)(n / 256));
  std::vector<q::block_tq2_0> b2((size_t)(n / 256));
  q::quantize_row_tq1_0(x.data(), b1.data(), n);
  q::quantize_row_tq2_0(x.data(), b2.data(), n);
  std::vector<float> y1((size_t)n), y2((size_t)n);
  q::dequantize_row_tq1_0(b1.data(), y1.data(), n);
  q::dequantize_row_tq2_0(b2.data(), y2.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y1[(size_t)i], x[(size_t)i]) << i;
    ASSERT_EQ(y2[(size_t)i], x[(size_t)i]) << i;
  }
  // All-zero block -> d = 0, zeros.
  std::vector<float> z(256, 0.f), zy(256, 1.f);
  q::quantize_row_tq1_0(z.data(), b1.data(), 256);
  q::dequantize_row_tq1_0(b1.data(), zy.data(), 256);
  for (float v : zy) ASSERT_EQ(v, 0.f);
  // Every 5-trit vector round-trips through the base-3 byte.
  for (int v = 0; v < 243; ++v) {
    uint8_t t[256] = {}, back[256];
    int r = v;
    for (int nn = 4; nn >= 0; --nn, r /= 3) t[32 * nn] = (uint8_t)(r % 3);
    q::block_tq1_0 blk;
    q::pack_tq1_0(t, 0, &blk);
    q::tq1_0_trits(blk, back);
    for (int nn = 0; nn < 5; ++nn) ASSERT_EQ(back[32 * nn], t[32 * nn]) << v;
  }
}

// llama.cpp's AVX2 ggml_vec_dot_tq{1,2}_0_q8_K, transcribed lane by lane:
// 8 int32 lanes over bytes 4l..4l+3 of each 32-byte chunk, minus bsums pairs,
// f32 lanes += d * S (contracted to fma), hsum_float_8.
float llama_dot(const std::vector<int>& trits, const std::vector<float>& wd, const q::block_q8_K* a, int64_t k) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t b = 0; b < k / 256; ++b) {
    int32_t lane16[16] = {};
    for (int e = 0; e < 256; ++e) lane16[(e % 32) / 2] += trits[(size_t)(b * 256 + e)] * a[b].qs[e];
    for (int j = 0; j < 16; ++j) lane16[j] -= a[b].bsums[j];
    const float d = a[b].d * wd[(size_t)b];
    for (int l = 0; l < 8; ++l) acc[l] = std::fma((float)(lane16[2 * l] + lane16[2 * l + 1]), d, acc[l]);
  }
  float lo[4], r2[4];
  for (int j = 0; j < 4; ++j) lo[j] = acc[j + 4] + acc[j];
  r2[0] = lo[0] + lo[2];
  r2[1] = lo[1] + lo[3];
  return r2[0] + r2[1];
}

TEST(TernaryMatmul, EveryIsaMatchesLlamaOrderAndReference) {
  int cases = 0;
  for (GgmlType t : {GgmlType::TQ2_0, GgmlType::TQ1_0}) {
    for (int64_t k : {256, 512, 2048}) {
      for (int64_t rows : {1, 3, 17, 33}) {
        const int64_t m_max = 9;
        std::vector<float> bscale;
        const std::vector<float> wf = ternary_data(rows * k, (uint32_t)(k + rows), &bscale);
        const size_t row_bytes = (size_t)(k / 256) * block_bytes(t);
        std::vector<uint8_t> w((size_t)rows * row_bytes);
        for (int64_t r = 0; r < rows; ++r) {
          if (t == GgmlType::TQ2_0)
            q::quantize_row_tq2_0(wf.data() + r * k, reinterpret_cast<q::block_tq2_0*>(w.data() + r * row_bytes), k);
          else
            q::quantize_row_tq1_0(wf.data() + r * k, reinterpret_cast<q::block_tq1_0*>(w.data() + r * row_bytes), k);
        }
        std::mt19937 rng((uint32_t)(k * 7 + rows));
        std::normal_distribution<float> nd(0.f, 1.f);
        std::vector<float> x((size_t)(m_max * k));
        for (float& v : x) v = nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f);
        // Expected: llama.cpp order; f64 reference for the bound.
        std::vector<float> expect((size_t)(m_max * rows));
        std::vector<double> ref((size_t)(m_max * rows)), mag((size_t)(m_max * rows));
        std::vector<q::block_q8_K> a((size_t)(k / 256));
        std::vector<float> ad((size_t)k);
        for (int64_t i = 0; i < m_max; ++i) {
          q::quantize_row_q8_K(x.data() + i * k, a.data(), k);
          q::dequantize_row_q8_K(a.data(), ad.data(), k);
          for (int64_t r = 0; r < rows; ++r) {
            std::vector<int> tr((size_t)k);
            std::vector<float> wd((size_t)(k / 256));
            double s = 0, mg = 0;
            for (int64_t j = 0; j < k; ++j) {
              const float bs = bscale[(size_t)(r * (k / 256) + j / 256)];
              wd[(size_t)(j / 256)] = bs;
              const float wv = wf[(size_t)(r * k + j)];
              tr[(size_t)j] = wv > 0 ? 2 : (wv < 0 ? 0 : 1);
              s += (double)wv * ad[(size_t)j];
              mg += ((double)std::fabs(wv) + bs) * std::fabs((double)ad[(size_t)j]);
            }
            expect[(size_t)(i * rows + r)] = llama_dot(tr, wd, a.data(), k);
            ref[(size_t)(i * rows + r)] = s;
            mag[(size_t)(i * rows + r)] = mg;
          }
        }
        const WeightView wv{t, w.data(), rows, k, row_bytes};
        for (Isa isa : available_isas()) {
          ScopedIsa scoped(isa);
          const std::string name = matmul_kernel(t, isa)->name;
          for (int64_t m : {1, 2, 5, 9}) {
            std::vector<float> y((size_t)(m * rows), -1.f);
            matmul(wv, x.data(), m, k, y.data(), rows, &pool2());
            for (int64_t e = 0; e < m * rows; ++e) {
              ASSERT_EQ(y[(size_t)e], expect[(size_t)e]) << name << " k=" << k << " rows=" << rows << " m=" << m;
            }
            ASSERT_TRUE(within_block_quant_budget(y.data(), ref.data(), mag.data(), m, rows, k)) << name;
            // 1 thread == 2 threads.
            std::vector<float> y1((size_t)(m * rows), -1.f);
            matmul(wv, x.data(), m, k, y1.data(), rows, nullptr);
            ASSERT_EQ(std::memcmp(y.data(), y1.data(), y.size() * 4), 0) << name;
            ++cases;
          }
        }
      }
    }
  }
  RecordProperty("cases", cases);
}

// Every ISA's TQ2_0 activation packer (TqAct8) writes the same bytes as the
// scalar one (the exact Q8_K quantizer, permuted) on the rows of
// q8k_inputs.h (NaN, inf, -0.0, denormal and tied maxima, zero blocks).
TEST(TernaryActivation, EveryIsaPacksTheScalarBytes) {
  const std::vector<float> x = test_inputs::q8k_hostile_blocks();
  const int64_t k = (int64_t)x.size();
  std::vector<uint8_t> want(tq_act8_bytes(k), 0xAB);
  tq_pack_act8(x.data(), k, want.data());
  int compared = 0;
  for (Isa isa : available_isas()) {
    const MatmulKernel* kern = matmul_kernel(GgmlType::TQ2_0, isa);
    if (!kern || kern->pack_act == tq_pack_act8 || kern->act_bytes != tq_act8_bytes) continue;
    std::vector<uint8_t> got(want.size(), 0xAB);
    kern->pack_act(x.data(), k, got.data());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << kern->name << " byte " << i;
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "no ISA with its own TqAct8 packer on this machine";
}

TEST(TernaryMatmul, TypeTableEntries) {
  for (GgmlType t : {GgmlType::TQ1_0, GgmlType::TQ2_0}) {
    const WeightTypeTraits* tr = weight_type_traits(t);
    ASSERT_NE(tr, nullptr);
    EXPECT_EQ(tr->vec_dot_type, GgmlType::Q8_K);
    EXPECT_EQ(tr->block_size, 256);
    for (Isa isa : available_isas()) EXPECT_NE(matmul_kernel(t, isa), nullptr);
  }
  EXPECT_EQ(block_bytes(GgmlType::TQ1_0), 54u);
  EXPECT_EQ(block_bytes(GgmlType::TQ2_0), 66u);
}

// Absmean ternarization (quant/ternarize.h): s = mean|w|, stored weights are
// exactly clamp(round(w / s), -1, 1) * f16(s) in both types; bad shapes fail.
TEST(Ternarize, AbsmeanCodesTimesScale) {
  const int64_t rows = 3, cols = 512;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 0.02f);
  std::vector<float> w((size_t)(rows * cols));
  for (float& v : w) v = nd(rng);
  double sum = 0;
  for (float v : w) sum += std::fabs(v);
  const float s_ref = (float)(sum / (double)w.size());
  for (GgmlType t : {GgmlType::TQ2_0, GgmlType::TQ1_0}) {
    std::vector<uint8_t> out((size_t)(rows * cols / 256) * block_bytes(t));
    float s = 0.f;
    ASSERT_TRUE(q::ternarize_tensor(t, w.data(), rows, cols, out.data(), out.size(), &s).is_ok());
    EXPECT_EQ(s, s_ref);
    std::vector<float> back(w.size());
    weight_type_traits(t)->row_to_f32(out.data(), back.data(), (int64_t)w.size());
    const float sd = f16_to_f32(f32_to_f16(s));
    for (size_t i = 0; i < w.size(); ++i) {
      const float c = std::fmin(1.f, std::fmax(-1.f, std::nearbyint(w[i] / s)));
      ASSERT_EQ(back[i], c * sd) << i;
    }
  }
  std::vector<uint8_t> small(10);
  EXPECT_FALSE(q::ternarize_tensor(GgmlType::TQ2_0, w.data(), 1, 100, small.data(), small.size()).is_ok());
  EXPECT_FALSE(q::ternarize_tensor(GgmlType::Q4_0, w.data(), 1, 256, small.data(), small.size()).is_ok());
  EXPECT_FALSE(q::ternarize_tensor(GgmlType::TQ2_0, w.data(), 1, 256, small.data(), small.size()).is_ok());
}

// Already ternary input (code * a, as a converted BitNet checkpoint holds it)
// keeps its scale a: every weight comes back as code * f16(a). Plain absmean
// would use a * (non-zero fraction) and shrink every weight.
TEST(Ternarize, AlreadyTernaryInputKeepsItsScale) {
  const int64_t rows = 2, cols = 512;
  const float a = 0.0498046875f;  // exact in f16
  std::mt19937 rng(9);
  std::vector<float> w((size_t)(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = a * (float)((int)(rng() % 3) - 1);
  for (GgmlType t : {GgmlType::TQ2_0, GgmlType::TQ1_0}) {
    std::vector<uint8_t> out((size_t)(rows * cols / 256) * block_bytes(t));
    float s = 0.f;
    ASSERT_TRUE(q::ternarize_tensor(t, w.data(), rows, cols, out.data(), out.size(), &s).is_ok());
    EXPECT_EQ(s, a);
    std::vector<float> back(w.size());
    weight_type_traits(t)->row_to_f32(out.data(), back.data(), (int64_t)w.size());
    for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(back[i], w[i]) << i;
  }
  // One magnitude off: not ternary, the absmean applies.
  w[3] = 2 * a;
  std::vector<uint8_t> out((size_t)(rows * cols / 256) * block_bytes(GgmlType::TQ2_0));
  float s = 0.f;
  ASSERT_TRUE(q::ternarize_tensor(GgmlType::TQ2_0, w.data(), rows, cols, out.data(), out.size(), &s).is_ok());
  EXPECT_LT(s, a);
}

}  // namespace
}  // namespace chimera::kernels
