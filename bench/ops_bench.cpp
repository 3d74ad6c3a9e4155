// Micro-benchmarks for kernels/ops.h and kernels/attention.h on the active
// (best) ISA: attention decode over a long f32 KV cache (and f16 / Q8_0) and causal prefill,
// rms_norm, softmax, rope. Attention reports the KV bytes it must stream
// (bytes_per_second) and GFLOP/s (2 * 2 * head_dim per visible (query, key,
// head)); element-wise ops report the bytes they read and write.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/ops.h"

namespace chimera::kernels {
namespace {

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

ThreadPool& pool_for(int threads) {
  static ThreadPool p1(1), p2(2);
  return threads <= 1 ? p1 : p2;
}

// Args: n_kv, n_head_kv, threads. 32 query heads x head_dim 64, one query row.
void BM_AttentionDecode(benchmark::State& st) {
  const int64_t n_kv = st.range(0), n_head_kv = st.range(1), hd = 64, n_head = 32;
  const int threads = (int)st.range(2);
  AttentionParams p;
  p.n_head = n_head;
  p.n_head_kv = n_head_kv;
  p.head_dim = hd;
  p.scale = 0.125f;
  const auto q = random_vec(n_head * hd, 1);
  const auto k = random_vec(n_kv * n_head_kv * hd, 2);
  const auto v = random_vec(n_kv * n_head_kv * hd, 3);
  std::vector<float> out(n_head * hd);
  ThreadPool& pool = pool_for(threads);
  for (auto _ : st) {
    attention(p, q.data(), 1, n_head * hd, n_kv - 1, k.data(), n_head_kv * hd, v.data(), n_head_kv * hd, n_kv,
              out.data(), n_head * hd, &pool);
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(st.iterations() * 2 * n_kv * n_head_kv * hd * (int64_t)sizeof(float));
  st.counters["GFLOP/s"] = benchmark::Counter((double)st.iterations() * 4.0 * n_kv * n_head * hd,
                                              benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_AttentionDecode)
    ->ArgNames({"n_kv", "n_head_kv", "threads"})
    ->Args({512, 32, 1})
    ->Args({512, 32, 2})
    ->Args({4096, 32, 1})
    ->Args({4096, 32, 2})
    ->Args({4096, 8, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The same decode over a typed cache (--cache-type-k/-v): Args n_kv, type
// (0 f32, 1 f16, 2 q8_0, K and V alike), threads; llama-3.2-1b's heads (32
// query, 8 KV, 64 wide). Bytes: what the cache streams in its own type. CPU
// time is the process's (both threads), which a busy machine disturbs less
// than wall time.
void BM_AttentionDecodeTypedKv(benchmark::State& st) {
  const int64_t n_kv = st.range(0), n_head_kv = 8, hd = 64, n_head = 32, w = n_head_kv * hd;
  const KvType type = st.range(1) == 0 ? KvType::kF32 : st.range(1) == 1 ? KvType::kF16 : KvType::kQ8_0;
  const int threads = (int)st.range(2);
  AttentionParams p;
  p.n_head = n_head;
  p.n_head_kv = n_head_kv;
  p.head_dim = hd;
  p.scale = 0.125f;
  const auto q = random_vec(n_head * hd, 1);
  std::vector<float> k = random_vec(n_kv * w, 2), v = random_vec(n_kv * w, 3);
  const size_t rb = kv_row_bytes(type, w);
  std::vector<uint8_t> kb(rb * n_kv), vb(rb * n_kv);
  kv_store_rows(type, w, k.data(), w, n_kv, kb.data());
  kv_store_rows(type, w, v.data(), w, n_kv, vb.data());
  std::vector<float> out(n_head * hd);
  ThreadPool& pool = pool_for(threads);
  for (auto _ : st) {
    attention(p, q.data(), 1, n_head * hd, n_kv - 1, KvRows{kb.data(), w, type}, KvRows{vb.data(), w, type}, n_kv,
              out.data(), n_head * hd, &pool);
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(st.iterations() * 2 * n_kv * (int64_t)rb);
  st.SetLabel(kv_type_name(type));
}
BENCHMARK(BM_AttentionDecodeTypedKv)
    ->ArgNames({"n_kv", "type", "threads"})
    ->ArgsProduct({{8192, 32768}, {0, 1, 2}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// Args: n_q (= n_kv, causal from position 0), n_head_kv, threads.
void BM_AttentionPrefill(benchmark::State& st) {
  const int64_t n = st.range(0), n_head_kv = st.range(1), hd = 64, n_head = 32;
  const int threads = (int)st.range(2);
  AttentionParams p;
  p.n_head = n_head;
  p.n_head_kv = n_head_kv;
  p.head_dim = hd;
  p.scale = 0.125f;
  const auto q = random_vec(n * n_head * hd, 1);
  const auto k = random_vec(n * n_head_kv * hd, 2);
  const auto v = random_vec(n * n_head_kv * hd, 3);
  std::vector<float> out(n * n_head * hd);
  ThreadPool& pool = pool_for(threads);
  for (auto _ : st) {
    attention(p, q.data(), n, n_head * hd, 0, k.data(), n_head_kv * hd, v.data(), n_head_kv * hd, n, out.data(),
              n_head * hd, &pool);
    benchmark::DoNotOptimize(out.data());
  }
  const double visible = (double)n * (n + 1) / 2;
  st.counters["GFLOP/s"] = benchmark::Counter((double)st.iterations() * 4.0 * visible * n_head * hd,
                                              benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  st.counters["tok/s"] = benchmark::Counter((double)st.iterations() * n, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionPrefill)
    ->ArgNames({"n", "n_head_kv", "threads"})
    ->Args({512, 32, 1})
    ->Args({512, 32, 2})
    ->Args({512, 8, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_RmsNorm(benchmark::State& st) {
  const int64_t n = st.range(0);
  const auto x = random_vec(n, 1), w = random_vec(n, 2);
  std::vector<float> y(n);
  for (auto _ : st) {
    rms_norm(x.data(), w.data(), y.data(), n, 1e-6f);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(st.iterations() * 3 * n * (int64_t)sizeof(float));
}
BENCHMARK(BM_RmsNorm)->Arg(4096)->Arg(8192)->Arg(1 << 20);

void BM_Softmax(benchmark::State& st) {
  const int64_t n = st.range(0);
  auto x = random_vec(n, 1);
  for (auto _ : st) {
    softmax(x.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
  st.SetBytesProcessed(st.iterations() * 2 * n * (int64_t)sizeof(float));
}
BENCHMARK(BM_Softmax)->Arg(4096)->Arg(151936);

void BM_SiluMul(benchmark::State& st) {
  const int64_t n = st.range(0);
  const auto g = random_vec(n, 1), u = random_vec(n, 2);
  std::vector<float> out(n);
  for (auto _ : st) {
    silu_mul(g.data(), u.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(st.iterations() * 3 * n * (int64_t)sizeof(float));
}
BENCHMARK(BM_SiluMul)->Arg(14336);

// One token's Q (32 heads) and K (8 heads), head_dim 128, with one shared table.
void BM_Rope(benchmark::State& st) {
  RopeParams p;
  p.mode = st.range(0) ? RopeMode::kNeox : RopeMode::kNorm;
  p.n_rot = 128;
  p.freq_base = 500000.f;
  auto q = random_vec(32 * 128, 1), k = random_vec(8 * 128, 2);
  std::vector<float> cs(128);
  int64_t pos = 0;
  for (auto _ : st) {
    rope_cache(pos++, p, cs.data());
    rope_apply(q.data(), 32, 128, cs.data(), p);
    rope_apply(k.data(), 8, 128, cs.data(), p);
    benchmark::DoNotOptimize(q.data());
  }
}
BENCHMARK(BM_Rope)->ArgName("neox")->Arg(0)->Arg(1);

}  // namespace
}  // namespace chimera::kernels
