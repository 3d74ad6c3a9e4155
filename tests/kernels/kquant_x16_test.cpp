// The x16 K-quant layout (kernels/matmul_kquant_x16.h):
//  - repack -> unpack round trip: random storage bytes (every bit pattern of
//    levels, scales, d) come back byte for byte for every row and super-block
//    (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS), and the packed copy has the
//    storage byte count;
//  - Q6_K, Q2_K, Q3_K and IQ4_XS layouts as documented in the header, checked
//    against the scalar decoder / storage fields (levels, scales, mins, d),
//    independently of the unpacker;
//  - Q4_K, Q5_K, Q6_K, Q2_K, Q3_K and IQ4_XS x16 kernels on random-byte blocks
//    (all levels, all scales, extreme activations): bit-identical to their
//    scalar reference kq_x16_dot_ref (for Q2_K, Q3_K, IQ4_XS the scalar
//    storage-layout kernel; Q4_K, Q5_K and Q6_K have an x16 order of their
//    own) on every ISA that packs them as x16,
//    through matmul (m = 1..17, 64, 70; 1 and 2 threads; of a row
//    count that is not a multiple of 16 the last rows stay in storage layout
//    and give the storage kernel's bits) and called directly (AVX2, AVX-VNNI,
//    AVX-512, AVX-512 VNNI, AMX) for every activation-row range;
//  - Q4_K / Q5_K / Q6_K / IQ4_XS kernels at the bounds of their integer sums;
//  - the AMX Q4_K GEMM (tiles of 16 activation rows, overlapping tails,
//    blocks of 128 rows) against the AVX-512 VNNI one and kq_x16_dot_ref for
//    m up to 150, odd group counts, one super-block, 1 and 2 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/fp16.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kquant.h"
#include "kernels/matmul_kquant_x16.h"
#include "kernels/repack.h"
#include "kernels/type_traits.h"
#include "quant/iq4xs_blocks.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

// The most groups a multi-stream decode GEMV step reads (gemv_prefetch.h).
constexpr int kMaxStreams = std::max({kX16Streams, kX16StreamsAvx2, kX16StreamsQ23, kX16StreamsQ23Avx2});

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
    switch (t) {
      case GgmlType::Q6_K: put(offsetof(q::block_q6_K, d)); break;
      case GgmlType::Q3_K: put(offsetof(q::block_q3_K, d)); break;
      case GgmlType::IQ4_XS: put(offsetof(q::block_iq4_xs, d)); break;
      case GgmlType::Q2_K:
        put(offsetof(q::block_q2_K, d));
        put(offsetof(q::block_q2_K, dmin));
        break;
      default:
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
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K, GgmlType::Q3_K,
                     GgmlType::IQ4_XS}) {
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
      // scale group g: chunks 3g + c hold dwords c < 3 (low 6 bits) and the
      // bits 2c, 2c + 1 of dword 3 (top 2 bits)
      for (int g = 0; g < 16; ++g) {
        for (int u = 0; u < 4; ++u) {
          int q3 = 0;
          for (int c = 0; c < 3; ++c) {
            const uint8_t x = gb[288 + 64 * (3 * g + c) + 4 * rr + u];
            ASSERT_EQ(x & 63, dec.q[16 * g + 4 * c + u]) << "r " << r << " g " << g << " c " << c << " u " << u;
            q3 |= (x >> 6) << (2 * c);
          }
          ASSERT_EQ(q3, dec.q[16 * g + 12 + u]) << "r " << r << " g " << g << " u " << u;
        }
      }
    }
  }
}

