// Load-time repacked ternary weights (matmul_ternary.h, kTqGroup layout;
// TQ1_0 is re-encoded into TQ2_0's 2-bit layout):
//   - the packed layout holds the storage bytes (scales and qs) where the
//     header says;
//   - on every ISA, matmul through a view packed by PackedWeights gives the
//     same bits as the storage-layout view and as the scalar kernel, for row
//     counts that are multiples of the group (odd group counts), m = 1..17
//     (GEMV, every GEMM tile width — AVX-512 tiles of up to 8 activation
//     rows — and two full tiles with and without a tail), k up to 27 blocks (the AVX2 GEMM's
//     block chunks) and 1-3 threads (84 rows = 21 groups: the decode GEMV
//     runs 5 kTqStreams steps and a leftover group on 1 thread, 3 steps on
//     [0, 48) and 2 steps and a leftover group on [48, 84) on 2 threads);
//   - the same for m = 50 at k = 6912 (two AVX2 activation blocks) and a
//     row count that is not a multiple of the group (storage-layout panels).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "format/gguf/ggml_types.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/matmul_ternary.h"
#include "kernels/repack.h"
#include "kernels/type_traits.h"
#include "quant/ternary_blocks.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

std::vector<uint8_t> random_tq2_rows(int64_t rows, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t nsb = k / 256;
  std::vector<uint8_t> w((size_t)(rows * nsb) * sizeof(q::block_tq2_0));
  for (int64_t b = 0; b < rows * nsb; ++b) {
    q::block_tq2_0 blk;
    for (auto& v : blk.qs) {
      // trits only (code 3 is not produced by the quantizer)
      uint8_t x = 0;
      for (int n = 0; n < 4; ++n) x |= (uint8_t)((rng() % 3) << (2 * n));
      v = x;
    }
    blk.d = (uint16_t)(0x2000 + rng() % 0x1800);  // f16 in [2^-7, 2^-1)
    std::memcpy(w.data() + (size_t)b * sizeof(blk), &blk, sizeof(blk));
  }
  return w;
}

// Ternary-valued rows with f16-exact block scales, in both formats (same values).
void ternary_rows(int64_t rows, int64_t k, uint32_t seed, std::vector<uint8_t>* tq2, std::vector<uint8_t>* tq1) {
  std::mt19937 rng(seed);
  std::vector<float> x((size_t)(rows * k));
  for (int64_t b = 0; b < rows * k / 256; ++b) {
    const float s = std::ldexp(1.f + (float)(rng() % 64) / 64.f, -(int)(rng() % 8));
    for (int e = 0; e < 256; ++e) x[(size_t)(b * 256 + e)] = s * (float)((int)(rng() % 3) - 1);
    x[(size_t)(b * 256 + rng() % 256)] = s;
  }
  tq2->resize((size_t)(rows * k / 256) * sizeof(q::block_tq2_0));
  tq1->resize((size_t)(rows * k / 256) * sizeof(q::block_tq1_0));
  q::quantize_row_tq2_0(x.data(), reinterpret_cast<q::block_tq2_0*>(tq2->data()), rows * k);
  q::quantize_row_tq1_0(x.data(), reinterpret_cast<q::block_tq1_0*>(tq1->data()), rows * k);
}

TEST(TernaryRepack, Tq1RepacksToTheTq2Layout) {
  const int64_t k = 768, rows = 3 * kTqGroup;
  std::vector<uint8_t> w2, w1;
  ternary_rows(rows, k, 9, &w2, &w1);
  std::vector<uint8_t> p2((size_t)rows * tq_packed_row_bytes(k), 1), p1(p2.size(), 2);
  tq2_0_repack(w2.data(), 3 * sizeof(q::block_tq2_0), rows, k, p2.data());
  tq1_0_repack(w1.data(), 3 * sizeof(q::block_tq1_0), rows, k, p1.data());
  EXPECT_EQ(p1, p2);
}

TEST(TernaryRepack, LayoutHoldsTheStorageBytes) {
  const int64_t k = 768, rows = 2 * kTqGroup, nsb = 3;
  const std::vector<uint8_t> w = random_tq2_rows(rows, k, 5);
  const size_t rb = (size_t)nsb * sizeof(q::block_tq2_0);
  std::vector<uint8_t> p((size_t)rows * tq_packed_row_bytes(k));
  tq2_0_repack(w.data(), rb, rows, k, p.data());
  const size_t gb = (size_t)kTqGroup * tq_packed_row_bytes(k), sc = tq_packed_scale_bytes(k);
  EXPECT_EQ(sc % 64, 0u);
  EXPECT_EQ(gb % 64, 0u);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* src = w.data() + (size_t)r * rb + (size_t)sb * 66;
      const uint8_t* grp = p.data() + (size_t)(r / kTqGroup) * gb;
      const int j = (int)(r % kTqGroup);
      ASSERT_EQ(std::memcmp(grp + sc + (size_t)(sb * kTqGroup + j) * 64, src, 64), 0) << r << " " << sb;
      ASSERT_EQ(std::memcmp(grp + (size_t)(sb * kTqGroup + j) * 2, src + 64, 2), 0) << r << " " << sb;
    }
}

