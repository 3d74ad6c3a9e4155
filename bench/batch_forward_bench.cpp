// Fused multi-sequence decode (Context::forward_batch) vs one forward() per
// sequence, on a real GGUF: $CHIMERA_BENCH_MODEL (skipped when unset), e.g. a
// `chimera synth` file. Each iteration is one decode step (1 token) of
// range(0) sequences that already hold a 64-token prefix; arg 1 selects the
// fused call (0 = per-sequence loop), arg 2 the threads (1: no pool); 50
// steps each (the states hold 4096 positions). Single-threaded, the ratio of
// the two is the weight-streaming saving. $CHIMERA_BENCH_STEPS overrides the
// 50 steps (e.g. 200 for a `perf record -D <setup ms>` profile of the loop).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "models/context.h"
#include "models/model.h"
#include "runtime/diffusion_model.h"

namespace {

using namespace chimera;

models::Model* bench_model() {
  static std::unique_ptr<models::Model> m = [] {
    const char* p = std::getenv("CHIMERA_BENCH_MODEL");
    if (!p) return std::unique_ptr<models::Model>();
    auto r = models::load_model(p);
    return r.is_ok() ? std::move(r).value() : std::unique_ptr<models::Model>();
  }();
  return m.get();
}

// $CHIMERA_BENCH_STEPS, or 50; a value outside [1, 4000] (the states hold
// 4096 positions after the 64-token prefix) is refused.
int64_t bench_steps() {
  const char* p = std::getenv("CHIMERA_BENCH_STEPS");
  if (!p) return 50;
  char* end = nullptr;
  const long v = std::strtol(p, &end, 10);
  if (end == p || *end != '\0' || v < 1 || v > 4000) {
    std::fprintf(stderr, "CHIMERA_BENCH_STEPS must be an integer in [1, 4000] (got '%s')\n", p);
    std::exit(2);
  }
  return v;
}

void BM_DecodeStep(benchmark::State& state) {
  models::Model* m = bench_model();
  if (!m) {
    state.SkipWithError("set CHIMERA_BENCH_MODEL to a GGUF");
    return;
  }
  const int64_t n_seq = state.range(0);
  const bool fused = state.range(1) != 0;
  std::unique_ptr<ThreadPool> tp = state.range(2) > 1 ? std::make_unique<ThreadPool>((int)state.range(2)) : nullptr;
  ThreadPool* pool = tp.get();
  const int64_t nv = m->info().n_vocab;
  models::Context ctx = m->new_context();
  std::vector<std::unique_ptr<layers::SequenceState>> st;
  std::vector<int32_t> prefix(64);
  std::vector<int32_t> tok((size_t)n_seq);
  for (int64_t i = 0; i < n_seq; ++i) {
    for (size_t j = 0; j < prefix.size(); ++j) prefix[j] = (int32_t)((j * 7919 + (size_t)i * 104729 + 3) % (size_t)nv);
    tok[(size_t)i] = (int32_t)(((size_t)i * 15485863 + 1) % (size_t)nv);
    st.push_back(ctx.new_state(4096));
    (void)ctx.forward(*st.back(), prefix.data(), (int64_t)prefix.size(), models::Logits::kNone, nullptr, nullptr);
  }
  std::vector<float> logits((size_t)(n_seq * nv));
  for (auto _ : state) {
    if (fused) {
      std::vector<models::BatchItem> items;
      for (int64_t i = 0; i < n_seq; ++i)
        items.push_back({st[(size_t)i].get(), &tok[(size_t)i], 1, models::Logits::kLast, logits.data() + i * nv});
      (void)ctx.forward_batch(items, pool);
    } else {
      for (int64_t i = 0; i < n_seq; ++i)
        (void)ctx.forward(*st[(size_t)i], &tok[(size_t)i], 1, models::Logits::kLast, logits.data() + i * nv, pool);
    }
  }
  state.counters["tok/s"] = benchmark::Counter((double)(state.iterations() * n_seq), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeStep)
    ->Args({1, 1, 1})
    ->Args({8, 1, 1})
    ->Args({4, 0, 1})
    ->Args({4, 1, 1})
    ->Args({16, 0, 1})
    ->Args({16, 1, 1})
    ->Args({1, 1, 2})
    ->Args({8, 1, 2})
    ->Args({4, 0, 2})
    ->Args({4, 1, 2})
    ->Iterations(bench_steps())
    ->Unit(benchmark::kMillisecond);

// Diffusion (a llada / dream $CHIMERA_BENCH_MODEL): one denoising step of
// range(0) canvases of 16 prompt + 32 generated positions (the serving
// benchmark's shape), as one models::diffusion_forward_batch (arg 1 = 1, what
// the server runs) or one call per canvas (0); arg 2 threads; arg 3 the step:
// 0 = exact (full pass, 16 masked rows' logits), 1 = dual cache (the 8-row
// block against cached K/V, 8 rows' logits). tok/s counts canvases (one
// request-step each).
void BM_DiffusionStep(benchmark::State& state) {
  models::Model* m = bench_model();
  if (!m || !m->info().is_diffusion) {
    state.SkipWithError("set CHIMERA_BENCH_MODEL to a diffusion GGUF");
    return;
  }
  const int64_t n_seq = state.range(0), L = 48, P = 16;
  const bool fused = state.range(1) != 0;
  std::unique_ptr<ThreadPool> tp = state.range(2) > 1 ? std::make_unique<ThreadPool>((int)state.range(2)) : nullptr;
  ThreadPool* pool = tp.get();
  const bool dual = state.range(3) != 0;
  const int64_t nv = m->info().n_vocab;
  models::Context ctx = m->new_context();
  std::vector<std::unique_ptr<layers::SequenceState>> st;
  std::vector<int32_t> canvas((size_t)L, 1);
  for (int64_t i = 0; i < P; ++i) canvas[(size_t)i] = (int32_t)((i * 7919) % nv);
  for (int64_t i = 0; i < n_seq; ++i) {
    st.push_back(ctx.new_state(L));
    (void)models::diffusion_forward(ctx, *st.back(), canvas.data(), 0, L, L, 0, 0, nullptr, pool);
  }
  const int64_t pos0 = dual ? P + 8 : 0, T = dual ? 8 : L;
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < (dual ? 8 : 16); ++r) rows.push_back(dual ? r : P + 2 * r);
  std::vector<float> logits((size_t)(n_seq * (int64_t)rows.size() * nv));
  for (auto _ : state) {
    std::vector<models::DiffusionSlice> slices;
    for (int64_t i = 0; i < n_seq; ++i)
      slices.push_back({st[(size_t)i].get(), canvas.data() + pos0, pos0, T, L, rows,
                        logits.data() + i * (int64_t)rows.size() * nv});
    if (fused) {
      (void)models::diffusion_forward_batch(ctx, slices, pool);
    } else {
      for (const auto& sl : slices) (void)models::diffusion_forward_batch(ctx, {&sl, 1}, pool);
    }
  }
  state.counters["tok/s"] = benchmark::Counter((double)(state.iterations() * n_seq), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DiffusionStep)
    ->ArgsProduct({{1, 4, 8}, {0, 1}, {1, 2}, {0, 1}})
    ->Iterations(4)
    ->Unit(benchmark::kMillisecond);

}  // namespace
