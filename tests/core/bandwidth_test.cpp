// The read-bandwidth probe (core/bandwidth.h): any buffer size (whole
// lines per stream or not) and thread count gives a positive figure over the
// bytes asked for; the sizes below exercise the tail the interleaved streams
// do not cover (an ASan build checks every read stays in the buffer).
#include <gtest/gtest.h>

#include "core/bandwidth.h"
#include "core/thread_pool.h"

namespace chimera {
namespace {

TEST(Bandwidth, AnySizeAndThreadCountReadsTheWholeBuffer) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (size_t bytes : {size_t{64}, size_t{4096} + 8, (size_t{1} << 20) + 520, (size_t{3} << 20) + 64 * 9 + 16}) {
      const BandwidthResult r = measure_read_bandwidth(pool, bytes, 2);
      EXPECT_EQ(r.bytes, bytes / 8 * 8) << bytes << " bytes, " << threads << " threads";
      EXPECT_GT(r.read_gbs, 0.0) << bytes << " bytes, " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace chimera