TEST(TernaryRepack, PackedMatchesStorageLayoutOnEveryIsa) {
  ThreadPool p2(2), p3(3);
  ThreadPool* pools[] = {nullptr, &p2, &p3};
  int packed_cases = 0;
  for (GgmlType type : {GgmlType::TQ2_0, GgmlType::TQ1_0})
  for (int64_t k : {256, 768, 2560, 6912}) {
    for (int64_t rows : {(int64_t)kTqGroup, 3 * (int64_t)kTqGroup, 5 * (int64_t)kTqGroup + 64}) {
      std::vector<uint8_t> w, w1;
      if (type == GgmlType::TQ2_0) {
        w = random_tq2_rows(rows, k, (uint32_t)(k + rows));
      } else {
        ternary_rows(rows, k, (uint32_t)(k + rows), &w1, &w);
      }
      const size_t rb = format::ggml_row_size(type, k);
      const int64_t m_max = 17;
      std::mt19937 rng((uint32_t)(k * 3 + rows));
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> x((size_t)(m_max * k));
      for (float& v : x) v = nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f);
      const WeightView plain{type, w.data(), rows, k, rb};
      // Scalar storage-layout reference.
      std::vector<float> ref((size_t)(m_max * rows));
      {
        ScopedIsa scoped(Isa::kScalar);
        matmul(plain, x.data(), m_max, k, ref.data(), rows, nullptr);
      }
      for (Isa isa : available_isas()) {
        ScopedIsa scoped(isa);
        const std::string name = matmul_kernel(type, isa)->name;
        std::vector<uint8_t> copy = w;  // pack() releases the source pages
        WeightView pv{type, copy.data(), rows, k, rb};
        PackedWeights packs;
        const bool packed = packs.pack(pv);
        EXPECT_EQ(packed, matmul_kernel(type, isa)->repack != nullptr) << name;
        if (packed) ++packed_cases;
        for (int64_t m = 1; m <= m_max; ++m) {
          for (ThreadPool* pool : pools) {
            std::vector<float> y((size_t)(m * rows), -1.f), yp((size_t)(m * rows), -2.f);
            matmul(plain, x.data(), m, k, y.data(), rows, pool);
            matmul(pv, x.data(), m, k, yp.data(), rows, pool);
            for (int64_t i = 0; i < m * rows; ++i) {
              ASSERT_EQ(y[(size_t)i], ref[(size_t)i]) << name << " k=" << k << " rows=" << rows << " m=" << m << " i=" << i;
              ASSERT_EQ(yp[(size_t)i], ref[(size_t)i])
                  << "packed " << name << " k=" << k << " rows=" << rows << " m=" << m << " i=" << i;
            }
          }
        }
      }
    }
  }
  RecordProperty("packed_cases", packed_cases);
  for (Isa isa : available_isas())
    if (isa == Isa::kAvx512Vnni) {
      EXPECT_GT(packed_cases, 0);
    }
}