// Layout spec of matmul_kquant_x16.h (Q2_K, Q3_K) against the scalar decoder.
TEST(KQuantX16, Q2KQ3KLayoutMatchesHeader) {
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K}) {
    const bool q3 = t == GgmlType::Q3_K;
    const int64_t k = 512, nsb = 2, rows = 32;
    const std::vector<uint8_t> w = random_blocks(t, rows, k, q3 ? 11 : 13);
    const size_t bb = weight_type_traits(t)->type_size;
    std::vector<uint8_t> packed((size_t)rows * nsb * bb);
    x16_kernel(t).repack(w.data(), nsb * bb, rows, k, packed.data());
    const KqTypeInfo* info = kq_type_info(t);
    const size_t scales = q3 ? 32 : 64, levels = 224, qs = 320;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t sb = 0; sb < nsb; ++sb) {
        KqDecoded dec;
        float dd[2];
        info->decode(w.data() + (size_t)(r * nsb + sb) * bb, &dec, dd);
        const int rr = (int)(r % kX16Rows);
        const uint8_t* gb = packed.data() + (size_t)((r / kX16Rows) * nsb + sb) * kX16Rows * bb;
        uint16_t d;
        std::memcpy(&d, gb + 2 * rr, 2);
        ASSERT_EQ(f16_to_f32(d), dd[0]) << format::ggml_type_name(t);
        if (!q3) {
          std::memcpy(&d, gb + 32 + 2 * rr, 2);
          ASSERT_EQ(f16_to_f32(d), dd[1]);
        }
        // scales: Q2_K plane t byte 4rr + u = scales[4t + u]; Q3_K the 12
        // packed bytes in 3 chunks, q3_K_scales_biased of them
        uint8_t packed_scales[12], biased[16];
        for (int c = 0; c < (q3 ? 3 : 4); ++c) {
          for (int u = 0; u < 4; ++u) {
            const uint8_t b = gb[scales + 64 * c + 4 * rr + u];
            if (q3) {
              packed_scales[4 * c + u] = b;
            } else {
              ASSERT_EQ(b & 15, dec.sc[4 * c + u]) << "Q2_K scale " << 4 * c + u;
              ASSERT_EQ(b >> 4, dec.bc[4 * c + u]) << "Q2_K min " << 4 * c + u;
            }
          }
        }
        if (q3) {
          q::q3_K_scales_biased(packed_scales, biased);
          for (int g = 0; g < 16; ++g) ASSERT_EQ(biased[g] - 32, dec.sc[g]) << "Q3_K scale " << g;
        }
        for (int h = 0; h < 2; ++h) {
          for (int j = 0; j < 4; ++j) {
            for (int l = 0; l < 8; ++l) {
              for (int u = 0; u < 4; ++u) {
                int lv = 0;
                if (q3) {  // quarter k = 4h + j from X0..X2 of lane l
                  const uint8_t* x = gb + levels + 64 * 3 * l + 4 * rr + u;
                  const int k = 4 * h + j;
                  const int packed_lv[8] = {x[0] & 7,  x[0] >> 3 & 7,  x[64] & 7,
                                            x[64] >> 3 & 7, x[128] & 7, x[128] >> 3 & 7,
                                            x[0] >> 6 | (x[128] >> 6 & 1) << 2, x[64] >> 6 | (x[128] >> 7) << 2};
                  lv = packed_lv[k];
                } else {
                  lv = (gb[qs + 64 * (8 * h + l) + 4 * rr + u] >> (2 * j)) & 3;
                }
                ASSERT_EQ(lv, dec.q[128 * h + 32 * j + 4 * l + u])
                    << format::ggml_type_name(t) << " r " << r << " h " << h << " j " << j << " l " << l;
              }
            }
          }
        }
      }
    }
  }
}

bool has_isa(Isa i) {
  const auto isas = available_isas();
  return std::find(isas.begin(), isas.end(), i) != isas.end();
}

// Q4_K's, Q5_K's and Q6_K's x16 kernels have an order of their own
// (kq_x16_dot_ref); Q2_K, Q3_K and IQ4_XS keep the storage kernels'.
bool x16_own_order(GgmlType t) { return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K; }

// kq_x16_dot_ref of every (activation row, weight row) of x (m x k) and w.
std::vector<float> x16_reference(GgmlType t, const std::vector<uint8_t>& w, int64_t rows, const std::vector<float>& x,
                                 int64_t m, int64_t k) {
  const size_t row_bytes = (size_t)(k / 256) * weight_type_traits(t)->type_size;
  const size_t ab = kq_act_bytes(k);
  std::vector<uint8_t> act(ab);
  std::vector<float> y((size_t)(m * rows));
  for (int64_t i = 0; i < m; ++i) {
    kq_pack_act(x.data() + i * k, k, act.data());
    for (int64_t r = 0; r < rows; ++r) {
      y[(size_t)(i * rows + r)] = kq_x16_dot_ref(t, w.data() + (size_t)r * row_bytes, act.data(), k);
    }
  }
  return y;
}

