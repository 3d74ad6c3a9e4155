// Grouped matmul: pack each task's activations once, then split the total
// cost Σ rows_t · m_t into one contiguous range per thread. A range boundary
// at cost u maps to (task, row) with the row rounded up to the 16-row grain
// the kernels tile by; the mapping is monotonic, so the ranges of the threads
// are disjoint and cover every row exactly once.
#include "layers/moe_grouped.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>

#include "kernels/type_traits.h"

namespace chimera::layers {
namespace {

constexpr int64_t kRowGrain = 16;

bool same_packing(const GroupedMatmulTask& a, const kernels::MatmulKernel* ka, const GroupedMatmulTask& b,
                  const kernels::MatmulKernel* kb) {
  return a.x == b.x && a.m == b.m && a.ldx == b.ldx && a.w.cols == b.w.cols && ka->pack_act == kb->pack_act &&
         ka->act_bytes == kb->act_bytes;
}

struct Prepared {
  const kernels::MatmulKernel* kern;
  kernels::GemmFn gemm;
  kernels::GemmArgs g;
  int64_t rows, m;
};

struct Split {
  int64_t task, row;
};

// First (task, row) whose cost offset is >= u, row rounded up to the grain.
Split split_at(const Prepared* p, int64_t n, int64_t u) {
  int64_t base = 0;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t cost = p[t].rows * p[t].m;
    if (u < base + cost) {
      int64_t row = (u - base + p[t].m - 1) / p[t].m;
      row = (row + kRowGrain - 1) / kRowGrain * kRowGrain;
      if (row >= p[t].rows) return {t + 1, 0};
      return {t, row};
    }
    base += cost;
  }
  return {n, 0};
}

void run_range(const Prepared* p, int64_t np, Split a, Split b) {
  for (int64_t t = a.task; t < np && (t < b.task || (t == b.task && b.row > 0)); ++t) {
    const int64_t r0 = t == a.task ? a.row : 0;
    const int64_t r1 = t == b.task ? b.row : p[t].rows;
    if (r0 < r1) p[t].gemm(p[t].g, r0, r1, 0, p[t].m);
  }
}

}  // namespace

size_t grouped_matmul_scratch_bytes(const GroupedMatmulTask* tasks, int64_t n) {
  size_t bytes = 0;
  const kernels::MatmulKernel* prev = nullptr;
  for (int64_t t = 0; t < n; ++t) {
    const kernels::MatmulKernel* k = kernels::matmul_kernel(tasks[t].w.type, kernels::active_isa());
    if (!k) return 0;
    if (k->pack_act && !(t > 0 && prev && same_packing(tasks[t], k, tasks[t - 1], prev)))
      bytes += kernels::act_stride(k, tasks[t].w.cols) * (size_t)tasks[t].m;
    prev = k;
  }
  return bytes;
}

void grouped_matmul(const GroupedMatmulTask* tasks, int64_t n, uint8_t* scratch, ThreadPool* pool,
                    int64_t min_parallel_macs) {
  assert(n <= kGroupedMatmulMaxTasks);
  if (n > kGroupedMatmulMaxTasks) std::abort();
  Prepared prep[kGroupedMatmulMaxTasks];
  kernels::ActPackJob packs[kGroupedMatmulMaxTasks];
  int64_t np = 0, n_packs = 0, total = 0, macs = 0;
  uint8_t* buf = scratch;
  for (int64_t t = 0; t < n; ++t) {
    const GroupedMatmulTask& task = tasks[t];
    const kernels::MatmulKernel* k = kernels::matmul_kernel(task.w.type, kernels::active_isa());
    assert(k && "grouped_matmul: unsupported weight type (call check_matmul_type at load)");
    if (!k) std::abort();
    if (task.m <= 0 || task.w.rows <= 0) continue;
    Prepared& p = prep[np];
    p.kern = k;
    p.rows = task.w.rows;
    p.m = task.m;
    p.gemm = kernels::bind_weight(task.w, k, p.g);
    p.g.y = task.y;
    p.g.ldy = task.ldy;
    if (!k->pack_act) {
      p.g.a = reinterpret_cast<const uint8_t*>(task.x);
      p.g.a_stride = (size_t)task.ldx * sizeof(float);
    } else if (t > 0 && np > 0 && tasks[t - 1].m > 0 && tasks[t - 1].w.rows > 0 &&
               same_packing(task, k, tasks[t - 1], prep[np - 1].kern)) {
      p.g.a = prep[np - 1].g.a;
      p.g.a_stride = prep[np - 1].g.a_stride;
    } else {
      const size_t stride = kernels::act_stride(k, task.w.cols);
      packs[n_packs++] = {k, task.x, task.m, task.ldx, task.w.cols, buf, stride};
      p.g.a = buf;
      p.g.a_stride = stride;
      buf += stride * (size_t)task.m;
    }
    total += p.rows * p.m;
    macs += p.rows * p.m * task.w.cols;
    ++np;
  }
  if (np == 0) return;
  kernels::pack_activations(packs, n_packs, pool);
  const int nt = pool ? pool->size() : 1;
  if (nt <= 1 || macs < min_parallel_macs) {
    for (int64_t t = 0; t < np; ++t) prep[t].gemm(prep[t].g, 0, prep[t].rows, 0, prep[t].m);
    return;
  }
  struct Job {
    const Prepared* p;
    int64_t np, total;
  } job{prep, np, total};
  pool->run_on_all([j = &job](int t, int n_threads) {
    const Split a = split_at(j->p, j->np, j->total * t / n_threads);
    const Split b = split_at(j->p, j->np, j->total * (t + 1) / n_threads);
    run_range(j->p, j->np, a, b);
  });
}

}  // namespace chimera::layers
