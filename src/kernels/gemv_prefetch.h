// Internal to the matmul kernels: how the decode GEMVs (m == 1) over
// load-time repacked weights keep enough reads in flight, in one place.
//
// One sequential stream per thread keeps too few misses in flight to pull
// what the memory system gives a core: the L2 streamer runs only ~20 lines
// ahead of the last access in one 4 KiB page, and a GEMV's compute between
// the loads keeps the out-of-order window from reaching further. What works
// (session 12, 2-vCPU Sapphire Rapids, Q6_K AVX-512, 2048 x 2048, 2 threads,
// alternating runs): read kX16Streams = 4 groups at once, interleaved chunk by
// chunk (3 lines of each group in turn; whole group blocks in turn gained
// nothing), and prefetch the same chunks of the next 4 groups into L2: 12-14
// -> 19.6-20.7 GB/s, and llama-3.2-1b Q6_K decode 12.7-14.4 -> 20.2-23.2
// tok/s. The packed Q8_0 / Q4_0 GEMVs have read 4-8 groups at once with an
// L2 prefetch of the next tile since session 9 (their 62-80% of the probe);
// since session 20 they fetch each group's codes a few blocks ahead into L1
// instead (kPfNear in matmul_q8_0_repack_*.cpp, matmul_q4_0_repack_x86.cpp:
// Q8_0 1.13-1.27x, Q4_0 1.0-1.12x in paired A/B runs).
// AVX2 x16 Q6_K and IQ4_XS (session 12, same machine, heavily loaded: 4
// alternating rounds, GB/s by wall time) use the same kX16Streams = 4 step,
// interleaved by lane (Q6_K: a lane's two 3-line runs per group; IQ4_XS: a
// lane's 8 scattered chunk halves per group), with the L2 prefetch per lane
// step; Q6_K 2048 x 2048, 1 thread 4.1-6.5 -> 3.9-9.6 (2 threads 1.7-2.3 ->
// 2.2-3.7), IQ4_XS 3.0-4.1 -> 2.8-5.9. Prefetching each next group block
// whole at its super-block's start instead fell back to the one-stream speed
// (Q6_K); prefetching each of IQ4_XS's scattered lines on its own cost 2.5x
// in compute (cache-warm GEMV).
//
// The x16 GEMVs that read several groups at once (kq_x16_run's `gemv` step):
//   Q6_K AVX-512          kX16Streams = 4, chunks of 3 lines (one scale
//                         group) per group
//   Q4_K / Q5_K AVX-512   kX16Streams = 4, chunks of 4 qs lines (Q5_K: + the
//                         4 qh lines they use, in the first pass)
//   Q4_K / Q5_K AVX2      kX16StreamsAvx2 = 2, chunks of 4 qs lines, both
//                         8-row halves per super-block (the second from L1).
//                         With 16 vector registers 4 groups at once made
//                         Q5_K slower than 1 (1 thread: ~3.1 vs ~3.6 GB/s);
//                         2 was at least as fast as 4 for Q4_K; chunks of 8
//                         lines measured the same as 4.
//   Q6_K AVX2             kX16StreamsAvx2 = 2, by scale group: the group's
//                         3-line run of each group (both 8-row halves per
//                         super-block; by lane, two 3-line runs, until
//                         session 15's layout). Session 13 (loaded machine, runs at
//                         SCHED_FIFO, 4 alternating rounds, 2 threads): 2
//                         groups read 17.4-20.2 GB/s against 15.6-17.6 for 4
//                         (4096 x 4096), 15.2-18.2 against 13.9-14.4 (2048);
//                         llama-3.2-1b Q6_K decode 14.1-16.0 -> 15.4-16.5 tok/s.
//   IQ4_XS AVX2           kX16StreamsAvx2 = 2 since session 15 (was 4), by
//                         lane: a lane's 8 chunk halves. 4 groups kept 64
//                         f32 lane accumulators and 32 scale vectors on the
//                         stack; on Zen 5 (busy, 3 alternating rounds, CPU
//                         time, 4096 x 4096, 1 thread) 2 groups read the
//                         cold GEMV in 569-786 us against 889-1075, the
//                         L2-resident 1024^2 one in 28-36 us against 52-64.
//   IQ4_XS AVX-512        kX16Streams = 4, by lane: a lane's 8 chunks per
//                         group (was the storage kernel's 4 rows at once)
//   Q2_K / Q3_K AVX-512   kX16StreamsQ23 = 4, per lane half (lanes 4 lh ..
//                         + 3): Q2_K its 8 qs lines, Q3_K its 12 level lines
//                         of each group in turn. Interleaving per lane
//                         instead cost ~20% in compute (cache-warm GEMV):
//                         the scale word pairs of 4 groups went to the stack.
//   Q2_K / Q3_K AVX2      kX16StreamsQ23Avx2 = 2, by lane, both 8-row halves
//                         per super-block (each group block read once, was
//                         twice): a lane's 2 qs lines (Q2_K) / 3 level lines
//                         (Q3_K) of each group in turn. 4 groups measured
//                         slower than 2 (on a loaded machine; PERFORMANCE.md).
//
// Session 20 (2-vCPU Zen 5, paired in-process A/B: the two policies on
// alternate calls over 512 MiB of cold copies, so host drift hits both
// alike): the far L2 prefetch above left Q4_K's compute and its DRAM reads
// mostly serial (AVX2, 1 thread: 42 GB/s from L2, 31 from L3, 18 from DRAM
// against a 27 GB/s read probe). Fetching each group's next super-block
// into L1 instead (the near policy, gemv_step_pf / gemv_step_prefetch below)
// gave, 4096 x 4096 cold, 1 / 2 threads: Q4_K AVX2 1.21-1.34x / 1.10-1.34x
// (2 threads ~35 -> ~41-47 GB/s), Q4_K AVX-VNNI 1.29x / 1.17x, Q5_K AVX2
// 1.16x / 1.18x, Q6_K AVX-VNNI 1.15-1.17x / 1.05-1.21x, Q4_K AVX-512 VNNI
// 1.05x / 1.09x, Q6_K AVX-512 VNNI 1.16x / 1.13x (2 threads 52 -> 59
// GB/s); Q5_K AVX-512 VNNI 1.00x; IQ4_XS AVX2 0.99x / 1.17-1.20x, AVX-512
// VNNI 0.92-1.07x / 1.07-1.11x. Two super-blocks ahead, or the next one
// into L2 only, gained less. Plain AVX2 Q6_K (compute-bound: ~32 GB/s per
// core even from L2) read 0.88-1.06x, and the packed ternary GEMVs (256
// bytes per group and super-block) 0.78-1.0x at 1, 2 and 4 blocks ahead:
// both keep the far policy, as Q2_K / Q3_K (not measured).
//
// The packed TQ2_0 / TQ1_0 GEMVs read kTqStreams = 4 groups at once, block by
// block (4 lines of each group in turn), with the L2 prefetch of the next 4
// (matmul_ternary.h, tq_packed_gemv; session 12); since session 21 the
// AVX-512 kernel fetches those same lines of the next 4 groups into L1
// instead (cold, 2 threads: 1.13-1.2x; the AVX2 levels: no clear change);
// their groups left over
// (only at a tensor end whose rows are not a multiple of 16) have no prefetch.
//
// Where an x16 GEMV still reads one group at a time (the groups left over
// after the multi-stream steps, and kernels without a multi-stream step), it
// prefetches the block a few KB ahead (every 64-byte line, into L1): ~10-25%
// faster than none; a far prefetch (24 KiB ahead) was slower than none.
//
// No prefetch reaches past its `end` (the group or the call's last row): an
// out-of-range prefetch does not fault on x86, but it would touch memory the
// kernel does not own; the multi-stream L2 prefetch is only issued when the
// next groups are the thread's own. The exception: the x16 GEMM tiles (m >=
// 2) fetch a few group blocks ahead in the packed stream without knowing the
// tensor's end (AVX-512 Q6_K kPfTile = 3, Q4_K / Q5_K kPfTileQ45 = 3, AVX2
// Q6_K 2), so the last tile of a tensor reaches up to ~10 KiB past it (a
// hint: no fault, no write). Prefetching changes no arithmetic: the results
// stay bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chimera::kernels {

