// Aligned buffers (64-byte, for SIMD and cache lines) and process memory stats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>

namespace chimera {

constexpr size_t kAlign = 64;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

// Tag: allocate without zeroing (the caller writes every element).
struct Uninitialized {};

// Whether huge-page advice can take effect: transparent huge pages in
// "always" or "madvise" mode, and CHIMERA_HUGEPAGES=0 not set.
bool huge_pages_available();

// Bytes an aligned allocation of `bytes` occupies (kAlign multiple, >= kAlign).
constexpr size_t aligned_size(size_t bytes) { return bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign; }
// aligned_size(bytes) bytes, kAlign-aligned (throws std::bad_alloc). With
// `huge` (large, long-lived, streamed buffers such as packed weights) an
// allocation of 2 MiB or more is 2 MiB-aligned and, where the kernel allows
// it, backed by transparent huge pages — 512x fewer page faults when filled
// and TLB misses when streamed.
void* alloc_aligned(size_t bytes, bool huge = false);

// Zero-initialised aligned array of T (trivial types only).
template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) { resize(n); }
  // Contents indeterminate: for buffers filled right away in full (saves the
  // page faults and the write of a zeroing pass over large buffers).
  AlignedBuffer(size_t n, Uninitialized) { allocate(n, false); }
  // Uninitialized, huge-page backed when possible (alloc_aligned).
  struct HugePages {};
  AlignedBuffer(size_t n, Uninitialized, HugePages) { allocate(n, false, true); }
  void resize(size_t n) {
    if (n == n_) return;
    allocate(n, true);
  }
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return p_.get()[i]; }
  const T& operator[](size_t i) const { return p_.get()[i]; }

 private:
  void allocate(size_t n, bool zero, bool huge = false) {
    void* p = alloc_aligned(n * sizeof(T), huge);
    if (zero) std::memset(p, 0, aligned_size(n * sizeof(T)));
    p_.reset(static_cast<T*>(p));
    n_ = n;
  }

  std::unique_ptr<T, AlignedFree> p_;
  size_t n_ = 0;
};

// Peak resident set size of this process in bytes (VmHWM), 0 if unknown.
uint64_t peak_rss_bytes();
// Current resident set size in bytes (VmRSS), 0 if unknown.
uint64_t current_rss_bytes();

// Page-granular byte range [begin, end) of a buffer: widened (outward) or
// narrowed (inward; may be empty) to multiples of page_size.
struct PageRange {
  uintptr_t begin = 0, end = 0;
  size_t bytes() const { return end > begin ? end - begin : 0; }
};
PageRange page_range(const uint8_t* data, size_t bytes, size_t page_size, bool outward);
// madvise(advice) over the whole pages of [p, p + n): inward (only pages
// entirely inside) or outward (every page the range touches). Advisory: a
// refusal is ignored.
void advise_pages(const void* p, size_t n, bool outward, int advice);

}  // namespace chimera
