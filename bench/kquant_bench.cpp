// K-quant matmul micro-benchmarks (Q4_K, Q6_K, Q5_K, Q2_K, Q3_K and IQ4_XS
// weights x Q8_K activations). GEMV (m = 1, decode) reports weight bytes/s (the quantized
// storage actually streamed) and cycles through >= 128 MiB of weight copies so
// every call reads DRAM — compare with membw_read from matmul_bench.cpp. GEMM
// (prefill) reports GFLOP/s; kq_gemv_hot is GEMV on cache-warm weights
// (the kernel's compute ceiling), (2 * rows * cols * m per call, weights cache-warm).
// Names look like
//   kq_gemv/Q4_K/4096/threads:1/isa:avx512vnni
//   kq_gemm/Q4_K/4096/m:64/threads:2/isa:avx2
//   kq_gemm_packed/Q4_K/8192x2048/m:8/threads:1/isa:amx  (rows x cols; Q4_K
//   model shapes at small m, for the AMX threshold: avx512vnni and amx only)
//   kq_smallm/Q4_K/8192x2048/m:8/threads:1/isa:avx2  (the small-m GEMMs of
//   batched decode, m = 1, 2, 4, 8, 16, packed, cold copies as in a model
//   step; AVX2 and AVX-512 VNNI, 1 thread: compare the CPU time of m = 8
//   with m = 1; kq_smallm/Q6_K/8192x2048/...: the output head's columns,
//   also on avx2vnni and avx512)
//   kq_gemm_packed/Q6_K/8192x2048/m:8/threads:1/isa:avx2  (the output head's
//   columns at batched-decode m, AVX2 and AVX-512 levels)
// Registered by a static initializer; main() lives in matmul_bench.cpp.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "format/gguf/ggml_types.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/type_traits.h"
#include "kernels/repack.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
// packed: every copy repacked at "load" (kernels/repack.h) for `isa`, as a
// model's weights are; the storage copies are then released.
void run_kq(benchmark::State& state, GgmlType type, int64_t n, int64_t m, int threads, Isa isa, bool cold,
            bool packed = false, int64_t cols = 0) {
  ScopedIsa scoped(isa);
  ThreadPool pool(threads);
  bench::WeightSet w = bench::make_quantized_weights(type, n, cols ? cols : n, cold);
  PackedWeights packs;  // load-time repacked copies (kernels/repack.h)
  if (packed && !bench::pack_all(w, packs, state)) return;
  bench::time_matmul(state, w, m, pool);
}

