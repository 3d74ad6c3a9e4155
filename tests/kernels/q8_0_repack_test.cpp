// Load-time repacked Q8_0 and Q4_0 weights (matmul_q8_0_repack.h,
// matmul_q4_0_repack.h, 8-row groups):
//   - the packed layout holds each row's f16 scales and its codes where the
//     headers say;
//   - on every ISA, matmul through a view packed by PackedWeights gives the
//     same bits as the scalar packed reference (ScopedIsa kScalar, which
//     packs too), for odd group counts, k with odd block counts, m = 1..9
//     (GEMV and every tile shape) and 1-3 threads;
//   - packed and storage-layout results agree within the documented bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "format/gguf/ggml_types.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/matmul_q4_0_repack.h"
#include "kernels/matmul_q8_0_repack.h"
#include "kernels/repack.h"
#include "kernels/type_traits.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q8r = legacy::q8r;
namespace q4r = legacy::q4r;

// Random Q8_0 (34-byte) or Q4_0 (18-byte) blocks: any code bytes.
std::vector<uint8_t> random_rows(GgmlType type, int64_t rows, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t nb = k / 32;
  const int bytes = type == GgmlType::Q8_0 ? 34 : 18;
  std::vector<uint8_t> w((size_t)(rows * nb) * bytes);
  for (int64_t b = 0; b < rows * nb; ++b) {
    uint8_t* blk = w.data() + (size_t)b * bytes;
    const uint16_t d = f32_to_f16(std::ldexp(1.f + (float)(rng() % 256) / 256.f, -(int)(rng() % 10) - 4));
    std::memcpy(blk, &d, 2);
    for (int j = 2; j < bytes; ++j)
      blk[j] = type == GgmlType::Q8_0 ? (uint8_t)(int8_t)((int)(rng() % 255) - 127) : (uint8_t)rng();
  }
  return w;
}
std::vector<uint8_t> random_q8_0_rows(int64_t rows, int64_t k, uint32_t seed) {
  return random_rows(GgmlType::Q8_0, rows, k, seed);
}

TEST(Q4_0Repack, LayoutHoldsScalesAndCodeBytes) {
  const int64_t k = 96, rows = 16, nb = 3;
  const std::vector<uint8_t> w = random_rows(GgmlType::Q4_0, rows, k, 5);
  std::vector<uint8_t> p((size_t)rows * q4r::row_bytes(k));
  q4r::repack(w.data(), (size_t)nb * 18, rows, k, p.data());
  const size_t gb = (size_t)q4r::kGroup * q4r::row_bytes(k);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* grp = p.data() + (size_t)(r / 8) * gb;
    const int rr = (int)(r % 8);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w.data() + (size_t)(r * nb + b) * 18;
      ASSERT_EQ(std::memcmp(grp + 16 * b + 2 * rr, blk, 2), 0) << r << " " << b;
      for (int j = 0; j < 16; ++j) {
        const uint8_t code = grp[q4r::codes_offset(nb) + 128 * b + 32 * (j / 4) + 4 * rr + j % 4];
        ASSERT_EQ(code, blk[2 + j]) << r << " " << b << " " << j;
      }
    }
  }
}

TEST(Q8_0Repack, LayoutHoldsScalesAndOffsetCodes) {
  const int64_t k = 96, rows = 16, nb = 3;
  const std::vector<uint8_t> w = random_q8_0_rows(rows, k, 3);
  std::vector<uint8_t> p((size_t)rows * q8r::row_bytes(k));
  q8r::repack(w.data(), (size_t)nb * 34, rows, k, p.data());
  const size_t gb = (size_t)q8r::kGroup * q8r::row_bytes(k);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* grp = p.data() + (size_t)(r / 8) * gb;
    const int rr = (int)(r % 8);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w.data() + (size_t)(r * nb + b) * 34;
      ASSERT_EQ(std::memcmp(grp + 16 * b + 2 * rr, blk, 2), 0) << r << " " << b;
      for (int e = 0; e < 32; ++e) {
        const uint8_t code = grp[q8r::codes_offset(nb) + 256 * b + 32 * (e / 4) + 4 * rr + e % 4];
        ASSERT_EQ((int)code - 128, (int)(int8_t)blk[2 + e]) << r << " " << b << " " << e;
      }
    }
  }
}

