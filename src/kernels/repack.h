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
#include <vector>

#include "core/memory.h"
#include "kernels/matmul.h"

namespace chimera::kernels {

// True unless CHIMERA_REPACK=0 is set.
bool repack_enabled();

class PackedWeights {
 public:
  // When the active ISA's kernel for w.type repacks and w.rows is a multiple
  // of its group, converts w into a new owned copy and points w.packed at it;
  // otherwise leaves w unchanged. Returns whether it packed. The storage
  // copy's pages are released to the page cache (they stay readable, e.g. for
  // embedding rows of a tied output head).
  bool pack(WeightView& w);
  // Bytes of all packed copies.
  size_t bytes() const { return bytes_; }
  size_t count() const { return bufs_.size(); }

 private:
  std::vector<AlignedBuffer<uint8_t>> bufs_;
  size_t bytes_ = 0;
};

}  // namespace chimera::kernels
