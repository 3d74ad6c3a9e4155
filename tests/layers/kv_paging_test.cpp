// Paged KvCache (layers/state.h): a fresh state allocates no KV block; bytes
// grow by one block (KvCache::kBlockRows positions) when a store first reaches
// it; truncate / reset / copy_from release what they drop; rows read back
// back across block boundaries whatever the store chunking; the per-sequence bytes of a Llama-3.2-1B
// shaped state at 4K and 32K tokens for each cache type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "layers/state.h"

namespace chimera::layers {
namespace {

using kernels::KvType;
constexpr int64_t B = KvCache::kBlockRows;

// Llama-3.2-1B: 16 layers, 8 KV heads of 64.
std::vector<LayerStateSpec> llama_1b_specs() { return std::vector<LayerStateSpec>(16, KvSpec{512, 512, 64, 64}); }

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> x((size_t)n);
  for (int64_t i = 0; i < n; ++i) x[(size_t)i] = std::sin(0.01f * (float)i) * scale;
  return x;
}

TEST(KvPaging, FreshStateAllocatesNothing) {
  const size_t live = KvCache::live_bytes();
  SequenceState st(llama_1b_specs(), 32768, {KvType::kF16, KvType::kF16});
  EXPECT_EQ(st.bytes(), 0u);
  EXPECT_EQ(KvCache::live_bytes(), live);
  for (size_t l = 0; l < st.n_layers(); ++l) EXPECT_EQ(st.kv(l)->n_blocks(), 0);
  EXPECT_EQ(st.bytes(true), 16u * 32768 * 2 * 1024);  // what a full context would take
}

TEST(KvPaging, BytesGrowByABlockAtEachBoundary) {
  const size_t live = KvCache::live_bytes();
  KvCache kv(KvSpec{512, 512, 64, 64}, 32768, {KvType::kF16, KvType::kF16});
  const size_t block = (size_t)B * kv.row_bytes();
  EXPECT_EQ(block, 64u * 2048);
  const auto k = ramp(512, 1.f), v = ramp(512, 2.f);
  for (int64_t p = 0; p < 3 * B + 5; ++p) {
    kv.store(p, 1, k.data(), 0, v.data(), 0);
    const size_t want = (size_t)(p / B + 1) * block;
    ASSERT_EQ(kv.bytes(), want) << "after position " << p;
    ASSERT_EQ(KvCache::live_bytes() - live, want) << "after position " << p;
    ASSERT_EQ(kv.n_blocks(), p / B + 1);
  }
  kv.truncate(2 * B + 1);  // keeps the block of row 2B
  EXPECT_EQ(kv.bytes(), 3 * block);
  kv.truncate(2 * B);
  EXPECT_EQ(kv.bytes(), 2 * block);
  kv.truncate(1);
  EXPECT_EQ(kv.bytes(), block);
  EXPECT_EQ(KvCache::live_bytes() - live, block);
  kv.truncate(0);
  EXPECT_EQ(kv.bytes(), 0u);
  EXPECT_EQ(KvCache::live_bytes(), live);
}

TEST(KvPaging, StateBytesAt4KAnd32K) {
  struct Want {
    KvType t;
    size_t per_token;  // 16 layers x (K + V row)
  };
  for (const Want& w : {Want{KvType::kF32, 16 * 2 * 2048}, Want{KvType::kF16, 16 * 2 * 1024},
                        Want{KvType::kQ8_0, 16 * 2 * 16 * 34}}) {
    SCOPED_TRACE(kernels::kv_type_name(w.t));
    SequenceState st(llama_1b_specs(), 32768, {w.t, w.t});
    EXPECT_EQ(st.bytes_at(4096), 4096 * w.per_token);
    EXPECT_EQ(st.bytes_at(32768), 32768 * w.per_token);
    EXPECT_EQ(st.bytes_at(1), (size_t)B * w.per_token);  // the first block
    EXPECT_EQ(st.bytes_at(B + 1), (size_t)(2 * B) * w.per_token);
    EXPECT_EQ(st.bytes(true), st.bytes_at(32768));
  }
  // f16: 128 MiB at 4K, 1 GiB at 32K (f32 twice that, Q8_0 68 and 544 MiB).
  SequenceState f16(llama_1b_specs(), 32768, {KvType::kF16, KvType::kF16});
  EXPECT_EQ(f16.bytes_at(4096), 128u << 20);
  EXPECT_EQ(f16.bytes_at(32768), 1u << 30);
}

// bytes_at(n) is what storing n positions allocates, the short last block of
// a context included; recurrent layers count in full from the start.
TEST(KvPaging, BytesAtMatchesWhatStoresAllocate) {
  const std::vector<LayerStateSpec> specs = {KvSpec{64, 32, 32, 32}, RecurrentSpec{10, 3, 40}, KvSpec{64, 32, 32, 32}};
  for (KvType t : {KvType::kF32, KvType::kF16, KvType::kQ8_0}) {
    SCOPED_TRACE(kernels::kv_type_name(t));
    SequenceState st(specs, 300, {t, t});
    EXPECT_EQ(st.bytes(), st.bytes_at(0));
    const auto k = ramp(64 * 300, 1.f), v = ramp(32 * 300, 1.f);
    for (int64_t n : {1, 63, 64, 65, 200, 256, 257, 300}) {
      st.reset();
      for (size_t l : {size_t{0}, size_t{2}}) st.kv(l)->store(0, n, k.data(), 64, v.data(), 32);
      st.advance(n);
      ASSERT_EQ(st.bytes(), st.bytes_at(n)) << n;
    }
    EXPECT_EQ(st.bytes(), st.bytes(true));  // 300 of 300 positions: the last block has 300 - 256 rows
    st.reset();
    EXPECT_EQ(st.bytes(), st.bytes_at(0));
  }
}

TEST(KvPaging, RowsReadBackAcrossBlocks) {
  for (KvType t : {KvType::kF32, KvType::kF16, KvType::kQ8_0}) {
    SCOPED_TRACE(kernels::kv_type_name(t));
    const int64_t n = 3 * B + 7;
    KvCache paged(KvSpec{64, 32, 32, 32}, 1000, {t, t});
    KvCache whole(KvSpec{64, 32, 32, 32}, 1000, {t, t});  // the same rows stored in one call
    const auto k = ramp(64 * n, 3.f), v = ramp(32 * n, 0.5f);
    // Odd chunk sizes so stores start and end inside blocks.
    for (int64_t p = 0, c = 1; p < n; p += c, c = c * 3 % 37 + 1) {
      const int64_t m = std::min(c, n - p);
      paged.store(p, m, k.data() + p * 64, 64, v.data() + p * 32, 32);
    }
    whole.store(0, n, k.data(), 64, v.data(), 32);
    EXPECT_EQ(paged.n_blocks(), 4);
    EXPECT_EQ(whole.n_blocks(), 4);
    std::vector<float> a(64 * n), b(64 * n);
    paged.load_k(0, n, a.data());
    whole.load_k(0, n, b.data());
    EXPECT_EQ(a, b);
    if (t == KvType::kF32) {
      EXPECT_EQ(a, k);
    }
    paged.load_v(5, n - 5, a.data());
    whole.load_v(5, n - 5, b.data());
    EXPECT_TRUE(std::equal(a.begin(), a.begin() + 32 * (n - 5), b.begin()));
    if (t == KvType::kF32) {
      for (int64_t p = 0; p < n; ++p) {
        ASSERT_EQ(paged.k_row(p)[3], k[(size_t)(p * 64 + 3)]) << p;
        ASSERT_EQ(paged.v_row(p)[31], v[(size_t)(p * 32 + 31)]) << p;
      }
    }
    // The block table the kernels read: rows of block b at blocks[b].
    const kernels::KvRows rows = paged.k_rows();
    EXPECT_EQ(rows.block_rows, B);
    EXPECT_EQ(rows.data, nullptr);
    ASSERT_NE(rows.blocks, nullptr);
  }
}

// A copy holds the source's rows and is independent of later writes to
// either; copy_from and reset release what the destination held before. A
// copy shares the source's blocks: the process's KV bytes do not grow until
// one of them writes a shared block, which copies that block only.
TEST(KvPaging, CopiesAreIndependent) {
  const size_t live = KvCache::live_bytes();
  const std::vector<LayerStateSpec> specs = {KvSpec{8, 8}};
  SequenceState a(specs, 500), b(specs, 500);
  const auto k = ramp(8 * 500, 1.f), v = ramp(8 * 500, 2.f);
  a.kv(0)->store(0, 100, k.data(), 8, v.data(), 8);
  a.advance(100);
  b.kv(0)->store(0, 300, k.data(), 8, v.data(), 8);
  b.advance(300);
  const size_t block = (size_t)B * a.kv(0)->row_bytes();
  EXPECT_EQ(KvCache::live_bytes() - live, 2 * block + 5 * block);
  ASSERT_TRUE(b.copy_from(a).is_ok());
  EXPECT_EQ(b.bytes(), a.bytes());
  EXPECT_EQ(b.n_past(), 100);
  EXPECT_EQ(KvCache::live_bytes() - live, 2 * block) << "b's own blocks are released, a's shared";
  const float mark[8] = {9, 9, 9, 9, 9, 9, 9, 9};
  a.kv(0)->store(99, 1, mark, 8, mark, 8);   // inside the last block of both: a copies it
  EXPECT_EQ(KvCache::live_bytes() - live, 3 * block);
  b.kv(0)->store(100, 1, mark, 8, mark, 8);  // b now holds block 1 alone: written in place
  EXPECT_EQ(KvCache::live_bytes() - live, 3 * block);
  EXPECT_EQ(b.kv(0)->k_row(99)[0], k[99 * 8]);
  EXPECT_EQ(a.kv(0)->k_row(99)[0], 9.f);
  EXPECT_EQ(a.kv(0)->k_row(98)[7], b.kv(0)->k_row(98)[7]);
  auto snap = a.snapshot();
  EXPECT_EQ(KvCache::live_bytes() - live, 3 * block);
  a.reset();
  EXPECT_EQ(a.bytes(), 0u);
  EXPECT_EQ(snap->kv(0)->k_row(99)[0], 9.f);
  snap.reset();
  b.reset();
  EXPECT_EQ(KvCache::live_bytes(), live);
}

}  // namespace
}  // namespace chimera::layers