// The packed GEMMs called directly with one activation row (the decode GEMV)
// over row ranges that give several multi-stream steps with and without the
// next steps' L2 prefetch, leftover groups, a range starting at an odd group
// and ranges shorter than one step (2 kTqStreams + 3 groups), at every
// activation row of a batch of 3: bit-identical to the scalar storage-layout
// kernel, rows and activation rows outside the range not written.
TEST(TernaryRepack, PackedGemvRowRangesAreBitIdentical) {
  constexpr int64_t G = kTqGroup;
  const int64_t rows = (2 * kTqStreams + 3) * G, m = 3;
  const std::pair<int64_t, int64_t> ranges[] = {
      {0, rows}, {G, rows - G}, {G, rows}, {2 * G, (2 + kTqStreams) * G}, {0, G}, {3 * G, 5 * G}, {rows - G, rows}};
  int checked = 0;
  for (GgmlType type : {GgmlType::TQ2_0, GgmlType::TQ1_0}) {
    for (int64_t k : {256, 2560}) {
      std::vector<uint8_t> w, w1;
      if (type == GgmlType::TQ2_0) {
        w = random_tq2_rows(rows, k, (uint32_t)(k + 3));
      } else {
        ternary_rows(rows, k, (uint32_t)(k + 3), &w1, &w);
      }
      const size_t rb = format::ggml_row_size(type, k);
      std::mt19937 rng((uint32_t)k);
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> x((size_t)(m * k));
      for (float& v : x) v = nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f);
      std::vector<float> ref((size_t)(m * rows));
      {
        ScopedIsa scoped(Isa::kScalar);
        matmul(WeightView{type, w.data(), rows, k, rb}, x.data(), m, k, ref.data(), rows, nullptr);
      }
      for (Isa isa : available_isas()) {
        const MatmulKernel* kern = matmul_kernel(type, isa);
        if (!kern->repack) continue;
        // 64-byte aligned, like PackedWeights and matmul's activation scratch
        const auto align64 = [](std::vector<uint8_t>& v) {
          return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
        };
        std::vector<uint8_t> packed((size_t)rows * kern->repack_row_bytes(k) + 64);
        uint8_t* w0 = align64(packed);
        kern->repack(w.data(), rb, rows, k, w0);
        const size_t ab = act_stride(kern, k);
        std::vector<uint8_t> act((size_t)m * ab + 64);
        uint8_t* a0 = align64(act);
        for (int64_t i = 0; i < m; ++i) kern->pack_act(x.data() + i * k, k, a0 + (size_t)i * ab);
        GemmArgs g;
        g.w = w0;
        g.w_stride = kern->repack_row_bytes(k);
        g.a = a0;
        g.a_stride = ab;
        g.k = k;
        g.ldy = rows;
        for (const auto& [r0, r1] : ranges) {
          for (int64_t i = 0; i < m; ++i) {
            std::vector<float> y((size_t)(m * rows), -7.f);
            g.y = y.data();
            kern->gemm_packed(g, r0, r1, i, i + 1);
            for (int64_t ii = 0; ii < m; ++ii) {
              for (int64_t r = 0; r < rows; ++r) {
                const bool in = ii == i && r >= r0 && r < r1;
                const float want = in ? ref[(size_t)(ii * rows + r)] : -7.f;
                ASSERT_EQ(std::memcmp(&y[(size_t)(ii * rows + r)], &want, 4), 0)
                    << kern->name << " k=" << k << " rows=[" << r0 << "," << r1 << ") i=" << i << " row " << r
                    << " act " << ii;
              }
            }
            ++checked;
          }
        }
      }
    }
  }
  for (Isa isa : available_isas())
    if (isa == Isa::kAvx2) {
      EXPECT_GT(checked, 0);
    }
}

TEST(TernaryRepack, LargeBatchAcrossActivationBlocksMatchesScalar) {
  ThreadPool p2(2);
  const int64_t k = 6912, m = 50;
  for (GgmlType type : {GgmlType::TQ2_0, GgmlType::TQ1_0}) {
    for (int64_t rows : {3 * (int64_t)kTqGroup, 3 * (int64_t)kTqGroup + 2}) {
      std::vector<uint8_t> w, w1;
      if (type == GgmlType::TQ2_0) {
        w = random_tq2_rows(rows, k, (uint32_t)(rows + 11));
      } else {
        ternary_rows(rows, k, (uint32_t)(rows + 11), &w1, &w);
      }
      const size_t rb = format::ggml_row_size(type, k);
      std::mt19937 rng((uint32_t)rows);
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> x((size_t)(m * k));
      for (float& v : x) v = nd(rng);
      const WeightView plain{type, w.data(), rows, k, rb};
      std::vector<float> ref((size_t)(m * rows));
      {
        ScopedIsa scoped(Isa::kScalar);
        matmul(plain, x.data(), m, k, ref.data(), rows, nullptr);
      }
      for (Isa isa : available_isas()) {
        ScopedIsa scoped(isa);
        const std::string name = matmul_kernel(type, isa)->name;
        std::vector<uint8_t> copy = w;
        WeightView pv{type, copy.data(), rows, k, rb};
        PackedWeights packs;
        packs.pack(pv);  // rows % kTqGroup != 0 stays in storage layout
        for (ThreadPool* pool : {(ThreadPool*)nullptr, &p2}) {
          std::vector<float> y((size_t)(m * rows), -1.f), yp((size_t)(m * rows), -2.f);
          matmul(plain, x.data(), m, k, y.data(), rows, pool);
          matmul(pv, x.data(), m, k, yp.data(), rows, pool);
          for (int64_t i = 0; i < m * rows; ++i) {
            ASSERT_EQ(y[(size_t)i], ref[(size_t)i]) << name << " rows=" << rows << " i=" << i;
            ASSERT_EQ(yp[(size_t)i], ref[(size_t)i]) << "packed " << name << " rows=" << rows << " i=" << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace chimera::kernels