// Groups a multi-stream decode GEMV reads at once (x16 K-quant kernels).
constexpr int kX16Streams = 4;
// ... by the AVX2 Q4_K / Q5_K / Q6_K / IQ4_XS GEMVs (kq_x16_run<kX16StreamsAvx2>; above).
constexpr int kX16StreamsAvx2 = 2;
// ... by the Q2_K / Q3_K GEMVs (AVX-512, AVX2; above).
constexpr int kX16StreamsQ23 = 4;
constexpr int kX16StreamsQ23Avx2 = 2;

// The multi-stream GEMV's walk over rows [r0, r1) in groups of kGroupRows
// rows (group_bytes each), shared by the x16 K-quant (kq_x16_run) and packed
// ternary (tq_packed_gemv) drivers: step(r, pf) for every run of kStreams
// whole groups starting at row r, pf = the byte offset of the next run when
// that run also lies in [r0, r1) (its groups are this call's to prefetch),
// else 0; then one(r) for every group left over.
template <int kStreams, int64_t kGroupRows, class Step, class One>
inline void gemv_stream_steps(int64_t r0, int64_t r1, size_t group_bytes, Step&& step, One&& one) {
  constexpr int64_t kRun = (int64_t)kStreams * kGroupRows;
  int64_t r = r0;
  for (; r + kRun <= r1; r += kRun) step(r, r + 2 * kRun <= r1 ? (size_t)kStreams * group_bytes : 0);
  for (; r < r1; r += kGroupRows) one(r);
}

