// The load-time repacking plumbing: which gemm matmul binds for a view, and
// how sub-range views (expert slices) carry the packed copy. The packed
// kernels themselves are swept in their own tests.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/memory.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"
#include "kernels/type_traits.h"

namespace chimera::kernels {
namespace {

void gemm_a(const GemmArgs&, int64_t, int64_t, int64_t, int64_t) {}
void gemm_b(const GemmArgs&, int64_t, int64_t, int64_t, int64_t) {}

WeightView packed_view(const MatmulKernel* k, const uint8_t* data, const uint8_t* packed) {
  WeightView w;
  w.type = format::GgmlType::Q8_0;
  w.data = data;
  w.rows = 32;
  w.cols = 64;
  w.row_bytes = 68;
  w.packed = packed;
  w.packed_kernel = k;
  w.packed_row_bytes = 70;
  w.packed_rows = 32;
  return w;
}

TEST(Repack, BindWeightPicksPackedOnlyForItsKernel) {
  MatmulKernel k;
  k.gemm = gemm_a;
  k.gemm_packed = gemm_b;
  k.repack_rows = 8;
  MatmulKernel other = k;
  static uint8_t data[32 * 68], packed[32 * 70];
  const WeightView w = packed_view(&k, data, packed);

  GemmArgs g;
  EXPECT_EQ(bind_weight(w, &k, g), &gemm_b);
  EXPECT_EQ(g.w, packed);
  EXPECT_EQ(g.w_stride, 70u);
  EXPECT_EQ(g.k, 64);
  EXPECT_EQ(g.w_tail, data + 32 * 68);  // the tail follows the storage rows

  GemmArgs h;
  EXPECT_EQ(bind_weight(w, &other, h), &gemm_a);  // packed for another kernel (ISA)
  EXPECT_EQ(h.w, data);
  EXPECT_EQ(h.w_stride, 68u);

  WeightView plain = w;
  plain.packed = nullptr;
  EXPECT_EQ(bind_weight(plain, &k, h), &gemm_a);
}

TEST(Repack, RowsSliceKeepsPackedOnGroupBoundaries) {
  MatmulKernel k;
  k.gemm = gemm_a;
  k.gemm_packed = gemm_b;
  k.repack_rows = 8;
  static uint8_t data[32 * 68], packed[32 * 70];
  const WeightView w = packed_view(&k, data, packed);

  const WeightView s = w.rows_slice(16, 8);
  EXPECT_EQ(s.rows, 8);
  EXPECT_EQ(s.data, data + 16 * 68);
  EXPECT_EQ(s.packed, packed + 16 * 70);
  EXPECT_EQ(s.packed_kernel, &k);

  const WeightView odd = w.rows_slice(4, 8);  // not on a group boundary: storage layout only
  EXPECT_EQ(odd.data, data + 4 * 68);
  EXPECT_EQ(odd.packed, nullptr);
  GemmArgs g;
  EXPECT_EQ(bind_weight(odd, &k, g), &gemm_a);

  const WeightView part = w.rows_slice(8, 4);  // partial group
  EXPECT_EQ(part.packed, nullptr);

  const WeightView head = w.rows_slice(8, 20);  // two whole groups, then 4 rows in storage layout
  EXPECT_EQ(head.packed, packed + 8 * 70);
  EXPECT_EQ(head.packed_rows, 16);

  WeightView partly = w;  // the last group not packed (a row count off the group)
  partly.packed_rows = 24;
  EXPECT_EQ(partly.rows_slice(16, 16).packed_rows, 8);
  EXPECT_EQ(partly.rows_slice(24, 8).packed, nullptr);
  EXPECT_EQ(partly.rows_slice(24, 8).packed_rows, 0);
}

TEST(Repack, PackIsANoOpWithoutAPackingKernelOrWhenDisabled) {
  // F32 has no repacking kernel on any ISA: pack() leaves the view alone.
  static float data[16 * 8];
  WeightView w;
  w.type = format::GgmlType::F32;
  w.data = data;
  w.rows = 16;
  w.cols = 8;
  w.row_bytes = 8 * sizeof(float);
  PackedWeights packs;
  EXPECT_FALSE(packs.pack(w));
  EXPECT_EQ(w.packed, nullptr);
  EXPECT_EQ(packs.count(), 0u);

  setenv("CHIMERA_REPACK", "0", 1);
  EXPECT_FALSE(repack_enabled());
  unsetenv("CHIMERA_REPACK");
  EXPECT_TRUE(repack_enabled());
}

// Large tensors are repacked by several threads (row ranges of whole
// groups): the bytes must be those of one single-threaded repack call.
TEST(Repack, LargeTensorsRepackInParallelToTheSameBytes) {
  for (format::GgmlType t : {format::GgmlType::Q4_K, format::GgmlType::Q8_0, format::GgmlType::Q6_K}) {
    const MatmulKernel* k = matmul_kernel(t, active_isa());
    if (!k || !k->repack) continue;
    const WeightTypeTraits* tr = weight_type_traits(t);
    const int64_t rows = 2048, cols = 8192;  // >= 2 x 4 MiB: split over threads
    const size_t row_bytes = (size_t)(cols / tr->block_size) * tr->type_size;
    std::vector<uint8_t> src((size_t)rows * row_bytes);
    std::mt19937 rng(7);
    for (uint8_t& b : src) b = (uint8_t)rng();
    const size_t packed_row_bytes = k->repack_row_bytes(cols);
    std::vector<uint8_t> want((size_t)rows * packed_row_bytes);
    k->repack(src.data(), row_bytes, rows, cols, want.data());
    std::vector<uint8_t> copy = src;  // pack() releases the pages it read
    WeightView w{t, copy.data(), rows, cols, row_bytes};
    PackedWeights packs;
    ASSERT_TRUE(packs.pack(w)) << k->name;
    ASSERT_EQ(std::memcmp(w.packed, want.data(), want.size()), 0) << k->name;
  }
}

// A large storage-layout matrix (F16: no packed layout) is copied to
// huge-page memory where that is available: same bytes, same results.
TEST(Repack, LargeStorageLayoutMatricesMoveToHugePagesUnchanged) {
  const int64_t rows = 1024, cols = 4096;  // 8 MiB of F16
  const size_t row_bytes = (size_t)cols * 2;
  std::vector<uint8_t> src((size_t)rows * row_bytes);
  std::mt19937 rng(3);
  for (size_t i = 0; i < src.size(); i += 2) {
    const uint16_t h = (uint16_t)(0x3000 + rng() % 0x0C00) | (uint16_t)((rng() & 1) << 15);  // |x| in [2^-3, 1)
    std::memcpy(src.data() + i, &h, 2);
  }
  std::vector<float> x((size_t)cols), y0((size_t)rows), y1((size_t)rows);
  for (float& v : x) v = (float)(rng() % 200) / 100.f - 1.f;
  std::vector<uint8_t> copy = src;
  WeightView w{format::GgmlType::F16, copy.data(), rows, cols, row_bytes};
  matmul(w, x.data(), 1, cols, y0.data(), rows, nullptr);
  PackedWeights packs;
  EXPECT_FALSE(packs.pack(w));
  EXPECT_EQ(w.packed, nullptr);
  if (!huge_pages_available()) {
    EXPECT_EQ(w.data, copy.data());
    GTEST_SKIP() << "transparent huge pages unavailable: nothing to move";
  }
  ASSERT_NE(w.data, copy.data());
  EXPECT_EQ(packs.relocated_bytes(), src.size());
  ASSERT_EQ(std::memcmp(w.data, src.data(), src.size()), 0);
  matmul(w, x.data(), 1, cols, y1.data(), rows, nullptr);
  EXPECT_EQ(std::memcmp(y0.data(), y1.data(), y0.size() * 4), 0);
}

// Every kernel that declares repacking declares all of it.
TEST(Repack, KernelTablesDeclareCompleteRepacking) {
  for (Isa isa : available_isas()) {
    for (int t = 0; t < 64; ++t) {
      const MatmulKernel* k = matmul_kernel((format::GgmlType)t, isa);
      if (!k || !k->repack) continue;
      SCOPED_TRACE(std::string(k->name ? k->name : "?") + " " + isa_name(isa));
      EXPECT_NE(k->gemm_packed, nullptr);
      EXPECT_NE(k->repack_row_bytes, nullptr);
      EXPECT_GT(k->repack_rows, 0);
      EXPECT_LE(k->repack_rows, 16);
      EXPECT_EQ(16 % k->repack_rows, 0);
    }
  }
}

}  // namespace
}  // namespace chimera::kernels