// Random-byte weights of an x16 type through kernels::matmul packed on each
// ISA that uses the x16 layout: the same bits as kq_x16_dot_ref (for Q2_K,
// Q3_K, IQ4_XS the scalar storage-layout kernel) for every m (GEMV and GEMM
// tiles, odd tails), 1 and 2 threads. Of a row count that is not a multiple
// of 16 the last rows stay in storage layout and give the scalar storage
// kernel's bits.
void check_packed_bit_identical(GgmlType t) {
  static_assert(144 / kX16Rows >= 2 * kMaxStreams + 1,
                "144 rows no longer give two steps and a leftover group");
  ThreadPool pool(2);
  int x16_isas = 0;
  const int64_t m = 70;
  for (int64_t k : {256, 1280}) {
    // 144 rows: with 1 thread, two multi-stream GEMV steps (the first with
    // the L2 prefetch of the second) and a leftover group; with 2 threads,
    // one step and leftovers per thread (steps of up to 4 groups)
    for (int64_t rows : {16, 40, 64, 144}) {
      const size_t row_bytes = (size_t)(k / 256) * weight_type_traits(t)->type_size;
      const std::vector<uint8_t> w = random_blocks(t, rows, k, (uint32_t)(3 * k + rows + (int)t));
      std::mt19937 rng((uint32_t)k);
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> x((size_t)(m * k));
      // rows 3i: Gaussian with outliers; 3i + 1: +-max (Q8_K -127 / 127 and the
      // -128 of a negative maximum); 3i + 2: mostly zero
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t e = 0; e < k; ++e) {
          float& v = x[(size_t)(i * k + e)];
          switch (i % 3) {
            case 0: v = nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f); break;
            case 1: v = (rng() % 2 ? 1.f : -1.f) * (e % 256 == 5 ? 2.f : 1.f); break;
            default: v = rng() % 7 == 0 ? nd(rng) : 0.f;
          }
        }
      }
      const WeightView ws{t, w.data(), rows, k, row_bytes};
      std::vector<float> y_storage((size_t)(m * rows));
      {
        ScopedIsa scalar(Isa::kScalar);
        matmul(ws, x.data(), m, k, y_storage.data(), rows, nullptr);
      }
      const std::vector<float> y_x16 = x16_own_order(t) ? x16_reference(t, w, rows, x, m, k) : y_storage;
      for (Isa isa : available_isas()) {
        ScopedIsa scoped(isa);
        const MatmulKernel* kern = matmul_kernel(t, isa);
        if (kern->repack_rows != kX16Rows) continue;
        std::vector<uint8_t> copy = w;
        WeightView wp{t, copy.data(), rows, k, row_bytes};
        PackedWeights packs;
        const bool packed = packs.pack(wp);
        ASSERT_EQ(packed, rows >= kX16Rows) << kern->name << " rows=" << rows;
        // 40 rows: 32 packed, the last 8 in storage layout (the storage kernel's bits)
        const int64_t prows = rows / kX16Rows * kX16Rows;
        ASSERT_EQ(wp.packed_rows, prows);
        ++x16_isas;
        // the packed path must not read the storage of the packed rows
        std::fill(copy.begin(), copy.begin() + (ptrdiff_t)((size_t)prows * row_bytes), (uint8_t)0xA5);
        std::vector<float> y0 = y_storage;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t r = 0; r < prows; ++r) y0[(size_t)(i * rows + r)] = y_x16[(size_t)(i * rows + r)];
        for (int64_t mm : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 64, 70}) {
          for (ThreadPool* p : {(ThreadPool*)nullptr, &pool}) {
            std::vector<float> y((size_t)(mm * rows), -1.f);
            if (mm == 1) {  // the decode GEMV, per activation row
              for (int64_t i = 0; i < 3; ++i) {
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
  // Without an AVX2 / AVX-512 CPU there is nothing to compare (the round-trip
  // and layout tests above still run).
  if (x16_isas == 0) GTEST_SKIP() << "no ISA packs " << format::ggml_type_name(t) << " as x16 on this CPU";
}

TEST(KQuantX16, Q4KPackedIsBitIdenticalOnRandomBlocks) { check_packed_bit_identical(GgmlType::Q4_K); }
TEST(KQuantX16, Q5KPackedIsBitIdenticalOnRandomBlocks) { check_packed_bit_identical(GgmlType::Q5_K); }
TEST(KQuantX16, Q6KPackedIsBitIdenticalOnRandomBlocks) { check_packed_bit_identical(GgmlType::Q6_K); }
TEST(KQuantX16, Q2KPackedIsBitIdenticalOnRandomBlocks) { check_packed_bit_identical(GgmlType::Q2_K); }
TEST(KQuantX16, Q3KPackedIsBitIdenticalOnRandomBlocks) { check_packed_bit_identical(GgmlType::Q3_K); }
TEST(KQuantX16, Iq4xsPackedIsBitIdenticalOnRandomBlocks) { check_packed_bit_identical(GgmlType::IQ4_XS); }

// The x16 GEMMs of Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS called directly, on every ISA the
// CPU has (AVX2, AVX-512, AVX-512 VNNI): every activation-row range (so every
// tile height), several super-blocks, row ranges that give the decode GEMV
// multi-stream steps with and without the next steps' prefetch and leftover
// groups (13 groups: at least two steps with the prefetch, one without and a
// leftover group for every step size, kMaxStreams; AVX2 Q2_K / Q3_K read 2
// groups at once, AVX-512 Q2_K / Q3_K 4 — gemv_prefetch.h), bit-identical to
// kq_x16_dot_ref (for Q2_K, Q3_K, IQ4_XS the scalar storage kernel); rows
// outside the range are not written.
static_assert(13 >= 3 * kMaxStreams + 1, "13 groups no longer cover every multi-stream case");
void check_gemm_bit_identical(GgmlType t) {
  const auto isas = available_isas();
  const auto has = [&](Isa i) { return std::find(isas.begin(), isas.end(), i) != isas.end(); };
  // each with its ISA: the activations are packed by that ISA's kernel
  // (IQ4_XS on AVX-512: regrouped Q8_K, matmul_iq4xs_avx512.cpp)
  std::vector<std::pair<Isa, GemmFn>> fns;
  if (has(Isa::kAvx2)) fns.emplace_back(Isa::kAvx2, kq_x16_gemm_avx2(t));
  // AVX-VNNI: Q4_K and Q6_K (the others run their AVX2 kernels at that level)
  if (has(Isa::kAvx2Vnni) && kq_x16_gemm_avx2vnni(t)) fns.emplace_back(Isa::kAvx2Vnni, kq_x16_gemm_avx2vnni(t));
  if (has(Isa::kAvx512)) fns.emplace_back(Isa::kAvx512, kq_x16_gemm_avx512(t, false));
  if (has(Isa::kAvx512Vnni)) fns.emplace_back(Isa::kAvx512Vnni, kq_x16_gemm_avx512(t, true));
  // AMX: Q4_K only (the others run their AVX-512 VNNI kernels at that level)
  if (has(Isa::kAmx) && kq_x16_gemm_amx(t)) fns.emplace_back(Isa::kAmx, kq_x16_gemm_amx(t));
  if (fns.empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (int64_t k : {256, 1280}) {
    const int64_t rows = 13 * kX16Rows, m = 17;  // tiles of up to 8 rows: two and a tail
    const size_t row_bytes = (size_t)(k / 256) * weight_type_traits(t)->type_size;
    const std::vector<uint8_t> w = random_blocks(t, rows, k, (uint32_t)(5 * k + (int)t));
    std::mt19937 rng((uint32_t)k + 1);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x((size_t)(m * k));
    for (size_t e = 0; e < x.size(); ++e) x[e] = nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f) * (e / k == 3 ? 0.f : 1.f);
    const size_t ab = kq_act_bytes(k);
    std::vector<uint8_t> act((size_t)m * ab);
    for (int64_t i = 0; i < m; ++i) kq_pack_act(x.data() + i * k, k, act.data() + (size_t)i * ab);
    std::vector<float> y0((size_t)(m * rows));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t r = 0; r < rows; ++r) {
        y0[(size_t)(i * rows + r)] = kq_x16_dot_ref(t, w.data() + r * row_bytes, act.data() + (size_t)i * ab, k);
      }
    }
    if (!x16_own_order(t)) {  // the reference is the scalar storage kernel's result
      std::vector<float> ys((size_t)(m * rows));
      ScopedIsa scalar(Isa::kScalar);
      matmul(WeightView{t, w.data(), rows, k, row_bytes}, x.data(), m, k, ys.data(), rows, nullptr);
      ASSERT_EQ(std::memcmp(ys.data(), y0.data(), ys.size() * 4), 0) << format::ggml_type_name(t);
    }
    AlignedBuffer<uint8_t> packed(w.size());  // 64-byte aligned, as PackedWeights' copy (aligned loads)
    x16_kernel(t).repack(w.data(), row_bytes, rows, k, packed.data());
    GemmArgs g;
    g.w = packed.data();
    g.w_stride = row_bytes;
    g.a_stride = ab;
    g.k = k;
    g.ldy = rows;
    for (const auto& [isa, fn] : fns) {
      const std::string name = isa_name(isa);
      ASSERT_NE(fn, nullptr) << name;
      const MatmulKernel* kern = matmul_kernel(t, isa);
      ASSERT_EQ(kern->act_bytes(k), ab) << name;
      std::vector<uint8_t> isa_act((size_t)m * ab);
      for (int64_t i = 0; i < m; ++i) kern->pack_act(x.data() + i * k, k, isa_act.data() + (size_t)i * ab);
      g.a = isa_act.data();
      const std::pair<int64_t, int64_t> row_ranges[] = {{0, rows}, {16, rows - 16}, {48, 112}, {0, 16}};
      for (const auto& [r0, r1] : row_ranges) {
        for (int64_t i0 : {0, 1, 5}) {
          for (int64_t i1 = i0 + 1; i1 <= m; ++i1) {
            if (r1 - r0 < rows && i1 - i0 > 2) continue;  // the GEMV's ranges; the GEMM's tiles are per group
            std::vector<float> y((size_t)(m * rows), -7.f);
            g.y = y.data();
            fn(g, r0, r1, i0, i1);
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t r = 0; r < rows; ++r) {
                const bool in = i >= i0 && i < i1 && r >= r0 && r < r1;
                const float want = in ? y0[(size_t)(i * rows + r)] : -7.f;
                ASSERT_EQ(std::memcmp(&y[(size_t)(i * rows + r)], &want, 4), 0)
                    << format::ggml_type_name(t) << " " << name << " k=" << k << " i=[" << i0 << "," << i1
                    << ") rows=[" << r0 << "," << r1 << ") row " << r << " act " << i;
              }
            }
          }
        }
      }
    }
  }
}