// Prefetch distances, in the family's blocks ahead of the one being read.
constexpr int kPfX16 = 2;      // x16 K-quant / IQ4_XS group blocks (1.3-3.4 KB each)
// The small-m GEMM tiles (m = 2..8 activation rows: batched decode steps)
// of the x16 Q4_K / Q5_K kernels read a group's blocks in order and fetch
// the block kPfTileQ45 blocks further into L1 (past the group's end that is
// the next group's, which the next tile reads: group blocks are contiguous).
// Session 20, paired A/B on Zen 5 (4096 x 4096 cold, 2 threads) against the
// same block of the next group into L2: AVX-512 VNNI Q4_K m = 2 / 4 / 8
// 1.41x / 1.32x / 1.39x, AVX2 1.28x / 1.30x / 1.14x; Q5_K m = 2 / 8 AVX-512
// 1.22x / 1.07x, AVX2 1.20x / 1.04x; 2 and 4 blocks ahead within a few %.
constexpr int kPfTileQ45 = 3;

// The prefetching lambdas must be always_inline: the kernels are compiled
// with a target attribute (AVX2 / AVX-512) that a plain lambda does not have,
// so GCC cannot inline it, finds it free of side effects (a prefetch is not
// one) and deletes the call. Until session 12 every prefetch of this header
// was dropped that way from the x16 and packed ternary kernels.
#define CHIMERA_PF_INLINE __attribute__((always_inline))

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
  for_each_prefetch_line(p, bytes, end, [](uintptr_t a) CHIMERA_PF_INLINE {
    __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 3);
  });
}

// Prefetches the lines of [p, p + bytes) into L2 (the multi-stream GEMVs'
// far prefetch: p is inside the thread's rows, checked by the caller).
__attribute__((always_inline)) inline void gemv_prefetch_l2(const uint8_t* p, size_t bytes) {
  for_each_prefetch_line(reinterpret_cast<uintptr_t>(p), bytes, p + bytes,
                         [](uintptr_t a) CHIMERA_PF_INLINE {
                           __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 2);
                         });
}

// The block kAhead blocks after `block` (blocks of kBlock bytes, back to
// back), clipped to `end`.
template <size_t kBlock, int kAhead>
__attribute__((always_inline)) inline void gemv_prefetch_ahead(const uint8_t* block, const uint8_t* end) {
  gemv_prefetch(reinterpret_cast<uintptr_t>(block) + (size_t)kAhead * kBlock, kBlock, end);
}

// The multi-stream GEMVs' two prefetch policies (kNear, per kernel; see the
// table above):
//  - far (kNear = false): each chunk of the step's groups one run ahead
//    (pf = the step's next_run, kStreams group blocks further) into L2;
//  - near (kNear = true): each chunk of the groups' next super-block (pf =
//    one group block further) into L1. At the groups' last super-block that
//    is the next group: the run's own, or for its last stream the next run's
//    first block, so it is fetched only when next_run says that run is the
//    caller's.
// The offset a kernel adds to a chunk's address at super-block sb of nsb
// (block: its group block's bytes; 0: no prefetch):
template <bool kNear>
__attribute__((always_inline)) inline size_t gemv_step_pf(int64_t sb, int64_t nsb, size_t next_run, size_t block) {
  if constexpr (kNear) {
    return sb + 1 < nsb || next_run ? block : 0;
  } else {
    return next_run;
  }
}
// ... and the prefetch of that chunk's lines (p = its address + the offset).
template <bool kNear>
__attribute__((always_inline)) inline void gemv_step_prefetch(const uint8_t* p, size_t bytes) {
  if constexpr (kNear) {
    for (size_t i = 0; i < bytes; i += 64) __builtin_prefetch(p + i, 0, 3);
  } else {
    gemv_prefetch_l2(p, bytes);
  }
}

}  // namespace chimera::kernels
