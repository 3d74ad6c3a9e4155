// Grouped matmul for the MoE block: several independent y = x · Wᵀ products
// (e.g. the gate and up projections of both selected experts) run as ONE
// parallel job over the concatenation of their output rows, instead of one
// pool job per product. In decode every product is a GEMV of a few hundred to
// a few thousand rows; issuing them separately costs a pool wake-up and a
// barrier each, and a 448-row GEMV split over 2 threads leaves little work per
// thread. One job over all rows keeps every thread busy until the phase ends.
//
// Activation packing (quantization for the integer kernels) is row-wise and
// runs over the pool as well when there is enough of it.
//
// Work is partitioned by cost (rows × activation rows m), so tasks with
// different m share the threads fairly. Each y element is still computed by
// exactly one kernel call with the kernel's own fixed summation order, and
// kernels do not depend on the row bounds they are given, so the results are
// bit-identical to separate kernels::matmul calls for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace chimera::layers {

// Most tasks one grouped_matmul call takes.
constexpr int64_t kGroupedMatmulMaxTasks = 64;
// Below this many multiply-adds in all tasks together, the pool is not woken.
constexpr int64_t kGroupedMatmulMinParallelMacs = 1 << 18;

struct GroupedMatmulTask {
  kernels::WeightView w;
  const float* x = nullptr;  // m activation rows, stride ldx floats
  int64_t m = 0;
  int64_t ldx = 0;
  float* y = nullptr;        // m output rows, stride ldy floats
  int64_t ldy = 0;
};

// Bytes of packing scratch grouped_matmul needs for these tasks (activation
// rows are packed once per task; a task whose x, m, ldx, cols and kernel equal
// the previous task's reuses its packing).
size_t grouped_matmul_scratch_bytes(const GroupedMatmulTask* tasks, int64_t n);

// Runs all n <= kGroupedMatmulMaxTasks tasks. `scratch` must hold grouped_matmul_scratch_bytes() bytes,
// 64-byte aligned. pool may be null. Weight types must be supported by matmul.
// min_parallel_macs: tests pass 0 to exercise the parallel split on small sizes.
void grouped_matmul(const GroupedMatmulTask* tasks, int64_t n, uint8_t* scratch, ThreadPool* pool,
                    int64_t min_parallel_macs = kGroupedMatmulMinParallelMacs);

}  // namespace chimera::layers