TEST(KQuantX16, Q4KGemmIsBitIdenticalOnRandomBlocks) { check_gemm_bit_identical(GgmlType::Q4_K); }

// The AMX Q4_K GEMM (Isa::kAmx; matmul_kquant_x16_q4_amx.cpp) and its tile
// path alone (which it runs from 32 activation rows) called directly, and
// the level through matmul (1 and 2 threads), for m around the tile height
// (16; tiles of fewer rows below it), its tails (tiles overlapping the one
// before), the threshold and the activation block (128 rows: 129 and 150 take
// a short remainder into the last block), k of one super-block and of
// several, odd group counts: the bits of the AVX-512 VNNI x16 kernel and of
// kq_x16_dot_ref.
TEST(KQuantX16, Q4KAmxGemmIsBitIdenticalToVnni) {
  if (!has_isa(Isa::kAmx)) GTEST_SKIP() << "no AMX level on this CPU (or the tile permission was refused)";
  const GemmFn vnni = kq_x16_gemm_avx512(GgmlType::Q4_K, true);
  ASSERT_NE(kq_x16_gemm_amx(GgmlType::Q4_K), nullptr);
  ASSERT_NE(kq_x16_gemm_amx_tiles(), nullptr);
  ThreadPool pool(2);
  const int64_t mmax = 150;
  for (int64_t k : {256, 768}) {
    for (int64_t groups : {1, 3}) {
      const int64_t rows = groups * kX16Rows;
      const size_t row_bytes = (size_t)(k / 256) * sizeof(q::block_q4_K);
      const std::vector<uint8_t> w = random_blocks(GgmlType::Q4_K, rows, k, (uint32_t)(7 * k + rows));
      std::mt19937 rng((uint32_t)(k + rows));
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> x((size_t)(mmax * k));
      for (size_t e = 0; e < x.size(); ++e) {
        const int64_t i = (int64_t)e / k;
        x[e] = i % 5 == 3 ? (rng() % 2 ? 1.f : -1.f) : nd(rng) * (rng() % 16 == 0 ? 8.f : 1.f);
      }
      const std::vector<float> y0 = x16_reference(GgmlType::Q4_K, w, rows, x, mmax, k);
      const size_t ab = kq_act_bytes(k);
      std::vector<uint8_t> act((size_t)mmax * ab);
      for (int64_t i = 0; i < mmax; ++i) kq_pack_act(x.data() + i * k, k, act.data() + (size_t)i * ab);
      AlignedBuffer<uint8_t> packed(w.size());
      x16_kernel(GgmlType::Q4_K).repack(w.data(), row_bytes, rows, k, packed.data());
      GemmArgs g;
      g.w = packed.data();
      g.w_stride = row_bytes;
      g.a_stride = ab;
      g.k = k;
      g.ldy = rows;
      for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 127, 128, 129, 150}) {
        for (int64_t i0 : {0, 1}) {
          if (i0 + m > mmax) continue;
          g.a = act.data();
          std::vector<float> yv((size_t)(mmax * rows), -7.f);
          g.y = yv.data();
          vnni(g, 0, rows, i0, i0 + m);
          for (const GemmFn amx : {kq_x16_gemm_amx(GgmlType::Q4_K), kq_x16_gemm_amx_tiles()}) {
            const char* which = amx == kq_x16_gemm_amx_tiles() ? "tiles" : "level";
            std::vector<float> ya((size_t)(mmax * rows), -7.f);
            g.y = ya.data();
            amx(g, 0, rows, i0, i0 + m);
            ASSERT_EQ(std::memcmp(ya.data(), yv.data(), ya.size() * 4), 0)
                << which << " k=" << k << " rows=" << rows << " m=" << m << " i0=" << i0;
            for (int64_t i = i0; i < i0 + m; ++i)
              ASSERT_EQ(std::memcmp(ya.data() + i * rows, y0.data() + i * rows, (size_t)rows * 4), 0)
                  << which << " k=" << k << " rows=" << rows << " m=" << m << " act " << i;
          }
        }
      }
      // through matmul at the amx level, packed, 1 and 2 threads
      ScopedIsa scoped(Isa::kAmx);
      std::vector<uint8_t> copy = w;
      WeightView wp{GgmlType::Q4_K, copy.data(), rows, k, row_bytes};
      PackedWeights packs;
      ASSERT_TRUE(packs.pack(wp));
      ASSERT_STREQ(wp.packed_kernel->name, "gemm_q4_K_q8_K_amx");
      for (int64_t m : {8, 33, 40, 150}) {
        for (ThreadPool* p : {(ThreadPool*)nullptr, &pool}) {
          std::vector<float> y((size_t)(m * rows), -1.f);
          matmul(wp, x.data(), m, k, y.data(), rows, p);
          ASSERT_EQ(std::memcmp(y.data(), y0.data(), y.size() * 4), 0)
              << "matmul k=" << k << " rows=" << rows << " m=" << m << (p ? " 2 threads" : " 1 thread");
        }
      }
    }
  }
}
TEST(KQuantX16, Q5KGemmIsBitIdenticalOnRandomBlocks) { check_gemm_bit_identical(GgmlType::Q5_K); }
TEST(KQuantX16, Q6KGemmIsBitIdenticalOnRandomBlocks) { check_gemm_bit_identical(GgmlType::Q6_K); }
TEST(KQuantX16, Q2KGemmIsBitIdenticalOnRandomBlocks) { check_gemm_bit_identical(GgmlType::Q2_K); }
TEST(KQuantX16, Q3KGemmIsBitIdenticalOnRandomBlocks) { check_gemm_bit_identical(GgmlType::Q3_K); }
TEST(KQuantX16, Iq4xsGemmIsBitIdenticalOnRandomBlocks) { check_gemm_bit_identical(GgmlType::IQ4_XS); }

