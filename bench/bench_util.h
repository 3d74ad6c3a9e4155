// Shared pieces of the matmul micro-benchmarks: weight copies that stream
// from DRAM (enough of them to exceed the caches when `cold`) and the timed
// matmul loop that reports weight bytes/s and GFLOP/s.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "core/memory.h"
#include "core/thread_pool.h"
#include "kernels/repack.h"
#include "format/gguf/ggml_types.h"
#include "kernels/matmul.h"
#include "quant/quantize_model.h"

namespace chimera::bench {

// Total weight bytes a cold benchmark cycles through: several times the L3
// (server parts report up to ~100 MiB of it; at 128 MiB a part of every pass
// still hit the cache and GEMVs read "faster" than membw_read).
// CHIMERA_BENCH_COLD_MIB overrides it (e.g. 128 on a busy machine, where
// copying and repacking 512 MiB per benchmark takes minutes; still 4x the L3
// of one Zen 5 CCD).
constexpr size_t kColdBytes = size_t{512} << 20;
inline size_t cold_bytes() {
  const char* e = std::getenv("CHIMERA_BENCH_COLD_MIB");
  const long mib = e ? std::atol(e) : 0;
  return mib > 0 ? (size_t)mib << 20 : kColdBytes;
}

struct WeightSet {
  std::vector<AlignedBuffer<uint8_t>> copies;
  std::vector<kernels::WeightView> views;
};

// Copies of a rows x cols tensor of `type` (cols = the dot length): one when
// warm, enough for kColdBytes when cold. fill(c, data) writes copy c's bytes
// (the whole tensor, tails such as I2_S's scale included; zeroed before).
inline WeightSet make_weight_copies(format::GgmlType type, int64_t rows, int64_t cols, bool cold,
                                    const std::function<void(size_t, uint8_t*)>& fill) {
  const size_t row_bytes = format::ggml_row_size(type, cols);
  const size_t bytes = format::ggml_tensor_size(type, cols, rows);
  const size_t count = cold ? std::max<size_t>(1, (cold_bytes() + bytes - 1) / bytes) : 1;
  WeightSet s;
  s.copies.resize(count);
  for (size_t c = 0; c < count; ++c) {
    s.copies[c].resize(bytes);
    std::fill(s.copies[c].data(), s.copies[c].data() + bytes, uint8_t{0});
    fill(c, s.copies[c].data());
    s.views.push_back(kernels::WeightView{type, s.copies[c].data(), rows, cols, row_bytes});
  }
  return s;
}

// Repacks every copy of `w` at "load" (kernels/repack.h) as a model's weights
// are, into `packs`; false (and the benchmark skipped with that reason) where
// the active ISA has no repacking kernel for the type.
inline bool pack_all(WeightSet& w, kernels::PackedWeights& packs, benchmark::State& state) {
  for (kernels::WeightView& v : w.views) {
    if (!packs.pack(v)) {
      state.SkipWithError("no repacking kernel for this type/ISA");
      return false;
    }
  }
  return true;
}

// Runs y = W x with m activation rows over the copies in turn (a new copy per
// call, so cold weights come from DRAM).
inline void time_matmul(benchmark::State& state, const WeightSet& w, int64_t m, ThreadPool& pool) {
  const kernels::WeightView& v0 = w.views[0];
  std::vector<float> x((size_t)(m * v0.cols)), y((size_t)(m * v0.rows));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& v : x) v = u(rng);
  size_t at = 0;
  for (auto _ : state) {
    kernels::matmul(w.views[at], x.data(), m, v0.cols, y.data(), v0.rows, &pool);
    benchmark::DoNotOptimize(y.data());
    at = (at + 1) % w.views.size();
  }
  const double flops = 2.0 * (double)v0.rows * (double)v0.cols * (double)m;
  state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(v0.row_bytes * (size_t)v0.rows));
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * (double)state.iterations(), benchmark::Counter::kIsRate);
}

// Writes `rows` quantized rows of `type` from float rows (row_bytes apart).
using QuantizeRows = void (*)(format::GgmlType type, const float* x, uint8_t* out, int64_t rows, int64_t cols,
                              size_t row_bytes);

// The engine's own encoders (quant::encode_rows: the reference quantizers) as a QuantizeRows.
inline void encode_reference_rows(format::GgmlType type, const float* x, uint8_t* out, int64_t rows, int64_t cols,
                                  size_t /*row_bytes*/) {
  if (Status s = quant::encode_rows(type, x, rows, cols, out, nullptr); !s) {
    std::fprintf(stderr, "bench: %s\n", s.message().c_str());
    std::abort();
  }
}

// Random N(0, 0.05) weights; quantizing is slow, so 64 rows are quantized once
// and tiled (shifted by one row per copy so copies differ).
inline WeightSet make_quantized_weights(format::GgmlType type, int64_t rows, int64_t cols, bool cold,
                                        QuantizeRows quantize = encode_reference_rows) {
  const size_t row_bytes = format::ggml_row_size(type, cols);
  const int64_t base_rows = std::min<int64_t>(64, rows);
  std::vector<float> src((size_t)(base_rows * cols));
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.f, 0.05f);
  for (float& v : src) v = nd(rng);
  std::vector<uint8_t> base((size_t)base_rows * row_bytes, 0);
  quantize(type, src.data(), base.data(), base_rows, cols, row_bytes);
  return make_weight_copies(type, rows, cols, cold, [&](size_t c, uint8_t* data) {
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(base.data() + (size_t)((r + (int64_t)c) % base_rows) * row_bytes, row_bytes,
                  data + (size_t)r * row_bytes);
  });
}

}  // namespace chimera::bench
