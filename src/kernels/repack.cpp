// PackedWeights: converts bound weight tensors into their kernel's layout.
#include "kernels/repack.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/type_traits.h"

namespace chimera::kernels {

bool repack_enabled() {
  const char* v = std::getenv("CHIMERA_REPACK");
  return !(v && std::strcmp(v, "0") == 0);
}

namespace {

// Drops the whole pages inside [p, p + n) from this process's resident set;
// a read-only file mapping faults them back in from the page cache.
void release_pages(const void* p, size_t n) {
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return;
  const PageRange r = page_range(static_cast<const uint8_t*>(p), n, (size_t)page, /*outward=*/false);
  if (r.bytes() > 0) madvise(reinterpret_cast<void*>(r.begin), r.bytes(), MADV_DONTNEED);
}

// Runs k.repack over row ranges (whole groups) on up to
// hardware_concurrency threads for large tensors: the copy and the page
// faults of the new buffer and of the file pages parallelize. Same bytes as
// one call (each group is converted on its own).
void repack_parallel(const MatmulKernel& k, const uint8_t* src, size_t src_stride, int64_t n, int64_t cols,
                     uint8_t* dst, size_t row_bytes) {
  constexpr size_t kMinBytesPerThread = 4u << 20;
  const int64_t groups = n / k.repack_rows;
  const size_t bytes = (size_t)n * row_bytes;
  const int64_t threads = std::min<int64_t>({(int64_t)std::max(1u, std::thread::hardware_concurrency()), groups,
                                             (int64_t)(bytes / kMinBytesPerThread) + 1});
  auto part = [&](int64_t t) {
    const int64_t g0 = groups * t / threads, g1 = groups * (t + 1) / threads;
    const int64_t r0 = g0 * k.repack_rows, rows = (g1 - g0) * k.repack_rows;
    if (rows > 0) k.repack(src + (size_t)r0 * src_stride, src_stride, rows, cols, dst + (size_t)r0 * row_bytes);
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(part, t);
  part(0);
  for (std::thread& th : pool) th.join();
}

// Maps in the source pages of a tensor about to be read whole with one call
// (a single populate instead of one page fault per 4 KiB; kernels >= 5.14,
// otherwise the copy faults them in as before).
void populate(const void* p, size_t n) {
#if defined(MADV_POPULATE_READ)
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return;
  const PageRange r = page_range(static_cast<const uint8_t*>(p), n, (size_t)page, /*outward=*/true);
  if (r.bytes() > 0) madvise(reinterpret_cast<void*>(r.begin), r.bytes(), MADV_POPULATE_READ);
#else
  (void)p;
  (void)n;
#endif
}

}  // namespace

bool PackedWeights::pack(WeightView& w) {
  if (!repack_enabled() || !w.data || w.rows <= 0 || w.packed) return false;
  const MatmulKernel* k = matmul_kernel(w.type, active_isa());
  if (!k || !k->repack || !k->gemm_packed || k->repack_rows <= 0 || w.rows % k->repack_rows != 0) {
    relocate(w);
    return false;
  }
  const size_t row_bytes = k->repack_row_bytes(w.cols);
  // Every byte is written by the repack (groups are contiguous, g at
  // g * repack_rows * row_bytes); the tail padding of the allocation is never read.
  AlignedBuffer<uint8_t> buf((size_t)w.rows * row_bytes, Uninitialized{}, AlignedBuffer<uint8_t>::HugePages{});
  populate(w.data, (size_t)w.rows * w.row_bytes);
  repack_parallel(*k, static_cast<const uint8_t*>(w.data), w.row_bytes, w.rows, w.cols, buf.data(), row_bytes);
  w.packed = buf.data();
  w.packed_kernel = k;
  w.packed_row_bytes = row_bytes;
  bytes_ += buf.size();
  bufs_.push_back(std::move(buf));
  release_pages(w.data, (size_t)w.rows * w.row_bytes);
  return true;
}

void PackedWeights::relocate(WeightView& w) {
  const size_t bytes = (size_t)w.rows * w.row_bytes;
  const WeightTypeTraits* t = weight_type_traits(w.type);
  if (bytes < kMinRelocateBytes || !t || t->tail_f32_scale || !huge_pages_available()) return;
  AlignedBuffer<uint8_t> buf(bytes, Uninitialized{}, AlignedBuffer<uint8_t>::HugePages{});
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  uint8_t* dst = buf.data();
  populate(src, bytes);
  // Row ranges copied on the repack threads (same split as repack_parallel).
  MatmulKernel copy;
  copy.repack_rows = 1;
  copy.repack = [](const uint8_t* s, size_t stride, int64_t n, int64_t, uint8_t* d) {
    std::memcpy(d, s, (size_t)n * stride);
  };
  repack_parallel(copy, src, w.row_bytes, w.rows, w.cols, dst, w.row_bytes);
  release_pages(w.data, bytes);
  w.data = dst;
  relocated_bytes_ += bytes;
  bufs_.push_back(std::move(buf));
}

}  // namespace chimera::kernels