// Every ISA that packs `t` as x16: a packed copy of w (rows x k), through
// matmul at every m in 1..m with 1 and 2 threads, gives y0's bits (y0: m x
// rows, the reference). *x16_isas counts those ISAs.
void expect_x16_bits(GgmlType t, const std::vector<uint8_t>& w, int64_t rows, int64_t k, size_t row_bytes,
                     const std::vector<float>& x, int64_t m, const std::vector<float>& y0, int* x16_isas) {
  ThreadPool pool(2);
  for (Isa isa : available_isas()) {
    ScopedIsa scoped(isa);
    const MatmulKernel* kern = matmul_kernel(t, isa);
    if (kern->repack_rows != kX16Rows) continue;
    std::vector<uint8_t> copy = w;
    WeightView wp{t, copy.data(), rows, k, row_bytes};
    PackedWeights packs;
    ASSERT_TRUE(packs.pack(wp)) << kern->name;
    ++*x16_isas;
    for (int64_t mm = 1; mm <= m; ++mm) {
      for (ThreadPool* p : {(ThreadPool*)nullptr, &pool}) {
        std::vector<float> y((size_t)(mm * rows), -1.f);
        matmul(wp, x.data(), mm, k, y.data(), rows, p);
        ASSERT_EQ(std::memcmp(y.data(), y0.data(), y.size() * 4), 0)
            << kern->name << " " << format::ggml_type_name(t) << " m=" << mm;
      }
    }
  }
}

