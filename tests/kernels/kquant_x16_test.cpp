// The x16 K-quant layout (kernels/matmul_kquant_x16.h):
//  - repack -> unpack round trip: random storage bytes (every bit pattern of
//    levels, scales, d) come back byte for byte for every row and super-block
//    (Q4_K, Q5_K, Q6_K), and the packed copy has the storage byte count;
//  - Q6_K layout as documented in the header, checked against the scalar
//    decoder (levels, int8 scales, d), independently of the unpacker;
//  - Q6_K x16 kernels on random-byte blocks (all levels, all int8 scales
//    including -128, extreme activations): bit-identical to the scalar
//    storage-layout kernel on every ISA that packs Q6_K as x16, through
//    matmul and called directly for every activation-row range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kquant.h"
#include "kernels/matmul_kquant_x16.h"
#include "kernels/repack.h"
#include "kernels/type_traits.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

// Random bytes with a finite, moderate f16 d (and dmin) in every block.
std::vector<uint8_t> random_blocks(GgmlType t, int64_t rows, int64_t k, uint32_t seed) {
  const size_t bb = weight_type_traits(t)->type_size;
  std::vector<uint8_t> w((size_t)(rows * (k / 256)) * bb);
  std::mt19937 rng(seed);
  for (uint8_t& b : w) b = (uint8_t)rng();
  for (size_t blk = 0; blk < w.size() / bb; ++blk) {
    uint8_t* p = w.data() + blk * bb;
    const auto put = [&](size_t off) {
      const uint16_t h = f32_to_f16(std::ldexp(1.f + (float)(rng() % 100) / 100.f, -(int)(rng() % 12)));
      std::memcpy(p + off, &h, 2);
    };
    if (t == GgmlType::Q6_K) {
      put(offsetof(q::block_q6_K, d));
    } else {
      put(0);
      put(2);
    }
  }
  return w;
}

// The x16 repack function of `t` (as the AVX-512 kernels install it).
MatmulKernel x16_kernel(GgmlType t) {
  MatmulKernel k{};
  kq_x16_set_repack(t, [](const GemmArgs&, int64_t, int64_t, int64_t, int64_t) {}, k);
  return k;
}

TEST(KQuantX16, RepackUnpackRoundTripsEveryByte) {
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const KqX16Layout* lay = kq_x16_layout(t);
    ASSERT_NE(lay, nullptr) << format::ggml_type_name(t);
    const MatmulKernel kern = x16_kernel(t);
    ASSERT_NE(kern.repack, nullptr);
    ASSERT_EQ(kern.repack_rows, kX16Rows);
    const size_t bb = weight_type_traits(t)->type_size;
    ASSERT_EQ(lay->block_bytes, bb);
    for (int64_t k : {256, 768}) {
      for (int64_t rows : {16, 48}) {
        const int64_t nsb = k / 256;
        const size_t row_bytes = (size_t)nsb * bb;
        // the source rows at a wider stride than their bytes (a 3-D tensor slice)
        const size_t stride = row_bytes + 2 * bb;
        const std::vector<uint8_t> w = random_blocks(t, rows, k + 512, (uint32_t)(k + rows + (int)t));
        ASSERT_EQ(kern.repack_row_bytes(k), row_bytes);
        std::vector<uint8_t> packed((size_t)rows * row_bytes + 1, 0x5A);
        kern.repack(w.data(), stride, rows, k, packed.data());
        EXPECT_EQ(packed.back(), 0x5A) << "repack wrote past rows * row_bytes";
        std::vector<uint8_t> out(bb);
        for (int64_t r = 0; r < rows; ++r) {
          const uint8_t* group = packed.data() + (size_t)(r / kX16Rows) * kX16Rows * row_bytes;
          for (int64_t sb = 0; sb < nsb; ++sb) {
            std::fill(out.begin(), out.end(), (uint8_t)0xEE);
            lay->unpack(group, (int)(r % kX16Rows), sb, out.data());
            ASSERT_EQ(std::memcmp(out.data(), w.data() + (size_t)r * stride + (size_t)sb * bb, bb), 0)
                << format::ggml_type_name(t) << " k=" << k << " row " << r << " sb " << sb;
          }
        }
      }
    }
  }
}

