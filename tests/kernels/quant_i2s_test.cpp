// I2_S (quant/i2s.h, bitnet.cpp's ggml type 36) format and kernels:
//  - layout: hand-built bytes decode to hand-computed codes (128-element
//    blocks, element 32g + m in byte m at bits 7-2g..6-2g), the f32 scale sits
//    after rows * k / 4 bytes, the tensor takes rows * k / 4 + 32 bytes;
//  - bitnet.cpp's quantizer round-trips ternary input exactly;
//  - the GGUF reader sizes a type-36 tensor as bitnet.cpp does and rejects a
//    file whose data is too short for the scale tail;
//  - every kernel on every ISA equals, bit for bit, the llama.cpp-order
//    transcription with d = tensor scale, for m == 1 and batches, 1 and 2
//    threads; weight_row_to_f32 applies the scale; rows not a multiple of 256
//    are refused with an error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "format/gguf/ggml_types.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/type_traits.h"
#include "quant/i2s.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

TEST(I2sLayout, HandBuiltBlock) {
  // One 128-element block; byte m holds elements m, 32+m, 64+m, 96+m from the
  // top bits down.
  std::vector<uint8_t> row(32, 0);
  row[0] = 0b10'01'00'10;   // e0 = 2, e32 = 1, e64 = 0, e96 = 2
  row[31] = 0b00'10'01'01;  // e31 = 0, e63 = 2, e95 = 1, e127 = 1
  EXPECT_EQ(q::i2s_code(row.data(), 0), 2);
  EXPECT_EQ(q::i2s_code(row.data(), 32), 1);
  EXPECT_EQ(q::i2s_code(row.data(), 64), 0);
  EXPECT_EQ(q::i2s_code(row.data(), 96), 2);
  EXPECT_EQ(q::i2s_code(row.data(), 31), 0);
  EXPECT_EQ(q::i2s_code(row.data(), 63), 2);
  EXPECT_EQ(q::i2s_code(row.data(), 95), 1);
  EXPECT_EQ(q::i2s_code(row.data(), 127), 1);
  std::vector<float> y(128);
  q::dequantize_row_i2s(row.data(), 0.5f, y.data(), 128);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[32], 0.f);
  EXPECT_EQ(y[64], -0.5f);
  EXPECT_EQ(y[31], -0.5f);
  EXPECT_EQ(y[63], 0.5f);
  // set_code is the inverse and leaves the other fields alone.
  std::vector<uint8_t> back(32, 0);
  for (int j = 0; j < 128; ++j) q::i2s_set_code(back.data(), j, q::i2s_code(row.data(), j));
  EXPECT_EQ(back, row);
  // Sizes: 2 bits per element + one 32-byte tail per tensor.
  EXPECT_EQ(format::ggml_row_size(GgmlType::I2_S, 2560), 640u);
  EXPECT_EQ(format::ggml_row_size(GgmlType::I2_S, 100), 0u);  // not a whole block
  EXPECT_EQ(format::ggml_tensor_size(GgmlType::I2_S, 2560, 3), 3u * 640u + 32u);
  EXPECT_EQ(format::ggml_tensor_size(GgmlType::TQ2_0, 256, 3), 3u * 66u);
  EXPECT_EQ(format::ggml_type_name(GgmlType::I2_S), "I2_S");
}

TEST(I2sRoundTrip, BitnetQuantizerOnTernaryInput) {
  const int64_t rows = 3, k = 384;
  std::mt19937 rng(5);
  std::vector<float> x((size_t)(rows * k));
  for (float& v : x) v = 0.75f * (float)((int)(rng() % 3) - 1);
  x[7] = 0.75f;  // the max is present
  std::vector<uint8_t> t(format::ggml_tensor_size(GgmlType::I2_S, k, rows), 0xAB);
  q::quantize_i2s(x.data(), rows, k, t.data());
  EXPECT_EQ(q::i2s_tensor_scale(t.data(), rows, k), 0.75f);
  for (size_t b = (size_t)(rows * k / 4) + 4; b < t.size(); ++b) ASSERT_EQ(t[b], 0) << "tail padding";
  std::vector<float> y((size_t)k);
  for (int64_t r = 0; r < rows; ++r) {
    q::dequantize_row_i2s(t.data() + (size_t)(r * k / 4), 0.75f, y.data(), k);
    for (int64_t j = 0; j < k; ++j) ASSERT_EQ(y[(size_t)j], x[(size_t)(r * k + j)]) << r << "," << j;
  }
}

