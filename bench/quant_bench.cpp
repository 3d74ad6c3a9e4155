// Legacy block-quant matmul micro-benchmarks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL weights; Q8 activations). GEMV (m = 1, decode) reports weight bytes/s
// and cycles through >= 128 MiB of weight copies so every call streams from
// DRAM (compare with membw_read in matmul_bench.cpp); GEMM (prefill) reports
// GFLOP/s = 2 * rows * cols * m per call, activation quantization included.
// Names: qgemv/Q4_0/4096/threads:1/isa:avx512vnni, qgemv_packed/... (load-time
// repacked Q8_0 / Q4_0), qgemv_hot/... and qgemv_hot_packed/... (cache-warm:
// the compute ceiling), qgemm/Q4_0/4096/m:64/...
// Registered at static-initialisation time; main() is in matmul_bench.cpp.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"
#include "kernels/type_traits.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;

// Random block codes with valid f16 scales (d = m = 2^-7): the kernels'
// speed does not depend on the values.
bench::WeightSet make_qweights(GgmlType type, int64_t n, bool cold) {
  const size_t bb = format::ggml_type_info((uint32_t)type)->type_size;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(0, 255);
  return bench::make_weight_copies(type, n, n, cold, [&](size_t, uint8_t* data) {
    const size_t bytes = format::ggml_row_size(type, n) * (size_t)n;
    for (size_t i = 0; i < bytes; ++i) data[i] = (uint8_t)byte(rng);
    for (size_t b = 0; b < bytes / bb; ++b) {
      data[b * bb] = 0x00;  // d = m = 2^-7 (f16 0x2000)
      data[b * bb + 1] = 0x20;
    }
  });
}

// packed: every copy repacked at "load" (kernels/repack.h) for `isa`, as a
// model's weights are (Q8_0, Q4_0: matmul_q8_0_repack.h, matmul_q4_0_repack.h).
void run_qmatmul(benchmark::State& state, GgmlType type, int64_t n, int64_t m, int threads, Isa isa, bool cold,
                 bool packed = false) {
  ScopedIsa scoped(isa);
  ThreadPool pool(threads);
  bench::WeightSet w = make_qweights(type, n, cold);
  PackedWeights packs;
  if (packed && !bench::pack_all(w, packs, state)) return;
  bench::time_matmul(state, w, m, pool);
  state.SetLabel(std::string(matmul_kernel(type, isa)->name) + (packed ? " packed" : ""));
}

// Load-time repacked vs storage-layout Q8_0 (matmul_q8_0_repack.h) on a
// rows x cols weight: the same random codes, packed by PackedWeights when
// `packed` (the storage copies are separate, pack() releases their pages).
void run_q8_repack(benchmark::State& state, int64_t rows, int64_t cols, int64_t m, bool packed, int threads, Isa isa,
                   bool cold) {
  ScopedIsa scoped(isa);
  ThreadPool pool(threads);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(0, 255);
  bench::WeightSet w = bench::make_weight_copies(GgmlType::Q8_0, rows, cols, cold, [&](size_t, uint8_t* data) {
    const size_t bytes = format::ggml_row_size(GgmlType::Q8_0, cols) * (size_t)rows;
    for (size_t i = 0; i < bytes; ++i) data[i] = (uint8_t)byte(rng);
    for (size_t b = 0; b < bytes / 34; ++b) {
      data[b * 34] = 0x00;
      data[b * 34 + 1] = 0x20;
    }
  });
  PackedWeights packs;  // load-time repacked copies (kernels/repack.h)
  if (packed && !bench::pack_all(w, packs, state)) return;
  bench::time_matmul(state, w, m, pool);
  // Bytes actually streamed per call are the same in both layouts (34 per block).
  const MatmulKernel* k = matmul_kernel(GgmlType::Q8_0, isa);
  state.SetLabel(std::string(k->name) + (packed ? " packed" : ""));
}

void register_q8_repack() {
  struct Shape {
    int64_t rows, cols;
  };
  for (Isa isa : available_isas()) {
    const MatmulKernel* k = matmul_kernel(GgmlType::Q8_0, isa);
    if (isa == Isa::kScalar || !k || !k->repack) continue;
    for (Shape sh : {Shape{2048, 2048}, Shape{8192, 2048}, Shape{2048, 8192}}) {
      for (int packed : {0, 1}) {
        const std::string name = "q8_repack/" + std::to_string(sh.rows) + "x" + std::to_string(sh.cols) +
                                 "/packed:" + std::to_string(packed) + "/threads:1/isa:" + isa_name(isa);
        benchmark::RegisterBenchmark((name + "/m:256").c_str(), [=](benchmark::State& s) {
          run_q8_repack(s, sh.rows, sh.cols, 256, packed != 0, 1, isa, false);
        })->UseRealTime()->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark((name + "/m:1").c_str(), [=](benchmark::State& s) {
          run_q8_repack(s, sh.rows, sh.cols, 1, packed != 0, 1, isa, true);
        })->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

bool register_quant() {
  register_q8_repack();
  const GgmlType types[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                            GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL};
  for (Isa isa : available_isas()) {
    for (GgmlType type : types) {
      for (int threads : {1, 2}) {
        const std::string suffix = "/threads:" + std::to_string(threads) + "/isa:" + isa_name(isa);
        const int64_t n = 4096;
        const std::string shape = format::ggml_type_name(type) + "/" + std::to_string(n);
        benchmark::RegisterBenchmark(("qgemv/" + shape + suffix).c_str(),
                                     [=](benchmark::State& s) { run_qmatmul(s, type, n, 1, threads, isa, true); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        if (matmul_kernel(type, isa)->repack) {
          benchmark::RegisterBenchmark(
              ("qgemv_packed/" + shape + suffix).c_str(),
              [=](benchmark::State& s) { run_qmatmul(s, type, n, 1, threads, isa, true, true); })
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
        // Cache-warm GEMV: weights L3-resident (n) and L2-resident (n / 4):
        // the kernel's compute ceiling.
        for (int64_t nh : {n, n / 4}) {
          const std::string hs = format::ggml_type_name(type) + "/" + std::to_string(nh);
          benchmark::RegisterBenchmark(("qgemv_hot/" + hs + suffix).c_str(),
                                       [=](benchmark::State& s) { run_qmatmul(s, type, nh, 1, threads, isa, false); })
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
          if (matmul_kernel(type, isa)->repack) {
            benchmark::RegisterBenchmark(
                ("qgemv_hot_packed/" + hs + suffix).c_str(),
                [=](benchmark::State& s) { run_qmatmul(s, type, nh, 1, threads, isa, false, true); })
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
          }
        }
        for (int64_t m : {64, 512}) {
          benchmark::RegisterBenchmark(
              ("qgemm/" + shape + "/m:" + std::to_string(m) + suffix).c_str(),
              [=](benchmark::State& s) { run_qmatmul(s, type, n, m, threads, isa, false); })
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
        // The packed GEMM a model's prefill (m = 256) and 8-stream decode step (m = 8) run.
        if (matmul_kernel(type, isa)->repack) {
          for (int64_t m : {8, 256}) {
            benchmark::RegisterBenchmark(
                ("qgemm_packed/" + shape + "/m:" + std::to_string(m) + suffix).c_str(),
                [=](benchmark::State& s) { run_qmatmul(s, type, n, m, threads, isa, false, true); })
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
          }
        }
      }
    }
  }
  return true;
}

[[maybe_unused]] const bool kRegistered = register_quant();

}  // namespace
}  // namespace chimera::kernels