// Layout spec of matmul_kquant_x16.h (Q6_K) against the scalar decoder.
TEST(KQuantX16, Q6KLayoutMatchesHeader) {
  const int64_t k = 512, nsb = 2, rows = 32;
  const std::vector<uint8_t> w = random_blocks(GgmlType::Q6_K, rows, k, 7);
  const size_t bb = sizeof(q::block_q6_K);
  std::vector<uint8_t> packed((size_t)rows * nsb * bb);
  x16_kernel(GgmlType::Q6_K).repack(w.data(), nsb * bb, rows, k, packed.data());
  const KqTypeInfo* info = kq_type_info(GgmlType::Q6_K);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* src = w.data() + (size_t)(r * nsb + sb) * bb;
      KqDecoded dec;
      float dd[2];
      info->decode(src, &dec, dd);
      const int rr = (int)(r % kX16Rows);
      const uint8_t* gb = packed.data() + (size_t)((r / kX16Rows) * nsb + sb) * kX16Rows * bb;
      uint16_t d;
      std::memcpy(&d, gb + 2 * rr, 2);
      ASSERT_EQ(f16_to_f32(d), dd[0]);
      for (int g = 0; g < 16; ++g) {
        ASSERT_EQ((int8_t)gb[32 + 64 * (g / 4) + 16 * (rr / 4) + 4 * (rr % 4) + g % 4], dec.sc[g]) << "scale " << g;
      }
      for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 8; ++l) {
          for (int u = 0; u < 4; ++u) {
            int q3 = 0;
            for (int t = 0; t < 3; ++t) {
              const uint8_t x = gb[288 + 64 * (3 * (8 * (l / 4) + 4 * h + l % 4) + t) + 4 * rr + u];
              ASSERT_EQ(x & 63, dec.q[128 * h + 32 * t + 4 * l + u]) << "r " << r << " h " << h << " l " << l;
              q3 |= (x >> 6) << (2 * t);
            }
            ASSERT_EQ(q3, dec.q[128 * h + 96 + 4 * l + u]) << "r " << r << " h " << h << " l " << l;
          }
        }
      }
    }
  }
}

// Random-byte Q6_K weights through kernels::matmul packed on each ISA that
// uses the x16 layout: the same bits as the scalar storage-layout kernel.
TEST(KQuantX16, Q6KPackedIsBitIdenticalOnRandomBlocks) {
  ThreadPool pool(2);
  int x16_isas = 0;
  for (int64_t k : {256, 1280}) {
    for (int64_t rows : {16, 64}) {
      const size_t row_bytes = (size_t)(k / 256) * sizeof(q::block_q6_K);
      const std::vector<uint8_t> w = random_blocks(GgmlType::Q6_K, rows, k, (uint32_t)(3 * k + rows));
      const int64_t m = 3;
      std::mt19937 rng((uint32_t)k);
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> x((size_t)(m * k));
      // row 0: Gaussian with outliers; row 1: +-max (Q8_K -127 / 127 and the
      // -128 of a negative maximum); row 2: mostly zero
      for (int64_t e = 0; e < k; ++e) {
        x[(size_t)e] = nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f);
        x[(size_t)(k + e)] = (rng() % 2 ? 1.f : -1.f) * (e % 256 == 5 ? 2.f : 1.f);
        x[(size_t)(2 * k + e)] = rng() % 7 == 0 ? nd(rng) : 0.f;
      }
      const WeightView ws{GgmlType::Q6_K, w.data(), rows, k, row_bytes};
      std::vector<float> y0((size_t)(m * rows));
      {
        ScopedIsa scalar(Isa::kScalar);
        matmul(ws, x.data(), m, k, y0.data(), rows, nullptr);
      }
      for (Isa isa : available_isas()) {
        ScopedIsa scoped(isa);
        const MatmulKernel* kern = matmul_kernel(GgmlType::Q6_K, isa);
        if (kern->repack_rows != kX16Rows) continue;
        ++x16_isas;
        std::vector<uint8_t> copy = w;
        WeightView wp{GgmlType::Q6_K, copy.data(), rows, k, row_bytes};
        PackedWeights packs;
        ASSERT_TRUE(packs.pack(wp)) << kern->name;
        std::fill(copy.begin(), copy.end(), (uint8_t)0xA5);
        for (int64_t mm : {1, 3}) {  // x16 GEMV per activation row; the unpacking GEMM
          for (ThreadPool* p : {(ThreadPool*)nullptr, &pool}) {
            std::vector<float> y((size_t)(mm * rows), -1.f);
            if (mm == 1) {
              for (int64_t i = 0; i < m; ++i) {
                matmul(wp, x.data() + i * k, 1, k, y.data(), rows, p);
                ASSERT_EQ(std::memcmp(y.data(), y0.data() + i * rows, (size_t)rows * 4), 0)
                    << kern->name << " k=" << k << " rows=" << rows << " act row " << i;
              }
            } else {
              matmul(wp, x.data(), mm, k, y.data(), rows, p);
              ASSERT_EQ(std::memcmp(y.data(), y0.data(), y.size() * 4), 0)
                  << kern->name << " k=" << k << " rows=" << rows << " m=" << mm;
            }
          }
        }
      }
    }
  }
  // Without an AVX-512 CPU there is nothing to compare (the round-trip and
  // layout tests above still run).
  if (x16_isas == 0) GTEST_SKIP() << "no ISA packs Q6_K as x16 on this CPU";
}

