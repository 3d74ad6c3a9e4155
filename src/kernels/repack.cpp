// PackedWeights: converts bound weight tensors into their kernel's layout.
#include "kernels/repack.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/repack_cache.h"
#include "kernels/type_traits.h"

namespace chimera::kernels {

bool repack_enabled() {
  const char* v = std::getenv("CHIMERA_REPACK");
  return !(v && std::strcmp(v, "0") == 0);
}

namespace {

// Runs fn(r0, rows) over [0, n) cut at multiples of `group` rows, on up to
// hardware_concurrency threads once the tensor is large enough for the copy
// and the page faults of the new buffer and of the file pages to parallelize.
// Each group is converted on its own, so the bytes are those of one call.
template <class Fn>
void for_row_ranges(int64_t n, int64_t group, size_t bytes, const Fn& fn) {
  constexpr size_t kMinBytesPerThread = 4u << 20;
  const int64_t groups = n / group;
  const int64_t threads = std::min<int64_t>({(int64_t)std::max(1u, std::thread::hardware_concurrency()), groups,
                                             (int64_t)(bytes / kMinBytesPerThread) + 1});
  auto part = [&](int64_t t) {
    const int64_t g0 = groups * t / threads, g1 = groups * (t + 1) / threads;
    if (g1 > g0) fn(g0 * group, (g1 - g0) * group);
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(part, t);
  part(0);
  for (std::thread& th : pool) th.join();
}

}  // namespace

// Shared by pack and relocate: a huge-page buffer of rows * dst_row_bytes
// filled by fill(r0, rows, dst) over row ranges of whole groups, the source
// pages mapped in with one call before (MADV_POPULATE_READ, kernels >= 5.14;
// else the reads fault them in) and dropped from the resident set after (a
// read-only file mapping faults them back in from the page cache).
template <class Fill>
uint8_t* PackedWeights::convert(WeightView& w, int64_t rows, int64_t group, size_t dst_row_bytes, const Fill& fill) {
  const size_t src_bytes = (size_t)rows * w.row_bytes, dst_bytes = (size_t)rows * dst_row_bytes;
  AlignedBuffer<uint8_t> buf(dst_bytes, Uninitialized{}, AlignedBuffer<uint8_t>::HugePages{});
#if defined(MADV_POPULATE_READ)
  advise_pages(w.data, src_bytes, /*outward=*/true, MADV_POPULATE_READ);
#endif
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  uint8_t* dst = buf.data();
  for_row_ranges(rows, group, dst_bytes, [&](int64_t r0, int64_t n) {
    fill(src + (size_t)r0 * w.row_bytes, n, dst + (size_t)r0 * dst_row_bytes);
  });
  advise_pages(w.data, src_bytes, /*outward=*/false, MADV_DONTNEED);
  bufs_.push_back(std::move(buf));
  return dst;
}

bool PackedWeights::pack(WeightView& w) {
  if (!repack_enabled() || !w.data || w.rows <= 0 || w.packed) return false;
  const MatmulKernel* k = matmul_kernel(w.type, active_isa());
  // The whole groups are packed; the rows after them (fewer than a group) stay
  // where they are, for the storage-layout kernel (matmul.h: packed_rows).
  const int64_t rows = k && k->repack_rows > 0 ? w.rows / k->repack_rows * k->repack_rows : 0;
  if (!k || !k->repack || !k->gemm_packed || rows == 0) {
    relocate(w);
    return false;
  }
  // Every byte is written by the repack (groups are contiguous, g at
  // g * repack_rows * row_bytes); the tail padding of the allocation is never read.
  const size_t row_bytes = k->repack_row_bytes(w.cols), total = (size_t)rows * row_bytes;
  const std::shared_ptr<RepackCache>& cache = ScopedRepackCache::current();
  const char* kname = k->layout_name ? k->layout_name : k->name ? k->name : "?";
  if (const uint8_t* hit = cache ? cache->find(w.data, kname, total) : nullptr) {
    w.packed = hit;
    keep_.push_back(cache);
    cached_bytes_ += total;
  } else {
    w.packed = convert(w, rows, k->repack_rows, row_bytes, [&](const uint8_t* src, int64_t n, uint8_t* dst) {
      k->repack(src, w.row_bytes, n, w.cols, dst);
    });
    if (cache) cache->add(w.data, kname, row_bytes, static_cast<const uint8_t*>(w.packed), total);
  }
  w.packed_kernel = k;
  w.packed_row_bytes = row_bytes;
  w.packed_rows = rows;
  bytes_ += total;
  return true;
}

void PackedWeights::relocate(WeightView& w) {
  const size_t bytes = (size_t)w.rows * w.row_bytes;
  const WeightTypeTraits* t = weight_type_traits(w.type);
  if (bytes < kMinRelocateBytes || !t || t->tail_f32_scale || !huge_pages_available()) return;
  w.data = convert(w, w.rows, 1, w.row_bytes, [&](const uint8_t* src, int64_t n, uint8_t* dst) {
    std::memcpy(dst, src, (size_t)n * w.row_bytes);
  });
  relocated_bytes_ += bytes;
}

}  // namespace chimera::kernels