struct Registrar {
  Registrar() {
    for (Isa isa : available_isas()) {
      if (isa != Isa::kAvx2 && isa != Isa::kAvx512Vnni) continue;
      for (const auto& sh : {std::pair<int64_t, int64_t>{8192, 2048}, {2048, 8192}}) {
        for (int64_t m : {1, 2, 4, 8, 16}) {
          const std::string name = "kq_smallm/Q4_K/" + std::to_string(sh.first) + "x" + std::to_string(sh.second) +
                                   "/m:" + std::to_string(m) + "/threads:1/isa:" + isa_name(isa);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [=](benchmark::State& s) {
                                         run_kq(s, GgmlType::Q4_K, sh.first, m, 1, isa, true, true, sh.second);
                                       })
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
    // The Q6_K output head's columns (8192 x 2048) at the same m, cold copies
    // as well (the head of a model streams from DRAM: 128256 x 2048 is
    // 215 MiB), on the four x86 levels that have x16 Q6_K kernels.
    for (Isa isa : available_isas()) {
      if (isa != Isa::kAvx2 && isa != Isa::kAvx2Vnni && isa != Isa::kAvx512 && isa != Isa::kAvx512Vnni) continue;
      for (int64_t m : {1, 2, 4, 8, 16}) {
        const std::string name =
            "kq_smallm/Q6_K/8192x2048/m:" + std::to_string(m) + "/threads:1/isa:" + isa_name(isa);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [=](benchmark::State& s) {
                                       run_kq(s, GgmlType::Q6_K, 8192, m, 1, isa, true, true, 2048);
                                     })
            ->Unit(benchmark::kMicrosecond);
      }
    }
    // Q4_K GEMMs of model shapes (attention 2048 x 2048, FFN 8192 x 2048) at
    // the m of batched decode steps and prefill: the AVX-512 VNNI and AMX levels.
    for (Isa isa : available_isas()) {
      if (isa != Isa::kAvx512Vnni && isa != Isa::kAmx) continue;
      for (int threads : {1, 2}) {
        for (int64_t rows : {2048, 8192}) {
          for (int64_t m : {2, 4, 8, 16, 64, 256}) {
            const std::string name = "kq_gemm_packed/Q4_K/" + std::to_string(rows) + "x2048/m:" + std::to_string(m) +
                                     "/threads:" + std::to_string(threads) + "/isa:" + isa_name(isa);
            benchmark::RegisterBenchmark(name.c_str(),
                                         [=](benchmark::State& s) {
                                           run_kq(s, GgmlType::Q4_K, rows, m, threads, isa, false, true, 2048);
                                         })
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
          }
        }
      }
    }
    // Q6_K GEMMs of the tied output head's shape (128256 x 2048 in
    // llama-3.2-1b; 8192 rows here) at the m of batched decode steps (m = 1:
    // the decode GEMV), packed x16, the AVX2 and AVX-512 levels.
    for (Isa isa : available_isas()) {
      if (isa != Isa::kAvx2 && isa != Isa::kAvx2Vnni && isa != Isa::kAvx512 && isa != Isa::kAvx512Vnni) continue;
      for (int threads : {1, 2}) {
        for (int64_t m : {1, 2, 4, 8, 16}) {
          const std::string name = "kq_gemm_packed/Q6_K/8192x2048/m:" + std::to_string(m) +
                                   "/threads:" + std::to_string(threads) + "/isa:" + isa_name(isa);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [=](benchmark::State& s) {
                                         run_kq(s, GgmlType::Q6_K, 8192, m, threads, isa, false, true, 2048);
                                       })
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
    const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q2_K, GgmlType::Q3_K,
                              GgmlType::IQ4_XS};
    for (Isa isa : available_isas()) {
      for (GgmlType type : types) {
        for (int threads : {1, 2}) {
          const std::string suffix = "/threads:" + std::to_string(threads) + "/isa:" + isa_name(isa);
          for (int64_t n : {4096, 2048}) {
            const std::string shape = format::ggml_type_name(type) + "/" + std::to_string(n);
            benchmark::RegisterBenchmark(("kq_gemv/" + shape + suffix).c_str(),
                                         [=](benchmark::State& s) { run_kq(s, type, n, 1, threads, isa, true); })
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
            if (matmul_kernel(type, isa)->repack) {
              benchmark::RegisterBenchmark(("kq_gemv_packed/" + shape + suffix).c_str(),
                                           [=](benchmark::State& s) { run_kq(s, type, n, 1, threads, isa, true, true); })
                  ->UseRealTime()
                  ->Unit(benchmark::kMicrosecond);
            }
            // Cache-warm GEMV: weights L3-resident (n) and L2-resident (n/4):
            // the kernel's compute ceiling.
            for (int64_t nh : {n, n / 4}) {
              const std::string hs = format::ggml_type_name(type) + "/" + std::to_string(nh);
              benchmark::RegisterBenchmark(("kq_gemv_hot/" + hs + suffix).c_str(),
                                           [=](benchmark::State& s) { run_kq(s, type, nh, 1, threads, isa, false); })
                  ->UseRealTime()
                  ->Unit(benchmark::kMicrosecond);
              if (matmul_kernel(type, isa)->repack) {
                benchmark::RegisterBenchmark(
                    ("kq_gemv_hot_packed/" + hs + suffix).c_str(),
                    [=](benchmark::State& s) { run_kq(s, type, nh, 1, threads, isa, false, true); })
                    ->UseRealTime()
                    ->Unit(benchmark::kMicrosecond);
              }
            }
            for (int64_t m : {64, 512}) {
              benchmark::RegisterBenchmark(("kq_gemm/" + shape + "/m:" + std::to_string(m) + suffix).c_str(),
                                           [=](benchmark::State& s) { run_kq(s, type, n, m, threads, isa, false); })
                  ->UseRealTime()
                  ->Unit(benchmark::kMillisecond);
              if (matmul_kernel(type, isa)->repack) {
                benchmark::RegisterBenchmark(
                    ("kq_gemm_packed/" + shape + "/m:" + std::to_string(m) + suffix).c_str(),
                    [=](benchmark::State& s) { run_kq(s, type, n, m, threads, isa, false, true); })
                    ->UseRealTime()
                    ->Unit(benchmark::kMillisecond);
              }
            }
          }
        }
      }
    }
  }
};

const Registrar kRegistrar;

}  // namespace
}  // namespace chimera::kernels
