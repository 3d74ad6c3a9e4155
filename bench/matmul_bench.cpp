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

#include "core/bandwidth.h"
#include "core/fp16.h"
#include "bench_util.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;

bench::WeightSet make_weights(GgmlType type, int64_t n, bool cold) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  return bench::make_weight_copies(type, n, n, cold, [&](size_t, uint8_t* data) {
    for (int64_t i = 0; i < n * n; ++i) {
      const float v = u(rng);
      if (type == GgmlType::F32) {
        std::memcpy(data + i * 4, &v, 4);
      } else {
        const uint16_t h = type == GgmlType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(data + i * 2, &h, 2);
      }
    }
  });
}

void run_matmul(benchmark::State& state, GgmlType type, int64_t n, int64_t m, int threads, Isa isa, bool cold) {
  ScopedIsa scoped(isa);
  ThreadPool pool(threads);
  bench::time_matmul(state, make_weights(type, n, cold), m, pool);
}

// Reads a 1 GiB buffer (~10x the L3 of large server parts) with `threads`
// threads, one sequential stream each: what a kernel streaming one run of
// weights per thread can expect (on the session-10 VM about half of
// membw_probe: one stream keeps too few misses in flight).
void membw_read(benchmark::State& state, int threads) {
  ThreadPool pool(threads);
  const size_t n = (size_t{1} << 30) / 8;
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

// The probe `chimera bench` reports against (core/bandwidth.h: 8 interleaved
// streams per thread with prefetch): the machine's read bandwidth.
void membw_probe(benchmark::State& state, int threads) {
  ThreadPool pool(threads);
  int64_t bytes = 0;
  for (auto _ : state) {
    const BandwidthResult r = measure_read_bandwidth(pool, size_t{1} << 30, 1);
    state.SetIterationTime(r.read_gbs > 0 ? (double)r.bytes / (r.read_gbs * 1e9) : 1.0);
    bytes += (int64_t)r.bytes;
  }
  state.SetBytesProcessed(bytes);
}

void register_all() {
  const std::vector<Isa> isas = available_isas();
  const GgmlType types[] = {GgmlType::F16, GgmlType::BF16, GgmlType::F32};
  for (int threads : {1, 2}) {
    benchmark::RegisterBenchmark(("membw_read/threads:" + std::to_string(threads)).c_str(),
                                 [threads](benchmark::State& s) { membw_read(s, threads); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("membw_probe/threads:" + std::to_string(threads)).c_str(),
                                 [threads](benchmark::State& s) { membw_probe(s, threads); })
        ->UseManualTime()
        ->Iterations(3)
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