// Q4_K / Q5_K x16 GEMV and GEMM tiles sum several vpmaddubsw products in
// int16 before widening (AVX2: 8 of Q4_K's, 4 of Q5_K's). At the largest levels (Q4_K 15,
// Q5_K 31), the largest scales and mins (63) and activations at the Q8_K
// extremes (every element of a row -127, or 127) the sums reach 30480 and
// 31496; one more product per sum would wrap.
// Every m (each GEMM tile height and tails) must still give kq_x16_dot_ref's bits.
TEST(KQuantX16, Q4KQ5KGemmExactAtTheInt16Bounds) {
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K}) {
    const int64_t k = 512, rows = 32, m = 9;
    const size_t bb = weight_type_traits(t)->type_size, row_bytes = (size_t)(k / 256) * bb;
    std::vector<uint8_t> w((size_t)rows * row_bytes, 0xFF);  // levels, scales and mins all at their maximum
    for (size_t b = 0; b < w.size() / bb; ++b) {
      const uint16_t d = f32_to_f16(1.f / 64.f), dmin = f32_to_f16(1.f / 128.f);
      std::memcpy(w.data() + b * bb, &d, 2);
      std::memcpy(w.data() + b * bb + 2, &dmin, 2);
    }
    std::vector<float> x((size_t)(m * k));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t e = 0; e < k; ++e) x[(size_t)(i * k + e)] = i % 3 == 1 ? 1.f : -1.f;
    const std::vector<float> y0 = x16_reference(t, w, rows, x, m, k);
    {  // the rows quantize to the extreme level (block_q8_K: f32 d, then the codes)
      std::vector<uint8_t> a(kq_act_bytes(k));
      kq_pack_act(x.data(), k, a.data());
      ASSERT_EQ(std::abs((int8_t)a[4]), 127);
    }
    int x16_isas = 0;
    ASSERT_NO_FATAL_FAILURE(expect_x16_bits(t, w, rows, k, row_bytes, x, m, y0, &x16_isas));
    if (x16_isas == 0) GTEST_SKIP() << "no ISA packs " << format::ggml_type_name(t) << " as x16 on this CPU";
  }
}