// llama.cpp's TQ float order (matmul_ternary.h) with d = tensor scale.
float expected_dot(const uint8_t* row, float scale, const q::block_q8_K* a, int64_t k) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t b = 0; b < k / 256; ++b) {
    int32_t S[8] = {};
    for (int e = 0; e < 256; ++e) S[(e % 32) / 4] += q::i2s_code(row, b * 256 + e) * a[b].qs[e];
    for (int l = 0; l < 8; ++l) S[l] -= a[b].bsums[2 * l] + a[b].bsums[2 * l + 1];
    const float d = a[b].d * scale;
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, (float)S[l], acc[l]);
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

TEST(I2sMatmul, EveryIsaMatchesReferenceOrder) {
  ThreadPool pool(2);
  int cases = 0;
  for (int64_t k : {256, 512, 2560}) {
    for (int64_t rows : {1, 4, 17, 40}) {
      std::mt19937 rng((uint32_t)(k + rows));
      std::vector<uint8_t> w(format::ggml_tensor_size(GgmlType::I2_S, k, rows), 0);
      // Codes 0..2 plus a few 3s (never written by bitnet.cpp; read as +2).
      for (int64_t i = 0; i < rows * k; ++i) q::i2s_set_code(w.data(), i, rng() % 97 == 0 ? 3 : (int)(rng() % 3));
      const float scale = 0.3125f + (float)rows / 64.f;
      std::memcpy(w.data() + (size_t)(rows * k / 4), &scale, 4);
      const size_t row_bytes = format::ggml_row_size(GgmlType::I2_S, k);
      const WeightView wv{GgmlType::I2_S, w.data(), rows, k, row_bytes};
      const int64_t m_max = 6;
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> x((size_t)(m_max * k));
      for (float& v : x) v = nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f);
      std::vector<float> expect((size_t)(m_max * rows));
      std::vector<q::block_q8_K> a((size_t)(k / 256));
      for (int64_t i = 0; i < m_max; ++i) {
        q::quantize_row_q8_K(x.data() + i * k, a.data(), k);
        for (int64_t r = 0; r < rows; ++r)
          expect[(size_t)(i * rows + r)] = expected_dot(w.data() + (size_t)r * row_bytes, scale, a.data(), k);
      }
      for (Isa isa : available_isas()) {
        ScopedIsa scoped(isa);
        const char* name = matmul_kernel(GgmlType::I2_S, isa)->name;
        for (int64_t m : {1, 2, 5, 6}) {
          std::vector<float> y((size_t)(m * rows), -1.f), y1((size_t)(m * rows), -2.f);
          matmul(wv, x.data(), m, k, y.data(), rows, &pool);
          matmul(wv, x.data(), m, k, y1.data(), rows, nullptr);
          for (size_t e = 0; e < y.size(); ++e) {
            ASSERT_EQ(y[e], expect[e]) << name << " k=" << k << " rows=" << rows << " m=" << m << " e=" << e;
            ASSERT_EQ(y1[e], expect[e]) << name << " (1 thread)";
          }
          ++cases;
        }
      }
      // Embedding-style row lookup applies the tensor scale.
      std::vector<float> row((size_t)k);
      weight_row_to_f32(wv, rows - 1, row.data());
      for (int64_t j = 0; j < k; ++j)
        ASSERT_EQ(row[(size_t)j], (float)(q::i2s_code(w.data() + (size_t)(rows - 1) * row_bytes, j) - 1) * scale);
    }
  }
  RecordProperty("cases", cases);
  EXPECT_TRUE(check_matmul_shape(GgmlType::I2_S, 2560).is_ok());
  EXPECT_FALSE(check_matmul_shape(GgmlType::I2_S, 384).is_ok());  // a valid I2_S row, but not 256-aligned
}

}  // namespace
}  // namespace chimera::kernels
