// Internal to the matmul kernels: the software prefetch of the decode GEMVs
// (m == 1) over load-time repacked weights, in one place.
//
// The x16 K-quant / IQ4_XS and packed TQ2_0 / TQ1_0 GEMVs read one
// sequential stream per thread, and one stream alone keeps too few misses in
// flight to pull what the memory system gives a core (docs/PERFORMANCE.md,
// sessions 10 and 11). Prefetching the block a few KB ahead of the one being
// computed (every 64-byte line of it, into L1) lets them stream ~10-25%
// faster; more streams per thread added nothing on top, and a far prefetch
// (24 KiB ahead) was slower than none. Distances per family: kPf* below
// (session 11, alternating rounds). The packed Q8_0 / Q4_0 GEMVs read 4-8
// groups at once and keep their own prefetch of the next tile (this near
// prefetch in its place was 20-30% slower).
//
// No prefetch reaches past its `end` (the group or the call's last row): an out-of-range prefetch does not fault on x86, but it would touch
// memory the kernel does not own. Prefetching changes no arithmetic: the
// results stay bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chimera::kernels {

// Prefetch distances, in the family's blocks ahead of the one being read.
constexpr int kPfX16 = 2;      // x16 K-quant / IQ4_XS group blocks (1.3-3.4 KB each)
constexpr int kPfTernary = 16;  // packed TQ2_0 / TQ1_0 group blocks (256 B each): 4 KiB

// Calls f(line address) for every 64-byte line of [p, p + bytes) that starts
// below `end` (addresses as integers: p may lie past the end of the buffer,
// where nothing is visited).
template <class F>
__attribute__((always_inline)) inline void for_each_prefetch_line(uintptr_t p, size_t bytes, const uint8_t* end,
                                                                  F&& f) {
  uintptr_t stop = p + bytes;
  const uintptr_t lim = reinterpret_cast<uintptr_t>(end);
  if (stop > lim) stop = lim;
  if (p >= stop) return;
  for (uintptr_t a = p & ~uintptr_t{63}; a < stop; a += 64) f(a);
}

// Prefetches (read, into L1) those lines.
__attribute__((always_inline)) inline void gemv_prefetch(uintptr_t p, size_t bytes, const uint8_t* end) {
  for_each_prefetch_line(p, bytes, end, [](uintptr_t a) { __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 3); });
}

// The block kAhead blocks after `block` (blocks of kBlock bytes, back to
// back), clipped to `end`.
template <size_t kBlock, int kAhead>
__attribute__((always_inline)) inline void gemv_prefetch_ahead(const uint8_t* block, const uint8_t* end) {
  gemv_prefetch(reinterpret_cast<uintptr_t>(block) + (size_t)kAhead * kBlock, kBlock, end);
}

}  // namespace chimera::kernels