// Q6_K x16 kernels at their integer bounds: every level 63 (AVX2 and plain
// AVX-512 add two vpmaddubsw pairs in int16: 2 * 2 * 63 * 127 = 32004), the
// extreme scales -128 and 127 (rows alternate; the per-group int32 products
// of VNNI and the exact S of a super-block at their largest), activations at
// the Q8_K extremes (rows of all -1, all 1, and mixed signs). Every m (GEMV and
// each GEMM tile height), 1 and 2 threads, must give kq_x16_dot_ref's bits
// on every ISA that packs Q6_K as x16; the reference itself must match an
// int64 computation of S (no int32 overflow in it either).
TEST(KQuantX16, Q6KExactAtTheIntegerBounds) {
  const int64_t k = 512, rows = 5 * kX16Rows, m = 10, nsb = k / 256;
  const size_t bb = sizeof(q::block_q6_K), row_bytes = (size_t)nsb * bb;
  std::vector<uint8_t> w((size_t)rows * row_bytes, 0xFF);  // ql / qh all ones: levels 63
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t sb = 0; sb < nsb; ++sb) {
      uint8_t* b = w.data() + (size_t)r * row_bytes + (size_t)sb * bb;
      std::memset(b + offsetof(q::block_q6_K, scales), r % 2 ? 0x7F : 0x80, 16);
      const uint16_t d = f32_to_f16(std::ldexp(1.f, -(int)(r % 7) - 8));
      std::memcpy(b + offsetof(q::block_q6_K, d), &d, 2);
    }
  }
  std::vector<float> x((size_t)(m * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t e = 0; e < k; ++e)
      x[(size_t)(i * k + e)] = i % 3 == 0 ? -1.f : i % 3 == 1 ? 1.f : ((e / 3) % 2 ? 1.f : -1.f);
  const std::vector<float> y0 = x16_reference(GgmlType::Q6_K, w, rows, x, m, k);
  {  // the activations quantize to the extreme levels; weight row 0 (scales
     // -128, d 2^-8) x activation row 0 by an int64 S: the reference's bits
    std::vector<uint8_t> a(kq_act_bytes(k));
    kq_pack_act(x.data(), k, a.data());
    ASSERT_EQ(std::abs((int8_t)a[4]), 127);
    float want = 0.f;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      q::block_q8_K ab;
      std::memcpy(&ab, a.data() + (size_t)sb * sizeof ab, sizeof ab);
      int64_t S = 0;
      for (int e = 0; e < 256; ++e) S += -128 * (int64_t)(63 - 32) * ab.qs[e];
      ASSERT_GT(std::abs(S), (int64_t)1 << 20);
      want = std::fma(ab.d * std::ldexp(1.f, -8), (float)S, want);
    }
    ASSERT_EQ(std::memcmp(&want, &y0[0], 4), 0) << want << " vs " << y0[0];
  }
  for (size_t e = 0; e < y0.size(); ++e) ASSERT_NE(y0[e], 0.f) << "output " << e;
  int x16_isas = 0;
  ASSERT_NO_FATAL_FAILURE(expect_x16_bits(GgmlType::Q6_K, w, rows, k, row_bytes, x, m, y0, &x16_isas));
  if (x16_isas == 0) GTEST_SKIP() << "no ISA packs Q6_K as x16 on this CPU";
}

