// MoE block decode (one token) at Phi-tiny-MoE's shapes: n_embd 4096, expert
// ff 448, 16 experts, sparsemixer top-2, Q4_K gate/up and Q8_0 down (448 is
// not a multiple of 256, so Q4_K_M falls back there). Arg 0: per-expert matmuls (3 pool jobs per selected expert);
// arg 1: the fused path (gate+up of both experts as one job, downs as one).
// One expert is quantized and its bytes copied to all 16 slots, so the block
// reads 16 distinct experts' worth of memory as a real layer does. Each
// iteration routes a different token, so the selected experts change.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "layers/moe.h"
#include "models/synth/synth.h"

namespace {

using namespace chimera;

struct MoeFixture {
  static constexpr int64_t d = 4096, ff = 448, E = 16, kTokens = 64;
  std::vector<uint8_t> gate, up, down;
  std::vector<float> router, x;
  layers::MoeConfig c;
  layers::MoeWeights w;

  static layers::ExpertTensor quantize(format::GgmlType type, int64_t rows, int64_t cols, std::vector<uint8_t>& buf,
                                       std::mt19937& rng) {
    std::normal_distribution<float> nd(0.f, 0.02f);
    std::vector<float> f((size_t)(rows * cols));
    for (float& v : f) v = nd(rng);
    const size_t row_bytes = format::ggml_row_size(type, cols), one = row_bytes * (size_t)rows;
    buf.resize(one * (size_t)E);
    (void)models::synth::encode_values(type, f.data(), rows * cols, buf.data());
    for (int64_t e = 1; e < E; ++e) std::copy(buf.begin(), buf.begin() + (ptrdiff_t)one, buf.begin() + (ptrdiff_t)(one * e));
    layers::ExpertTensor t;
    t.base = {type, buf.data(), rows, cols, row_bytes};
    t.n_expert = E;
    t.expert_bytes = one;
    return t;
  }

  MoeFixture() {
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 1.f);
    router.resize((size_t)(E * d));
    for (float& v : router) v = nd(rng);
    x.resize((size_t)(kTokens * d));
    for (float& v : x) v = nd(rng);
    c.n_embd = d;
    c.n_ff = ff;
    c.routing.kind = layers::MoeRouting::kSparseMixer;
    c.routing.n_expert = E;
    c.routing.k = 2;
    w.router.w = {format::GgmlType::F32, router.data(), E, d, (size_t)d * 4};
    w.gate = quantize(format::GgmlType::Q4_K, ff, d, gate, rng);
    w.up = quantize(format::GgmlType::Q4_K, ff, d, up, rng);
    w.down = quantize(format::GgmlType::Q8_0, d, ff, down, rng);  // 448 is not a multiple of 256: llama.cpp falls back from K-quants
  }
};

void BM_MoeDecode(benchmark::State& state) {
  static MoeFixture f;
  ThreadPool pool((int)state.range(1));
  layers::MoeScratch s;
  s.fused_max_rows = state.range(0) ? 16 : 0;
  s.reserve(f.c, 1);
  std::vector<float> out((size_t)f.d);
  int64_t t = 0;
  for (auto _ : state) {
    layers::moe_forward(f.c, f.w, f.x.data() + (t % MoeFixture::kTokens) * f.d, 1, s, out.data(), &pool);
    benchmark::DoNotOptimize(out.data());
    ++t;
  }
  // Bytes of the two selected experts read per token.
  state.SetBytesProcessed(state.iterations() * (int64_t)(2 * f.w.expert_bytes()));
}
BENCHMARK(BM_MoeDecode)->ArgNames({"fused", "threads"})->Args({0, 1})->Args({1, 1})->Args({0, 2})->Args({1, 2})
    ->UseRealTime();

}  // namespace
