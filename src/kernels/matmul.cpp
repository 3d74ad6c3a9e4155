// The matmul driver (plain and grouped: a plain matmul is a group of one
// task): looks each weight type up in the kernel table, packs every task's
// activation rows once into its kernel's layout (the caller's scratch, or for
// a plain matmul thread-local scratch that only grows, so steady-state calls
// do not allocate), then splits the total cost Σ rows_t · m_t over the pool in
// chunks (GuidedJob: one large chunk per thread, then geometrically
// shrinking ones taken as threads finish). A range boundary at cost u maps to (task,
// row) with the row rounded up to the 16-row grain the kernels tile by; the
// mapping is monotonic, so the ranges are disjoint and cover every row exactly
// once. Each y element is produced by exactly one thread, and kernels make it
// independent of the partition, so any thread count gives bit-identical
// results.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/dispatch.h"
#include "kernels/type_traits.h"

namespace chimera::kernels {
namespace {

constexpr size_t kActAlign = 64;
constexpr int64_t kRowGrain = 16;

struct Scratch {
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> p;
  size_t cap = 0;
  uint8_t* get(size_t bytes) {
    if (bytes > cap) {
      size_t n = std::max(bytes, cap * 2);
      n = (n + kActAlign - 1) / kActAlign * kActAlign;
      void* q = std::aligned_alloc(kActAlign, n);
      if (!q) throw std::bad_alloc();
      p.reset(static_cast<uint8_t*>(q));
      cap = n;
    }
    return p.get();
  }
};

uint8_t* act_scratch(size_t bytes) {
  thread_local Scratch s;
  return s.get(bytes);
}

bool same_packing(const GroupedMatmulTask& a, const MatmulKernel* ka, const GroupedMatmulTask& b,
                  const MatmulKernel* kb) {
  return a.x == b.x && a.m == b.m && a.ldx == b.ldx && a.w.cols == b.w.cols && ka->pack_act == kb->pack_act &&
         ka->act_bytes == kb->act_bytes;
}

const MatmulKernel* kernel_for(const WeightView& w) {
  const MatmulKernel* k = matmul_kernel(w.type, active_isa());
  assert(k && "matmul: unsupported weight type (call check_matmul_type at load)");
  if (!k) std::abort();
  return k;
}

struct Prepared {
  GemmFn gemm;
  GemmArgs g;
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

// Guided schedule of one pool region: chunk c < T (T threads) is thread c's
// share of the first kStaticPart of the cost, taken by that thread first (the
// rows it would own under an even split, so its weight stream starts where it
// always did); the rest R of the cost is cut into chunks that shrink
// geometrically (guided self-scheduling: each takes 1/T of what is left, the
// last two are equal and at least R / (4 T^2)), which threads take in turn
// from a shared counter as they finish. A thread slowed by the host, a task
// whose rows cost more than the cost model's rows x m (a Q6_K tensor among
// Q4_K ones), or serial work just before the region then no longer leaves the
// other threads idle at its end, and the idle time at the end is at most one
// small chunk (T = 2: R / 16 = 1/64 of the region; session 21, was R / 4
// with 2 equal chunks per thread). Chunk bounds are split_at points (16-row
// grain), disjoint and covering, and each y element is still computed whole
// by one kernel call, so the bits do not depend on which thread takes which
// chunk.
class GuidedJob {
 public:
  static constexpr int64_t kStaticNum = 3, kStaticDen = 4;  // kStaticPart = 3/4
  // Most tail chunks (cheap to take: one atomic increment each).
  static constexpr int kMaxTail = 64;

  GuidedJob(const Prepared* p, int64_t np, int64_t total, int threads)
      : p_(p), np_(np), total_(total), threads_(threads), next_(threads) {
    head_ = total_ / kStaticDen * kStaticNum + total_ % kStaticDen * kStaticNum / kStaticDen;
    // tail_[i]: cost offset where tail chunk i starts; the remainder shrinks
    // by 1/T per chunk until a chunk would be under the floor
    const int64_t rest = total_ - head_, t = threads_;
    const int64_t min_chunk = std::max<int64_t>(1, rest / (4 * t * t));
    int64_t left = rest;
    int n_tail = 0;
    while (left > 0 && n_tail < kMaxTail - 1) {
      tail_[n_tail++] = total_ - left;
      const int64_t take = left / t;
      if (take < min_chunk || left - take < min_chunk) {
        // the last: split what is left in two equal chunks
        if (left >= 2 * min_chunk && n_tail < kMaxTail - 1) tail_[n_tail++] = total_ - left / 2;
        break;
      }
      left -= take;
    }
    chunks_ = threads_ + n_tail;
  }

  void run(int t) {
    run_chunk(t);
    for (int c = next_.fetch_add(1, std::memory_order_relaxed); c < chunks_;
         c = next_.fetch_add(1, std::memory_order_relaxed)) {
      run_chunk(c);
    }
  }