// The Q6_K x16 GEMM (matmul_kquant_x16_q6_avx512.cpp) called directly: every
// m and activation-row range, bit-identical to the scalar storage kernel.
TEST(KQuantX16, Q6KGemmIsBitIdenticalOnRandomBlocks) {
  const GemmFn gemm = kq_x16_q6_gemm_avx512(true), gemm_plain = kq_x16_q6_gemm_avx512(false);
  const auto isas = available_isas();
  if (!gemm || std::find(isas.begin(), isas.end(), Isa::kAvx512) == isas.end()) {
    GTEST_SKIP() << "no AVX-512";
  }
  const bool vnni = std::find(isas.begin(), isas.end(), Isa::kAvx512Vnni) != isas.end();
  for (int64_t k : {256, 1280}) {
    const int64_t rows = 32, m = 11;
    const size_t row_bytes = (size_t)(k / 256) * sizeof(q::block_q6_K);
    const std::vector<uint8_t> w = random_blocks(GgmlType::Q6_K, rows, k, (uint32_t)(5 * k));
    std::mt19937 rng((uint32_t)k + 1);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x((size_t)(m * k));
    for (size_t e = 0; e < x.size(); ++e) x[e] = nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f) * (e / k == 3 ? 0.f : 1.f);
    std::vector<float> y0((size_t)(m * rows));
    {
      ScopedIsa scalar(Isa::kScalar);
      matmul(WeightView{GgmlType::Q6_K, w.data(), rows, k, row_bytes}, x.data(), m, k, y0.data(), rows, nullptr);
    }
    std::vector<uint8_t> packed(w.size());
    x16_kernel(GgmlType::Q6_K).repack(w.data(), row_bytes, rows, k, packed.data());
    const size_t ab = kq_act_bytes(k);
    std::vector<uint8_t> act((size_t)m * ab);
    for (int64_t i = 0; i < m; ++i) kq_pack_act(x.data() + i * k, k, act.data() + (size_t)i * ab);
    GemmArgs g;
    g.w = packed.data();
    g.w_stride = row_bytes;
    g.a = act.data();
    g.a_stride = ab;
    g.k = k;
    g.ldy = rows;
    for (GemmFn fn : {gemm_plain, vnni ? gemm : gemm_plain}) {
      for (int64_t i0 : {0, 1, 5}) {
        for (int64_t i1 = i0 + 1; i1 <= m; ++i1) {
          std::vector<float> y((size_t)(m * rows), -7.f);
          g.y = y.data();
          fn(g, 0, rows, i0, i1);
          for (int64_t i = 0; i < m; ++i) {
            const bool in = i >= i0 && i < i1;
            for (int64_t r = 0; r < rows; ++r) {
              const float want = in ? y0[(size_t)(i * rows + r)] : -7.f;
              ASSERT_EQ(std::memcmp(&y[(size_t)(i * rows + r)], &want, 4), 0)
                  << "k=" << k << " i=[" << i0 << "," << i1 << ") row " << r << " act " << i;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace chimera::kernels