// IQ4_XS x16 kernels at the int16 bound of their vpmaddubsw pairs: the
// largest |codebook| entry (index 0: -127) against activations at the Q8_K
// extremes (every element of a row -1 or 1, signs mixed -> 127 / -127) gives pairs of
// 2 * 127 * 127 = 32258, scaled by the extreme sub-block scales (ls = 0 and
// 63: -32 and 31); rows alternate with index 15 (113) and mixed indices.
// Rows = 5 groups: with one thread a multi-stream GEMV step and a leftover
// group; every m (GEMV and each GEMM tile height) and 1 and 2 threads must
// give the scalar storage kernel's bits on every ISA that packs IQ4_XS as x16.
TEST(KQuantX16, Iq4xsExactAtTheInt16Bounds) {
  const int64_t k = 512, rows = 5 * kX16Rows, m = 9, nsb = k / 256;
  const size_t bb = sizeof(q::block_iq4_xs), row_bytes = (size_t)nsb * bb;
  std::vector<uint8_t> w((size_t)rows * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t sb = 0; sb < nsb; ++sb) {
      q::block_iq4_xs b;
      b.d = f32_to_f16(std::ldexp(1.f, -(int)(r % 5) - 4));
      // ls = 0 (scales_l 0, scales_h 0) or 63 in every sub-block, by row and super-block
      const bool big = (r + sb) % 2 == 0;
      b.scales_h = big ? 0xFFFF : 0;
      std::memset(b.scales_l, big ? 0xFF : 0, 4);
      const uint8_t idx = r % 3 == 0 ? 0x00 : r % 3 == 1 ? 0xFF : (uint8_t)(0x0F + 16 * (sb % 2));
      std::memset(b.qs, idx, sizeof(b.qs));
      std::memcpy(w.data() + (size_t)r * row_bytes + (size_t)sb * bb, &b, bb);
    }
  }
  std::vector<float> x((size_t)(m * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t e = 0; e < k; ++e) x[(size_t)(i * k + e)] = (e % 7 < 3) != (i % 2 == 1) ? 1.f : -1.f;
  {  // the activations quantize to the extreme levels
    std::vector<uint8_t> a(kq_act_bytes(k));
    kq_pack_act(x.data(), k, a.data());
    ASSERT_EQ(std::abs((int8_t)a[4]), 127);
  }
  const WeightView ws{GgmlType::IQ4_XS, w.data(), rows, k, row_bytes};
  std::vector<float> y0((size_t)(m * rows));
  {
    ScopedIsa scalar(Isa::kScalar);
    matmul(ws, x.data(), m, k, y0.data(), rows, nullptr);
  }
  // no output cancels to zero (a kernel that read another group's rows or
  // dropped a lane would not give these bits by accident)
  for (size_t e = 0; e < y0.size(); ++e) ASSERT_NE(y0[e], 0.f) << "output " << e;
  int x16_isas = 0;
  ASSERT_NO_FATAL_FAILURE(expect_x16_bits(GgmlType::IQ4_XS, w, rows, k, row_bytes, x, m, y0, &x16_isas));
  if (x16_isas == 0) GTEST_SKIP() << "no ISA packs IQ4_XS as x16 on this CPU";
}

// IQ4_XS layout of matmul_kquant_x16.h against the storage fields (d, the
// 6-bit sub-block scales, the codebook index of every element), independently
// of the unpacker; AVX2 installs it (AVX-512 keeps the storage layout).
TEST(KQuantX16, Iq4xsLayoutMatchesHeader) {
  const int64_t k = 512, nsb = 2, rows = 32;
  const std::vector<uint8_t> w = random_blocks(GgmlType::IQ4_XS, rows, k, 11);
  const size_t bb = sizeof(q::block_iq4_xs);
  std::vector<uint8_t> packed((size_t)rows * nsb * bb);
  x16_kernel(GgmlType::IQ4_XS).repack(w.data(), nsb * bb, rows, k, packed.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t sb = 0; sb < nsb; ++sb) {
      q::block_iq4_xs src;
      std::memcpy(&src, w.data() + (size_t)(r * nsb + sb) * bb, bb);
      const int rr = (int)(r % kX16Rows);
      const uint8_t* gb = packed.data() + (size_t)((r / kX16Rows) * nsb + sb) * kX16Rows * bb;
      uint16_t d, sh;
      std::memcpy(&d, gb + 2 * rr, 2);
      std::memcpy(&sh, gb + 32 + 2 * rr, 2);
      ASSERT_EQ(d, src.d);
      const uint8_t* sl = gb + 64 + 4 * rr;
      for (int j = 0; j < 8; ++j) {
        const int ls = ((sl[j / 2] >> (4 * (j % 2))) & 0xF) | (((sh >> (2 * j)) & 3) << 4);
        ASSERT_EQ(ls, q::iq4_xs_scale(src, j)) << "r " << r << " sb " << sb << " j " << j;
        for (int l = 0; l < 8; ++l) {
          for (int u = 0; u < 4; ++u) {
            // element 32j + 4l + u: lane l of sub-block j
            const int e = 4 * l + u;
            const uint8_t byte = gb[128 + 64 * (4 * j + l % 4) + 4 * rr + u];
            const int idx = l < 4 ? byte & 0xF : byte >> 4;
            const int want = e < 16 ? src.qs[16 * j + e] & 0xF : src.qs[16 * j + e - 16] >> 4;
            ASSERT_EQ(idx, want) << "r " << r << " sb " << sb << " j " << j << " l " << l << " u " << u;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace chimera::kernels
