// Memory-bandwidth probe: the read bandwidth the machine sustains with a given
// number of threads, measured by streaming over a buffer much larger than the
// caches. Used as the roofline that decode speed is reported against.
#pragma once

#include <cstddef>

#include "core/thread_pool.h"

namespace chimera {

struct BandwidthResult {
  double read_gbs = 0;   // best of the repetitions, 1e9 bytes/s
  size_t bytes = 0;      // buffer size
};

BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t bytes = (size_t)1 << 30, int reps = 5);

}  // namespace chimera
