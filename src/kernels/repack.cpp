// PackedWeights: converts bound weight tensors into their kernel's layout.
#include "kernels/repack.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

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

}  // namespace

bool PackedWeights::pack(WeightView& w) {
  if (!repack_enabled() || !w.data || w.rows <= 0 || w.packed) return false;
  const MatmulKernel* k = matmul_kernel(w.type, active_isa());
  if (!k || !k->repack || !k->gemm_packed || k->repack_rows <= 0 || w.rows % k->repack_rows != 0) return false;
  const size_t row_bytes = k->repack_row_bytes(w.cols);
  AlignedBuffer<uint8_t> buf((size_t)w.rows * row_bytes);
  k->repack(static_cast<const uint8_t*>(w.data), w.row_bytes, w.rows, w.cols, buf.data());
  w.packed = buf.data();
  w.packed_kernel = k;
  w.packed_row_bytes = row_bytes;
  bytes_ += buf.size();
  bufs_.push_back(std::move(buf));
  release_pages(w.data, (size_t)w.rows * w.row_bytes);
  return true;
}

}  // namespace chimera::kernels
