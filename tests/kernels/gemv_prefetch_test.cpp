// The decode GEMVs' near prefetch (kernels/gemv_prefetch.h): it covers every
// byte of the block asked for and never a line at or past the given end.
#include "kernels/gemv_prefetch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace chimera::kernels {
namespace {

std::vector<uintptr_t> lines(uintptr_t p, size_t bytes, uintptr_t end) {
  std::vector<uintptr_t> v;
  for_each_prefetch_line(p, bytes, reinterpret_cast<const uint8_t*>(end), [&](uintptr_t a) { v.push_back(a); });
  return v;
}

TEST(GemvPrefetch, CoversTheBlockAndStopsAtTheEnd) {
  const uintptr_t base = 1u << 20;  // 64-byte aligned
  for (uintptr_t off : {0u, 1u, 32u, 48u, 63u, 64u, 100u}) {
    for (size_t bytes : {size_t{1}, size_t{64}, size_t{256}, size_t{1344}, size_t{3360}}) {
      for (uintptr_t end_off : {uintptr_t{0}, uintptr_t{1}, uintptr_t{50}, uintptr_t{640}, uintptr_t{1} << 16}) {
        const uintptr_t p = base + off, end = base + end_off;
        const std::vector<uintptr_t> v = lines(p, bytes, end);
        const uintptr_t stop = p + bytes < end ? p + bytes : end;
        // every byte of [p, stop) lies in a visited line, in order, once
        for (size_t i = 0; i < v.size(); ++i) {
          EXPECT_EQ(v[i] % 64, 0u);
          EXPECT_LT(v[i], end) << "a line at or past the end";
          if (i > 0) {
            EXPECT_EQ(v[i], v[i - 1] + 64);
          }
        }
        if (p < stop) {
          ASSERT_FALSE(v.empty()) << off << " " << bytes << " " << end_off;
          EXPECT_LE(v.front(), p);
          EXPECT_GT(v.back() + 64, stop - 1);
          EXPECT_GT(v.front() + 64, p);  // no line wholly before the block
        } else {
          EXPECT_TRUE(v.empty()) << "block at or past the end";
        }
      }
    }
  }
}

TEST(GemvPrefetch, BlockAheadIsClippedToTheEnd) {
  // Blocks of 2304 bytes (x16 Q4_K): 2 ahead of block 0 is [4608, 6912).
  const uintptr_t base = 1u << 20;
  std::vector<uintptr_t> v;
  const auto* b0 = reinterpret_cast<const uint8_t*>(base);
  for_each_prefetch_line(base + 2 * 2304, 2304, b0 + 3 * 2304, [&](uintptr_t a) { v.push_back(a); });
  ASSERT_EQ(v.size(), 36u);
  EXPECT_EQ(v.front(), base + 4608);
  v.clear();
  for_each_prefetch_line(base + 2 * 2304, 2304, b0 + 5000, [&](uintptr_t a) { v.push_back(a); });
  ASSERT_EQ(v.size(), 7u);  // lines at 4608 .. 4992
  EXPECT_EQ(v.back(), base + 4992);
  v.clear();
  for_each_prefetch_line(base + 2 * 2304, 2304, b0 + 2 * 2304, [&](uintptr_t a) { v.push_back(a); });
  EXPECT_TRUE(v.empty());
}

// The multi-stream walk: runs of kStreams whole groups, each with the next
// run's offset to prefetch only when that run is inside the call's rows, then
// the groups left over one by one; every group exactly once.
TEST(GemvPrefetch, StreamStepsCoverEveryGroupAndPrefetchOnlyTheCallsOwn) {
  constexpr size_t kGroupBytes = 1000;
  std::vector<std::pair<int64_t, size_t>> steps;
  std::vector<int64_t> ones;
  const auto walk = [&](int64_t r0, int64_t r1) {
    steps.clear();
    ones.clear();
    gemv_stream_steps<4, 16>(
        r0, r1, kGroupBytes, [&](int64_t r, size_t pf) { steps.emplace_back(r, pf); },
        [&](int64_t r) { ones.push_back(r); });
  };
  walk(0, 13 * 16);  // 13 groups: runs at 0 and 64 prefetch the next, the run at 128 not; group 192 alone
  EXPECT_EQ(steps, (std::vector<std::pair<int64_t, size_t>>{{0, 4000}, {64, 4000}, {128, 0}}));
  EXPECT_EQ(ones, (std::vector<int64_t>{192}));
  walk(32, 32 + 3 * 16);  // fewer groups than a run
  EXPECT_TRUE(steps.empty());
  EXPECT_EQ(ones, (std::vector<int64_t>{32, 48, 64}));
  walk(16, 16 + 8 * 16);  // exactly two runs
  EXPECT_EQ(steps, (std::vector<std::pair<int64_t, size_t>>{{16, 4000}, {80, 0}}));
  EXPECT_TRUE(ones.empty());
}

}  // namespace
}  // namespace chimera::kernels
