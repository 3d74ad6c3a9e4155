// Read-bandwidth probe. Each thread sums its own contiguous slice with eight
// independent accumulators (the compiler vectorises the loop); the buffer is
// written first so every page is resident.
#include "core/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "core/memory.h"
#include "core/timer.h"

namespace chimera {

BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  const size_t n = bytes / sizeof(uint64_t);
  AlignedBuffer<uint64_t> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = i;
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    Stopwatch sw;
    pool.parallel_for((int64_t)n, [&](int64_t b, int64_t e, int) {
      const uint64_t* p = buf.data();
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
      int64_t i = b;
      for (; i + 8 <= e; i += 8) {
        a0 += p[i]; a1 += p[i + 1]; a2 += p[i + 2]; a3 += p[i + 3];
        a4 += p[i + 4]; a5 += p[i + 5]; a6 += p[i + 6]; a7 += p[i + 7];
      }
      for (; i < e; ++i) a0 += p[i];
      sink += a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    }, 4096);
    const double t = sw.elapsed();
    if (t > 0) best = std::max(best, (double)(n * sizeof(uint64_t)) / t / 1e9);
  }
  BandwidthResult res;
  res.read_gbs = best;
  res.bytes = n * sizeof(uint64_t);
  if (sink.load() == 42) res.bytes += 0;  // keep the sums observable
  return res;
}

}  // namespace chimera
