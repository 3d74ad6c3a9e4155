// Read-bandwidth probe. Each thread reads its own contiguous slice as
// kStreams interleaved sub-streams (the slice cut into kStreams parts read in
// lockstep, one cache line of each per step, with a software prefetch
// kAhead bytes ahead in each): one sequential stream per core keeps too few
// misses in flight to reach the memory's bandwidth. On a 2-vCPU Sapphire
// Rapids VM one stream per thread read 15 GB/s, 4 streams 27, 8 streams 30,
// 8 streams with the prefetch 31-33 — and decode GEMVs themselves had read
// above the one-stream figure, which is why it was replaced (session 10).
// The buffer is written first so every page is resident.
#include "core/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "core/memory.h"
#include "core/timer.h"

namespace chimera {
namespace {

constexpr int kStreams = 8;
constexpr size_t kLine = 64;
constexpr size_t kAhead = 512;
// Two 16-byte lanes of 64-bit sums (GCC/Clang vector extension: SSE2 / NEON).
typedef uint64_t V2 __attribute__((vector_size(16)));

V2 load2(const uint8_t* p) {
  V2 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Sums bytes [b, e) of buf (whole cache lines) as kStreams interleaved streams.
uint64_t read_streams(const uint8_t* buf, size_t b, size_t e) {
  const size_t lines = (e - b) / kLine;
  const size_t per = lines / kStreams;  // lines per stream
  V2 acc[kStreams] = {};
  for (size_t i = 0; i < per; ++i) {
    for (int s = 0; s < kStreams; ++s) {
      const uint8_t* p = buf + b + ((size_t)s * per + i) * kLine;
      __builtin_prefetch(p + kAhead);
      acc[s] += (load2(p) + load2(p + 16)) + (load2(p + 32) + load2(p + 48));
    }
  }
  V2 t = {0, 0};
  for (int s = 0; s < kStreams; ++s) t += acc[s];
  uint64_t sum = t[0] + t[1];
  // The lines the streams did not cover (fewer than kStreams + 1 lines).
  for (size_t off = b + per * kStreams * kLine; off + sizeof(uint64_t) <= e; off += sizeof(uint64_t)) {
    uint64_t v;
    std::memcpy(&v, buf + off, sizeof v);
    sum += v;
  }
  return sum;
}

}  // namespace

BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  const size_t n = bytes / sizeof(uint64_t);
  AlignedBuffer<uint64_t> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = i;
  const uint8_t* base = reinterpret_cast<const uint8_t*>(buf.data());
  const size_t total = n * sizeof(uint64_t);
  const int threads = std::max(1, pool.size());
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    Stopwatch sw;
    // One contiguous slice per thread (whole lines), so each thread's streams
    // are long runs the prefetchers can follow.
    pool.parallel_for(threads, [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) {
        const size_t b = total * (size_t)t / (size_t)threads / kLine * kLine;
        const size_t e = t + 1 == threads ? total : total * (size_t)(t + 1) / (size_t)threads / kLine * kLine;
        sink += read_streams(base, b, e);
      }
    }, 1);
    const double s = sw.elapsed();
    if (s > 0) best = std::max(best, (double)total / s / 1e9);
  }
  BandwidthResult res;
  res.read_gbs = best;
  res.bytes = total;
  if (sink.load() == 42) res.bytes += 0;  // keep the sums observable
  return res;
}

}  // namespace chimera
