// Mamba-2 prefill scan: chunked SSD (kernels::ssd_chunked) against the
// sequential recurrence (kernels::ssm_scan2) at the real checkpoint shapes
// (head_dim P = 64, d_state N = 128, n_groups G = 1):
//   heads 64: granite-4.0-h-micro and mamba2-1.3b (d_inner 4096)
//   heads 48: granite-4.0-h-tiny (d_inner 3072)
// Inputs use the mixer's real strides (x, B, C inside one [T][d_inner + 2GN]
// xBC buffer, as mamba2_forward passes them) and realistic decays. Heads are
// split over the thread pool exactly as layers/mamba2.cpp does.
// Args: T, heads, threads, chunk (0 = the sequential scan). Reports tokens/s.
// Also the prefill's causal conv1d (BM_Mamba2Conv1d, below) and the decode
// step's scan over 1 or 8 sequences' states (BM_Mamba2DecodeScan).
//
//   build/bench/chimera_bench --benchmark_filter='Mamba2Scan|Mamba2Conv1d|Mamba2DecodeScan'
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ssm.h"
#include "layers/mamba.h"

namespace chimera::kernels {
namespace {

struct Mamba2ScanInputs {
  int64_t T, H, P = 64, N = 128, G = 1, CD;
  std::vector<float> xbc, dt, bias, A, D, state, y;
  Mamba2ScanInputs(int64_t T_, int64_t H_) : T(T_), H(H_) {
    CD = H * P + 2 * G * N;
    std::mt19937 rng(11);
    auto fill = [&](std::vector<float>& v, size_t n, float lo, float hi) {
      std::uniform_real_distribution<float> u(lo, hi);
      v.resize(n);
      for (auto& e : v) e = u(rng);
    };
    fill(xbc, (size_t)(T * CD), -1.f, 1.f);
    fill(dt, (size_t)(T * H), -4.f, 1.f);
    fill(bias, (size_t)H, -1.f, 1.f);
    fill(A, (size_t)H, -3.f, -0.05f);
    fill(D, (size_t)H, -1.f, 1.f);
    state.assign((size_t)(H * P * N), 0.f);
    y.assign((size_t)(T * H * P), 0.f);
  }
  Scan2Args args() {
    Scan2Args a;
    a.T = T, a.H = H, a.P = P, a.N = N, a.G = G;
    a.x = xbc.data(), a.ldx = CD, a.dt = dt.data(), a.lddt = H, a.dt_bias = bias.data(), a.A = A.data();
    a.B = xbc.data() + H * P, a.C = a.B + G * N, a.ldbc = CD, a.d_skip = D.data();
    a.state = state.data(), a.y = y.data(), a.ldy = H * P;
    return a;
  }
};

ThreadPool& scan_pool(int threads) {
  static ThreadPool p1(1), p2(2);
  return threads <= 1 ? p1 : p2;
}

void BM_Mamba2Scan(benchmark::State& st) {
  const int64_t T = st.range(0), H = st.range(1), chunk = st.range(3);
  ThreadPool& pool = scan_pool((int)st.range(2));
  Mamba2ScanInputs in(T, H);
  const Scan2Args a = in.args();
  for (auto _ : st) {
    parallel_range(&pool, H, 1, [&](int64_t h0, int64_t h1) {
      if (chunk > 0)
        ssd_chunked(a, chunk, h0, h1);
      else
        ssm_scan2(a, h0, h1);
    });
    benchmark::DoNotOptimize(in.y.data());
  }
  st.counters["tok/s"] = benchmark::Counter((double)st.iterations() * (double)T, benchmark::Counter::kIsRate);
}

void Mamba2ScanArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"T", "heads", "threads", "chunk"});
  // Short prompts: where the chunked form starts to pay (layers/mamba2.h ssd_min_tokens).
  for (int64_t T : {8, 16, 32, 128})
    for (int64_t chunk : {0, 64}) b->Args({T, 64, 1, chunk});
  for (int64_t T : {512, 2048, 8192})
    for (int64_t H : {64, 48})
      for (int64_t th : {1, 2})
        for (int64_t chunk : {0, 64, 128}) b->Args({T, H, th, chunk});
}
BENCHMARK(BM_Mamba2Scan)->Apply(Mamba2ScanArgs)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);

// The decode step's scan at serving scale: one token (T = 1) for each of S
// sequences through 8 layers of mamba2-1.3b (64 heads, P = 64, N = 128), each
// sequence and layer with its own 2 MiB state, as mamba2_forward_segments runs
// it (per layer one pool job over the heads, each thread taking its heads of
// every sequence). At S = 8 the 128 MiB of state exceed the L3 and every step
// reads and writes them from DRAM; "state GB/s" counts both directions (compare
// a plain read-modify-write pass over the same bytes). Args: S, threads.
void BM_Mamba2DecodeScan(benchmark::State& st) {
  const int64_t S = st.range(0), L = 8, H = 64;
  ThreadPool& pool = scan_pool((int)st.range(1));
  std::vector<Mamba2ScanInputs> seq;
  for (int64_t i = 0; i < S; ++i) seq.emplace_back(1, H);
  std::vector<std::vector<float>> states((size_t)(S * L));
  for (auto& v : states) v.assign(seq[0].state.size(), 0.25f);
  for (auto _ : st) {
    for (int64_t l = 0; l < L; ++l) {
      parallel_range(&pool, H, 1, [&](int64_t h0, int64_t h1) {
        for (int64_t i = 0; i < S; ++i) {
          Scan2Args a = seq[(size_t)i].args();
          a.state = states[(size_t)(l * S + i)].data();
          ssm_scan2(a, h0, h1);
        }
      });
    }
    benchmark::DoNotOptimize(seq[0].y.data());
  }
  const double bytes = 2.0 * (double)(S * L) * (double)seq[0].state.size() * sizeof(float);
  st.counters["state GB/s"] = benchmark::Counter((double)st.iterations() * bytes / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Mamba2DecodeScan)
    ->ArgNames({"seqs", "threads"})
    ->ArgsProduct({{1, 8}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

// Causal conv1d + SiLU of a prefill at mamba2-1.3b's shapes: xBC (C = 4352
// channels) read in place from the in-projection output (row stride d_in_proj
// = 8512), K = 4 taps, all channels on one thread. Args: T. Reports tokens/s.
void BM_Mamba2Conv1d(benchmark::State& st) {
  const int64_t T = st.range(0), C = 4352, ldx = 8512, K = 4;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x((size_t)(T * ldx)), w((size_t)(K * C)), b((size_t)C), state((size_t)((K - 1) * C));
  std::vector<float> y((size_t)(T * C));
  for (auto* v : {&x, &w, &b, &state})
    for (float& e : *v) e = u(rng);
  for (auto _ : st) {
    conv1d_causal(x.data(), ldx, T, w.data(), b.data(), C, K, state.data(), y.data(), C, true, 0, C);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["tok/s"] = benchmark::Counter((double)st.iterations() * (double)T, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Mamba2Conv1d)->ArgName("T")->Arg(256)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);

}  // namespace
}  // namespace chimera::kernels
