// matmul micro-benchmarks. GEMV (m = 1, decode) reports weight bytes/s; it
// cycles through enough weight copies (>= 128 MiB) that every call streams
// from DRAM as decode does, so compare it with membw_read. GEMM (prefill)
// reports GFLOP/s (2 * rows * cols * m per call). Arguments: rows = cols,
// m, threads, ISA (index into available_isas(); -1 = best). Names look like
//   gemv/F16/4096/threads:1/isa:avx512vnni
// This file also provides the benchmark binary's main().
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;

constexpr size_t kColdBytes = size_t{128} << 20;

struct WeightSet {
  std::vector<AlignedBuffer<uint8_t>> copies;
  std::vector<WeightView> views;
};

WeightSet make_weights(GgmlType type, int64_t n, bool cold) {
  const size_t eb = type == GgmlType::F32 ? 4 : 2;
  const size_t bytes = (size_t)(n * n) * eb;
  const size_t count = cold ? std::max<size_t>(1, (kColdBytes + bytes - 1) / bytes) : 1;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  WeightSet s;
  s.copies.resize(count);
  for (auto& c : s.copies) {
    c.resize(bytes);
    for (int64_t i = 0; i < n * n; ++i) {
      const float v = u(rng);
      if (type == GgmlType::F32) {
        std::memcpy(c.data() + i * 4, &v, 4);
      } else {
        const uint16_t h = type == GgmlType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(c.data() + i * 2, &h, 2);
      }
    }
    s.views.push_back(WeightView{type, c.data(), n, n, (size_t)n * eb});
  }
  return s;
}

void run_matmul(benchmark::State& state, GgmlType type, int64_t n, int64_t m, int threads, Isa isa, bool cold) {
  ScopedIsa scoped(isa);
  ThreadPool pool(threads);
  const WeightSet w = make_weights(type, n, cold);
  std::vector<float> x((size_t)(m * n)), y((size_t)(m * n));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& v : x) v = u(rng);
  size_t at = 0;
  for (auto _ : state) {
    matmul(w.views[at], x.data(), m, n, y.data(), n, &pool);
    benchmark::DoNotOptimize(y.data());
    at = (at + 1) % w.views.size();
  }
  const double flops = 2.0 * (double)n * (double)n * (double)m;
  state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)w.views[0].row_bytes * n);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9 * (double)state.iterations(),
                                                 benchmark::Counter::kIsRate);
}

// Reads a 256 MiB buffer with `threads` threads: the bandwidth GEMV should approach.
void membw_read(benchmark::State& state, int threads) {
  ThreadPool pool(threads);
  const size_t n = (size_t{256} << 20) / 8;
  AlignedBuffer<uint64_t> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = i;
  for (auto _ : state) {
    std::vector<uint64_t> part((size_t)threads * 8, 0);
    pool.parallel_for(
        (int64_t)n,
        [&](int64_t b, int64_t e, int t) {
          uint64_t s[4] = {0, 0, 0, 0};
          for (int64_t i = b; i + 4 <= e; i += 4) {
            s[0] += buf[i];
            s[1] += buf[i + 1];
            s[2] += buf[i + 2];
            s[3] += buf[i + 3];
          }
          part[(size_t)t * 8] = s[0] + s[1] + s[2] + s[3];
        },
        4096);
    benchmark::DoNotOptimize(part.data());
  }
  state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(n * 8));
}

void register_all() {
  const std::vector<Isa> isas = available_isas();
  const GgmlType types[] = {GgmlType::F16, GgmlType::BF16, GgmlType::F32};
  for (int threads : {1, 2}) {
    benchmark::RegisterBenchmark(("membw_read/threads:" + std::to_string(threads)).c_str(),
                                 [threads](benchmark::State& s) { membw_read(s, threads); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (Isa isa : isas) {
    for (GgmlType type : types) {
      for (int threads : {1, 2}) {
        const std::string suffix = "/threads:" + std::to_string(threads) + "/isa:" + isa_name(isa);
        for (int64_t n : {2048, 4096}) {
          const std::string shape = ggml_type_name(type) + "/" + std::to_string(n);
          benchmark::RegisterBenchmark(("gemv/" + shape + suffix).c_str(),
                                       [=](benchmark::State& s) { run_matmul(s, type, n, 1, threads, isa, true); })
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
          for (int64_t m : {64, 512}) {
            benchmark::RegisterBenchmark(
                ("gemm/" + shape + "/m:" + std::to_string(m) + suffix).c_str(),
                [=](benchmark::State& s) { run_matmul(s, type, n, m, threads, isa, false); })
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace chimera::kernels

int main(int argc, char** argv) {
  chimera::kernels::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
