// Load-time weight repacking: a kernel may declare its own weight layout
// (MatmulKernel::repack, e.g. rows interleaved in groups so one pass streams
// several rows, scales decoded once); PackedWeights converts a bound weight
// tensor into it and owns the copy. A model keeps one PackedWeights for the
// lifetime of its WeightViews. Repacking follows the ISA active at load time;
// matmul uses the copy only while that ISA's kernel is the one it picks.
//
// CHIMERA_REPACK=0 in the environment turns repacking off (diagnosis,
// comparison of both paths).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/memory.h"
#include "kernels/matmul.h"

namespace chimera::kernels {

// True unless CHIMERA_REPACK=0 is set.
bool repack_enabled();

class PackedWeights {
 public:
  // When the active ISA's kernel for w.type repacks and w has at least one
  // whole group of rows, converts the whole groups into a new owned copy and
  // points w.packed at it (w.packed_rows: the rows it holds; the last
  // w.rows % group rows stay in storage layout); otherwise leaves w unchanged.
  // Returns whether it packed. The storage
  // copy's pages are released to the page cache (they stay readable, e.g. for
  // embedding rows of a tied output head).
  //
  // A matrix of at least kMinRelocateBytes that stays in its storage layout
  // (no packing kernel, or fewer rows than a group) is instead copied once
  // into huge-page-backed memory where transparent huge pages are available
  // (core/memory.h): same bytes, same kernels, w.data moved to the copy —
  // streaming GEMVs then take far fewer TLB misses (F16 4096 x 4096 GEMV,
  // 1 thread: 23.6 vs 21.1 GB/s). Not for types with per-tensor data after
  // the rows (I2_S). Returns false in that case too.
  bool pack(WeightView& w);
  static constexpr size_t kMinRelocateBytes = 4u << 20;
  // With a repack cache in scope (kernels/repack_cache.h), a tensor it holds
  // is mapped from it instead of converted (and the cache is kept alive), and
  // a converted one is handed to it for writing.
  // Bytes of all packed copies (converted or mapped from the cache).
  size_t bytes() const { return bytes_; }
  // Of which mapped from a repack cache.
  size_t cached_bytes() const { return cached_bytes_; }
  // Bytes of the storage-layout matrices copied to huge pages.
  size_t relocated_bytes() const { return relocated_bytes_; }
  size_t count() const { return bufs_.size(); }

 private:
  void relocate(WeightView& w);
  template <class Fill>
  uint8_t* convert(WeightView& w, int64_t rows, int64_t group, size_t dst_row_bytes, const Fill& fill);

  std::vector<AlignedBuffer<uint8_t>> bufs_;
  std::vector<std::shared_ptr<const void>> keep_;  // repack caches mapped from
  size_t bytes_ = 0, relocated_bytes_ = 0, cached_bytes_ = 0;
};

}  // namespace chimera::kernels
