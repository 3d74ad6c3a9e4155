// The decode GEMVs' near prefetch (kernels/gemv_prefetch.h): it covers every
// byte of the block asked for and never a line at or past the given end.
#include "kernels/gemv_prefetch.h"

#include <gtest/gtest.h>

#include <cstdint>
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

}  // namespace
}  // namespace chimera::kernels
