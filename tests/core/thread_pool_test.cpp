// Thread pool: ranges cover [0, n) exactly once, partitions are deterministic,
// and repeated jobs do not deadlock.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/thread_pool.h"

namespace chimera {
namespace {

TEST(ThreadPool, CoversRangeExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1001}) {
      for (int64_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits((size_t)n);
        pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
          EXPECT_LE(b, e);
          if (grain > 1 && e != n) {
            EXPECT_EQ((e - b) % grain, 0);
          }
          for (int64_t i = b; i < e; ++i) hits[(size_t)i]++;
        }, grain);
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[(size_t)i].load(), 1) << n << " " << i;
      }
    }
  }
}

TEST(ThreadPool, PartitionIsDeterministic) {
  ThreadPool pool(2);
  std::vector<std::pair<int64_t, int64_t>> a(2), b(2);
  pool.parallel_for(100, [&](int64_t s, int64_t e, int t) { a[(size_t)t] = {s, e}; });
  pool.parallel_for(100, [&](int64_t s, int64_t e, int t) { b[(size_t)t] = {s, e}; });
  EXPECT_EQ(a, b);
}

TEST(ThreadPool, ManyJobs) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int r = 0; r < 2000; ++r) pool.run_on_all([&](int t, int n) { sum += t + 1; });
  EXPECT_EQ(sum.load(), 2000 * 3);
}

}  // namespace
}  // namespace chimera