class LegacyRepack : public ::testing::TestWithParam<GgmlType> {};

TEST_P(LegacyRepack, PackedMatchesScalarReferenceOnEveryIsa) {
  const GgmlType type = GetParam();
  ThreadPool p2(2), p3(3);
  ThreadPool* pools[] = {nullptr, &p2, &p3};
  const WeightTypeTraits* tr = weight_type_traits(type);
  ASSERT_NE(tr, nullptr);
  int packed_cases = 0;
  for (int64_t k : {32, 96, 544, 2048}) {
    for (int64_t rows : {8, 24, 40, 136}) {
      const std::vector<uint8_t> w = random_rows(type, rows, k, (uint32_t)(k * 7 + rows));
      const size_t rb = format::ggml_row_size(type, k);
      const int64_t m_max = 9, nb = k / 32;
      std::mt19937 rng((uint32_t)(k * 3 + rows));
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> x((size_t)(m_max * k));
      for (float& v : x) v = nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f);
      const WeightView plain{type, w.data(), rows, k, rb};
      // References: scalar packed (exact target) and scalar storage layout.
      std::vector<float> ref_packed((size_t)(m_max * rows)), ref_plain((size_t)(m_max * rows));
      {
        ScopedIsa scoped(Isa::kScalar);
        std::vector<uint8_t> copy = w;
        WeightView pv{type, copy.data(), rows, k, rb};
        PackedWeights packs;
        ASSERT_TRUE(packs.pack(pv));
        matmul(pv, x.data(), m_max, k, ref_packed.data(), rows, nullptr);
        matmul(plain, x.data(), m_max, k, ref_plain.data(), rows, nullptr);
      }
      // Bound between the two layouts: (nb + 8) * 2^-22 * sum_j |w_j a_j| (dequantized).
      std::vector<uint8_t> xq((size_t)nb * 34);
      std::vector<float> wf((size_t)k), af((size_t)k);
      for (int64_t i = 0; i < m_max; ++i) {
        tr->act_from_f32(x.data() + i * k, xq.data(), k);  // Q8_0 activations for both types
        weight_type_traits(tr->vec_dot_type)->row_to_f32(xq.data(), af.data(), k);
        for (int64_t r = 0; r < rows; ++r) {
          tr->row_to_f32(w.data() + (size_t)r * rb, wf.data(), k);
          double s = 0;
          for (int64_t j = 0; j < k; ++j) s += std::fabs((double)wf[(size_t)j] * af[(size_t)j]);
          const double tol = (double)(nb + 8) * std::ldexp(1.0, -22) * s;
          const size_t o = (size_t)(i * rows + r);
          ASSERT_LE(std::fabs((double)ref_packed[o] - ref_plain[o]), tol) << "k=" << k << " r=" << r << " i=" << i;
        }
      }
      for (Isa isa : available_isas()) {
        ScopedIsa scoped(isa);
        const MatmulKernel* kern = matmul_kernel(type, isa);
        const std::string name = kern->name;
        std::vector<uint8_t> copy = w;  // pack() releases the source pages
        WeightView pv{type, copy.data(), rows, k, rb};
        PackedWeights packs;
        const bool packed = packs.pack(pv);
        EXPECT_EQ(packed, kern->repack != nullptr) << name;
        if (!packed) continue;
        ++packed_cases;
        for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 9}) {  // AVX2 GEMM tiles of 4: full tiles plus every tail
          for (ThreadPool* pool : pools) {
            std::vector<float> yp((size_t)(m * rows), -2.f);
            matmul(pv, x.data(), m, k, yp.data(), rows, pool);
            for (int64_t i = 0; i < m * rows; ++i) {
              ASSERT_EQ(yp[(size_t)i], ref_packed[(size_t)i])
                  << "packed " << name << " k=" << k << " rows=" << rows << " m=" << m << " i=" << i;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(packed_cases, 0);
}

INSTANTIATE_TEST_SUITE_P(Q8_0AndQ4_0, LegacyRepack, ::testing::Values(GgmlType::Q8_0, GgmlType::Q4_0),
                         [](const auto& info) { return std::string(format::ggml_type_name(info.param)); });

}  // namespace
}  // namespace chimera::kernels