 private:
  // Cost offset where chunk c starts (c = chunks_: total_).
  int64_t bound(int c) const {
    if (c < threads_) return head_ * c / threads_;
    if (c >= chunks_) return total_;
    return tail_[c - threads_];
  }
  void run_chunk(int c) const {
    run_range(p_, np_, split_at(p_, np_, bound(c)), split_at(p_, np_, bound(c + 1)));
  }

  const Prepared* p_;
  int64_t np_, total_, head_ = 0;
  int threads_, chunks_ = 0;
  int64_t tail_[kMaxTail];
  std::atomic<int> next_;
};

// The driver for at most kMax tasks (a template so that a plain matmul keeps
// one-element arrays on its stack). scratch == nullptr: thread-local packing
// scratch. The pool packs and multiplies only when the rows span more than
// one grain (otherwise one thread would get all the work anyway).
template <int64_t kMax>
void run_tasks(const GroupedMatmulTask* tasks, int64_t n, uint8_t* scratch, ThreadPool* pool,
               int64_t min_parallel_macs) {
  assert(n <= kMax);
  if (n > kMax) std::abort();
  // A task whose packed copy ends before its last row (WeightView::packed_rows)
  // is two entries: the packed rows, then the rest in storage layout.
  Prepared prep[2 * kMax];
  ActPackJob packs[kMax];
  size_t pack_off[kMax];
  int64_t pack_of[2 * kMax];  // prep[i]'s packing job, -1 when its kernel reads f32 in place
  int64_t np = 0, n_packs = 0, total = 0, all_rows = 0, macs = 0;
  size_t bytes = 0;
  const MatmulKernel* prev_kern = nullptr;
  for (int64_t t = 0; t < n; ++t) {
    const GroupedMatmulTask& task = tasks[t];
    if (task.m <= 0 || task.w.rows <= 0) {
      prev_kern = nullptr;
      continue;
    }
    const MatmulKernel* k = kernel_for(task.w);
    Prepared& p = prep[np];
    p.rows = task.w.rows;
    p.m = task.m;
    p.gemm = bind_weight(task.w, k, p.g);
    p.g.y = task.y;
    p.g.ldy = task.ldy;
    if (!k->pack_act) {
      p.g.a = reinterpret_cast<const uint8_t*>(task.x);
      p.g.a_stride = (size_t)task.ldx * sizeof(float);
      pack_of[np] = -1;
    } else if (prev_kern && same_packing(task, k, tasks[t - 1], prev_kern)) {
      p.g.a_stride = prep[np - 1].g.a_stride;
      pack_of[np] = pack_of[np - 1];
    } else {
      const size_t stride = act_stride(k, task.w.cols);
      packs[n_packs] = {k, task.x, task.m, task.ldx, task.w.cols, nullptr, stride};
      pack_off[n_packs] = bytes;
      bytes += stride * (size_t)task.m;
      p.g.a_stride = stride;
      pack_of[np] = n_packs++;
    }
    prev_kern = k;
    total += task.w.rows * p.m;
    all_rows += task.w.rows;
    macs += task.w.rows * p.m * task.w.cols;
    ++np;
    if (p.g.w == task.w.packed && task.w.packed_rows < task.w.rows) {  // the storage-layout rest
      Prepared& rest = prep[np];
      rest = p;
      rest.rows = task.w.rows - task.w.packed_rows;
      p.rows = task.w.packed_rows;
      rest.gemm = k->gemm;
      rest.g.w = static_cast<const uint8_t*>(task.w.data) + (size_t)task.w.packed_rows * task.w.row_bytes;
      rest.g.w_stride = task.w.row_bytes;
      rest.g.y = task.y + task.w.packed_rows;
      pack_of[np] = pack_of[np - 1];
      ++np;
    }
  }
  if (np == 0) return;
  if (n_packs > 0) {
    uint8_t* buf = scratch ? scratch : act_scratch(bytes);
    for (int64_t j = 0; j < n_packs; ++j) packs[j].out = buf + pack_off[j];
    for (int64_t i = 0; i < np; ++i)
      if (pack_of[i] >= 0) prep[i].g.a = packs[pack_of[i]].out;
  }
  ThreadPool* const wide = all_rows > kRowGrain ? pool : nullptr;
  pack_activations(packs, n_packs, wide);
  if (!wide || wide->size() <= 1 || macs < min_parallel_macs) {
    for (int64_t t = 0; t < np; ++t) prep[t].gemm(prep[t].g, 0, prep[t].rows, 0, prep[t].m);
    return;
  }
  // One captured pointer keeps the std::function in its small buffer (no heap).
  GuidedJob job(prep, np, total, wide->size());
  wide->run_on_all([j = &job](int t, int) { j->run(t); });
}

}  // namespace

size_t act_stride(const MatmulKernel* k, int64_t cols) {
  return (k->act_bytes(cols) + kActAlign - 1) / kActAlign * kActAlign;
}

void pack_activations(const ActPackJob* jobs, int64_t n, ThreadPool* pool) {
  int64_t rows = 0, values = 0;
  for (int64_t j = 0; j < n; ++j) {
    rows += jobs[j].m;
    values += jobs[j].m * jobs[j].cols;
  }
  auto pack_range = [jobs, n](int64_t r0, int64_t r1) {
    int64_t base = 0;
    for (int64_t j = 0; j < n && base < r1; base += jobs[j].m, ++j) {
      const ActPackJob& p = jobs[j];
      const int64_t a = std::max<int64_t>(r0 - base, 0), b = std::min<int64_t>(r1 - base, p.m);
      for (int64_t i = a; i < b; ++i) p.kern->pack_act(p.x + i * p.ldx, p.cols, p.out + (size_t)i * p.stride);
    }
  };
  if (!pool || pool->size() <= 1 || values < kMinParallelPackValues || rows < 2) {
    pack_range(0, rows);
    return;
  }
  pool->parallel_for(rows, [&pack_range](int64_t r0, int64_t r1, int) { pack_range(r0, r1); });
}

bool matmul_supports(format::GgmlType type) { return weight_type_traits(type) != nullptr; }

Status check_matmul_type(format::GgmlType type) {
  if (matmul_supports(type)) return Status::ok();
  return unsupported("matmul: weight type " + format::ggml_type_name(type) + " is not supported");
}

Status check_matmul_shape(format::GgmlType type, int64_t cols) {
  CHIMERA_RETURN_IF_ERROR(check_matmul_type(type));
  const WeightTypeTraits* t = weight_type_traits(type);
  if (cols % t->block_size == 0) return Status::ok();
  return unsupported("matmul: " + format::ggml_type_name(type) + " weights need a row length that is a multiple of " +
                     std::to_string(t->block_size) + " (got " + std::to_string(cols) + ")");
}

void matmul(const WeightView& w, const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy, ThreadPool* pool) {
  const GroupedMatmulTask task{w, x, m, ldx, y, ldy};
  run_tasks<1>(&task, 1, nullptr, pool, kGroupedMatmulMinParallelMacs);
}

size_t grouped_matmul_scratch_bytes(const GroupedMatmulTask* tasks, int64_t n) {
  size_t bytes = 0;
  const MatmulKernel* prev = nullptr;
  for (int64_t t = 0; t < n; ++t) {
    const MatmulKernel* k = matmul_kernel(tasks[t].w.type, active_isa());
    if (!k) return 0;
    if (k->pack_act && !(t > 0 && prev && same_packing(tasks[t], k, tasks[t - 1], prev)))
      bytes += act_stride(k, tasks[t].w.cols) * (size_t)tasks[t].m;
    prev = k;
  }
  return bytes;
}

void grouped_matmul(const GroupedMatmulTask* tasks, int64_t n, uint8_t* scratch, ThreadPool* pool,
                    int64_t min_parallel_macs) {
  run_tasks<kGroupedMatmulMaxTasks>(tasks, n, scratch, pool, min_parallel_macs);
}

WeightView WeightView::rows_slice(int64_t r0, int64_t n) const {
  WeightView v = *this;
  v.data = static_cast<const uint8_t*>(data) + (size_t)r0 * row_bytes;
  v.rows = n;
  if (packed) {
    const int g = packed_kernel->repack_rows;
    const int64_t whole = g > 0 && r0 % g == 0 ? std::min(packed_rows - r0, n) / g * g : 0;
    if (whole > 0) {
      v.packed = static_cast<const uint8_t*>(packed) + (size_t)r0 * packed_row_bytes;
      v.packed_rows = whole;
    } else {
      v.packed = nullptr;
      v.packed_kernel = nullptr;
      v.packed_row_bytes = 0;
      v.packed_rows = 0;
    }
  }
  return v;
}

GemmFn bind_weight(const WeightView& w, const MatmulKernel* kern, GemmArgs& g) {
  g.k = w.cols;
  // The tail (I2_S's per-tensor scale) follows the storage-layout rows.
  g.w_tail = static_cast<const uint8_t*>(w.data) + (size_t)w.rows * w.row_bytes;
  if (w.packed && w.packed_kernel == kern && kern->gemm_packed) {
    g.w = static_cast<const uint8_t*>(w.packed);
    g.w_stride = w.packed_row_bytes;
    return kern->gemm_packed;
  }
  g.w = static_cast<const uint8_t*>(w.data);
  g.w_stride = w.row_bytes;
  return kern->gemm;
}

void weight_row_to_f32(const WeightView& w, int64_t r, float* out) {
  const WeightTypeTraits* t = weight_type_traits(w.type);
  assert(t && "weight_row_to_f32: unsupported weight type");
  if (!t) std::abort();
  t->row_to_f32(static_cast<const uint8_t*>(w.data) + (size_t)r * w.row_bytes, out, w.cols);
  if (t->tail_f32_scale) {
    float s;
    std::memcpy(&s, static_cast<const uint8_t*>(w.data) + (size_t)w.rows * w.row_bytes, sizeof(s));
    for (int64_t j = 0; j < w.cols; ++j) out[j] *= s;
  }
}

}  // namespace chimera::kernels
