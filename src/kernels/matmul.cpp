// matmul driver: looks the weight type up in the kernel table, packs the m
// activation rows once into the kernel's layout (thread-local scratch that
// only grows, so steady-state calls do not allocate), then splits the weight
// rows over the pool in contiguous, 16-row-aligned ranges. Each y element is
// produced by exactly one thread, and kernels make it independent of the
// partition, so any thread count gives bit-identical results.
#include "kernels/matmul.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/dispatch.h"
#include "kernels/type_traits.h"

namespace chimera::kernels {
namespace {

constexpr size_t kActAlign = 64;
// Below this many multiply-adds the pool's wake-up costs more than it saves.
constexpr int64_t kMinParallelMacs = 1 << 18;
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
  if (m <= 0 || w.rows <= 0) return;
  const MatmulKernel* kern = matmul_kernel(w.type, active_isa());
  assert(kern && "matmul: unsupported weight type (call check_matmul_type at load)");
  if (!kern) std::abort();

  GemmArgs g;
  const GemmFn gemm = bind_weight(w, kern, g);
  g.y = y;
  g.ldy = ldy;
  if (kern->pack_act) {
    const size_t stride = act_stride(kern, w.cols);
    uint8_t* buf = act_scratch(stride * (size_t)m);
    // At prefill sizes packing is split over the pool, only where the GEMM
    // below runs on the pool too.
    const ActPackJob job{kern, x, m, ldx, w.cols, buf, stride};
    pack_activations(&job, 1, w.rows > kRowGrain ? pool : nullptr);
    g.a = buf;
    g.a_stride = stride;
  } else {
    g.a = reinterpret_cast<const uint8_t*>(x);
    g.a_stride = (size_t)ldx * sizeof(float);
  }

  const bool parallel = pool && pool->size() > 1 && w.rows > kRowGrain && w.rows * w.cols * m >= kMinParallelMacs;
  if (!parallel) {
    gemm(g, 0, w.rows, 0, m);
    return;
  }
  // One captured pointer keeps the std::function in its small buffer (no heap).
  struct Job {
    GemmFn gemm;
    GemmArgs g;
    int64_t m;
  } job{gemm, g, m};
  pool->parallel_for(
      w.rows, [p = &job](int64_t r0, int64_t r1, int) { p->gemm(p->g, r0, r1, 0, p->m); }, kRowGrain);
}

WeightView WeightView::rows_slice(int64_t r0, int64_t n) const {
  WeightView v = *this;
  v.data = static_cast<const uint8_t*>(data) + (size_t)r0 * row_bytes;
  v.rows = n;
  if (packed) {
    const int g = packed_kernel->repack_rows;
    if (g > 0 && r0 % g == 0 && n % g == 0) {
      v.packed = static_cast<const uint8_t*>(packed) + (size_t)r0 * packed_row_bytes;
    } else {
      v.packed = nullptr;
      v.packed_kernel = nullptr;
      v.packed_row_bytes = 0;
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
