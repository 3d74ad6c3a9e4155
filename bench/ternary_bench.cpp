// Ternary matmul micro-benchmarks (TQ2_0, TQ1_0, I2_S weights x Q8_K
// activations) at the BitNet b1.58 2B-4T shapes, with F16 / Q4_K GEMVs of the
// same shape as reference points. GEMV (m = 1, decode) reports weight bytes/s
// and cycles through >= 128 MiB of weight copies so every call reads DRAM —
// compare with membw_read (matmul_bench.cpp). GEMM (prefill, m = 64; packed
// also m = 256, a -p 256 prompt) reports
// GFLOP/s on cache-warm weights. Names look like
//   tq_gemv/TQ2_0/6912x2560/threads:1/isa:avx512vnni
//   tq_gemm/TQ2_0/2560x2560/m:64/threads:2/isa:avx2
//   tq_gemv_packed/... : the same on load-time repacked weights (kernels whose
//   table entry repacks), copies packed like a model load does;
//   tq_gemv_hot/..., tq_gemv_hot_packed/...: cache-warm (the compute ceiling).
//   tq_gemm_packed_cold/.../m:256/...: the m = 256 GEMM on cold copies (weights
//   read from DRAM, as in a model's prefill).
//   tq_smallm/TQ2_0/2560x6912/m:8/threads:1/isa:avx512vnni : the small-m GEMMs
//   of batched decode (m = 1, 2, 4, 8, 16; repacked weights, cold copies as
//   in a model step), TQ2_0 / TQ1_0, 1 thread, AVX2 and AVX-512 VNNI; compare
//   the CPU time of m = 8 with m = 1.
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
#include "kernels/repack.h"
#include "kernels/type_traits.h"
#include "quant/i2s.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

// I2_S codes (the tensor scale is appended after all rows by run()); other types
// go through the engine's reference encoders.
void quantize_rows(GgmlType t, const float* x, uint8_t* out, int64_t rows, int64_t k, size_t row_bytes) {
  if (t != GgmlType::I2_S) return bench::encode_reference_rows(t, x, out, rows, k, row_bytes);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const float v = x[r * k + j];
      q::i2s_set_code(out + (size_t)r * row_bytes, j, v > 0.02f ? 2 : v < -0.02f ? 0 : 1);
    }
}

void run(benchmark::State& state, GgmlType type, int64_t rows, int64_t cols, int64_t m, int threads, Isa isa,
         bool cold, bool packed = false) {
  ScopedIsa scoped(isa);
  ThreadPool pool(threads);
  bench::WeightSet w = bench::make_quantized_weights(type, rows, cols, cold, quantize_rows);
  if (type == GgmlType::I2_S) {  // the tensor scale follows the packed rows
    const float scale = 0.05f;
    for (auto& c : w.copies) std::memcpy(c.data() + format::ggml_row_size(type, cols) * (size_t)rows, &scale, 4);
  }
  PackedWeights packs;  // load-time repacked copies (kernels/repack.h)
  if (packed && !bench::pack_all(w, packs, state)) return;
  bench::time_matmul(state, w, m, pool);
}

struct Registrar {
  Registrar() {
    for (Isa isa : available_isas()) {
      if (isa != Isa::kAvx2 && isa != Isa::kAvx512Vnni) continue;
      for (GgmlType type : {GgmlType::TQ2_0, GgmlType::TQ1_0}) {
        if (!kernels::matmul_kernel(type, isa)->repack) continue;
        for (const auto& sh : {std::pair<int64_t, int64_t>{6912, 2560}, {2560, 6912}}) {
          for (int64_t m : {1, 2, 4, 8, 16}) {
            const std::string name = "tq_smallm/" + format::ggml_type_name(type) + "/" + std::to_string(sh.first) +
                                     "x" + std::to_string(sh.second) + "/m:" + std::to_string(m) +
                                     "/threads:1/isa:" + isa_name(isa);
            benchmark::RegisterBenchmark(name.c_str(),
                                         [=](benchmark::State& s) {
                                           run(s, type, sh.first, sh.second, m, 1, isa, true, true);
                                         })
                ->Unit(benchmark::kMicrosecond);
          }
        }
      }
    }
    const GgmlType types[] = {GgmlType::TQ2_0, GgmlType::TQ1_0, GgmlType::I2_S, GgmlType::Q4_K, GgmlType::F16};
    // BitNet b1.58 2B-4T: q/o 2560x2560, gate/up 6912x2560, down 2560x6912, k/v 640x2560.
    const int64_t shapes[][2] = {{2560, 2560}, {6912, 2560}, {2560, 6912}, {640, 2560}};
    for (Isa isa : available_isas()) {
      const std::string is = std::string("/isa:") + isa_name(isa);
      for (GgmlType type : types) {
        const bool ternary = type == GgmlType::TQ2_0 || type == GgmlType::TQ1_0 || type == GgmlType::I2_S;
        for (int threads : {1, 2}) {
          const std::string suffix = "/threads:" + std::to_string(threads) + is;
          for (const auto& sh : shapes) {
            if (!ternary && sh[0] != 6912) continue;
            const int64_t rows = sh[0], cols = sh[1];
            const std::string shape =
                format::ggml_type_name(type) + "/" + std::to_string(rows) + "x" + std::to_string(cols);
            benchmark::RegisterBenchmark(("tq_gemv/" + shape + suffix).c_str(),
                                         [=](benchmark::State& s) { run(s, type, rows, cols, 1, threads, isa, true); })
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
            if (ternary) {
              if (kernels::matmul_kernel(type, isa)->repack) {
                benchmark::RegisterBenchmark(
                    ("tq_gemv_packed/" + shape + suffix).c_str(),
                    [=](benchmark::State& s) { run(s, type, rows, cols, 1, threads, isa, true, true); })
                    ->UseRealTime()
                    ->Unit(benchmark::kMicrosecond);
                for (int64_t m : {64, 256}) {
                  benchmark::RegisterBenchmark(
                      ("tq_gemm_packed/" + shape + "/m:" + std::to_string(m) + suffix).c_str(),
                      [=](benchmark::State& s) { run(s, type, rows, cols, m, threads, isa, false, true); })
                      ->UseRealTime()
                      ->Unit(benchmark::kMillisecond);
                }
                // A prefill GEMM as in a model: the weights come from DRAM.
                benchmark::RegisterBenchmark(
                    ("tq_gemm_packed_cold/" + shape + "/m:256" + suffix).c_str(),
                    [=](benchmark::State& s) { run(s, type, rows, cols, 256, threads, isa, true, true); })
                    ->UseRealTime()
                    ->Unit(benchmark::kMillisecond);
              }
              if (kernels::matmul_kernel(type, isa)->repack) {
                benchmark::RegisterBenchmark(
                    ("tq_gemv_hot_packed/" + shape + suffix).c_str(),
                    [=](benchmark::State& s) { run(s, type, rows, cols, 1, threads, isa, false, true); })
                    ->UseRealTime()
                    ->Unit(benchmark::kMicrosecond);
              }
              benchmark::RegisterBenchmark(
                  ("tq_gemv_hot/" + shape + suffix).c_str(),
                  [=](benchmark::State& s) { run(s, type, rows, cols, 1, threads, isa, false); })
                  ->UseRealTime()
                  ->Unit(benchmark::kMicrosecond);
              benchmark::RegisterBenchmark(
                  ("tq_gemm/" + shape + "/m:64" + suffix).c_str(),
                  [=](benchmark::State& s) { run(s, type, rows, cols, 64, threads, isa, false); })
                  ->UseRealTime()
                  ->Unit(benchmark::kMillisecond);
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
