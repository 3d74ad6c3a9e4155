// kernels::grouped_matmul (the fused decode path of the MoE block, q/k/v and
// gate/up) against separate kernels::matmul calls (a group of one task each):
// bit-identical for every weight type the MoE files use, odd row counts (not
// multiples of the 16-row grain), several activation row counts, shared and
// unshared packing, 1-3 threads and every ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/memory.h"
#include "core/thread_pool.h"
#include "format/gguf/ggml_types.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "layers/mlp.h"
#include "models/synth/synth.h"

namespace chimera::layers {
namespace {

using format::GgmlType;

struct Weights {
  std::vector<uint8_t> data;
  kernels::WeightView view;
};

Weights make_weights(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 0.5f);
  std::vector<float> f((size_t)(rows * cols));
  for (float& v : f) v = nd(rng);
  Weights w;
  w.view.type = type;
  w.view.rows = rows;
  w.view.cols = cols;
  w.view.row_bytes = format::ggml_row_size(type, cols);
  w.data.resize(w.view.row_bytes * (size_t)rows);
  EXPECT_TRUE(models::synth::encode_values(type, f.data(), rows * cols, w.data.data()).is_ok());
  w.view.data = w.data.data();
  return w;
}

struct Case {
  GgmlType type;
  int64_t cols;
};

class GroupedMatmul : public ::testing::TestWithParam<Case> {};

TEST_P(GroupedMatmul, MatchesSeparateMatmulsBitForBit) {
  const Case c = GetParam();
  std::mt19937 rng(11);
  // (rows, m, shares x with the previous task)
  const struct {
    int64_t rows, m;
    bool share;
  } shapes[] = {{37, 1, false}, {37, 1, true}, {5, 3, false}, {100, 2, false}, {100, 2, true}, {16, 1, false}, {1, 1, false}};
  std::vector<Weights> ws;
  std::vector<std::vector<float>> xs;
  for (const auto& s : shapes) {
    ws.push_back(make_weights(c.type, s.rows, c.cols, rng));
    if (!s.share || xs.empty()) {
      std::uniform_real_distribution<float> ud(-1.f, 1.f);
      std::vector<float> x((size_t)(s.m * (c.cols + 3)));
      for (float& v : x) v = ud(rng);
      xs.push_back(std::move(x));
    } else {
      xs.push_back(xs.back());
    }
  }
  for (kernels::Isa isa : kernels::available_isas()) {
    kernels::ScopedIsa scoped(isa);
    std::vector<std::vector<float>> want(ws.size());
    for (size_t t = 0; t < ws.size(); ++t) {
      want[t].assign((size_t)(shapes[t].m * (shapes[t].rows + 1)), -7.f);
      kernels::matmul(ws[t].view, xs[t].data(), shapes[t].m, c.cols + 3, want[t].data(), shapes[t].rows + 1, nullptr);
    }
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<std::vector<float>> got(ws.size());
      std::vector<kernels::GroupedMatmulTask> tasks;
      // Shared activations must be the same pointer for packing to be shared.
      const float* prev_x = nullptr;
      for (size_t t = 0; t < ws.size(); ++t) {
        got[t].assign(want[t].size(), -7.f);
        const float* x = shapes[t].share ? prev_x : xs[t].data();
        prev_x = x;
        tasks.push_back({ws[t].view, x, shapes[t].m, c.cols + 3, got[t].data(), shapes[t].rows + 1});
      }
      AlignedBuffer<uint8_t> scratch(kernels::grouped_matmul_scratch_bytes(tasks.data(), (int64_t)tasks.size()) + 1);
      kernels::grouped_matmul(tasks.data(), (int64_t)tasks.size(), scratch.data(), &pool, /*min_parallel_macs=*/0);
      for (size_t t = 0; t < ws.size(); ++t)
        for (size_t i = 0; i < want[t].size(); ++i)
          ASSERT_EQ(got[t][i], want[t][i]) << kernels::isa_name(isa) << " threads " << threads << " task " << t
                                           << " elem " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GroupedMatmul,
                         ::testing::Values(Case{GgmlType::F32, 72}, Case{GgmlType::F16, 72}, Case{GgmlType::Q8_0, 96},
                                           Case{GgmlType::Q4_K, 256}, Case{GgmlType::Q6_K, 512},
                                           Case{GgmlType::Q5_0, 64}));

TEST(GroupedMatmulScratch, SharedPackingCountsOnce) {
  std::mt19937 rng(5);
  Weights a = make_weights(GgmlType::Q8_0, 8, 64, rng), b = make_weights(GgmlType::Q8_0, 8, 64, rng);
  std::vector<float> x(64), y1(8), y2(8);
  kernels::GroupedMatmulTask t[2] = {{a.view, x.data(), 1, 64, y1.data(), 8}, {b.view, x.data(), 1, 64, y2.data(), 8}};
  const size_t shared = kernels::grouped_matmul_scratch_bytes(t, 2);
  std::vector<float> x2(64);
  t[1].x = x2.data();
  const size_t separate = kernels::grouped_matmul_scratch_bytes(t, 2);
  EXPECT_GT(shared, 0u);
  EXPECT_EQ(separate, 2 * shared);
}

}  // namespace
}  // namespace chimera::layers

// The gated MLP runs gate and up as one grouped job when neither has a bias:
// same bits as three separate matmuls plus silu_mul, any thread count.
namespace chimera::layers {
namespace {

TEST(GatedMlp, FusedGateUpMatchesSeparateMatmuls) {
  std::mt19937 rng(11);
  const int64_t d = 256, ff = 224;  // ff: odd multiple of 32 (Q8_0 down rows)
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::F16}) {
    Weights g = make_weights(type, ff, d, rng), u = make_weights(type, ff, d, rng);
    Weights dn = make_weights(type == GgmlType::Q4_K ? GgmlType::Q8_0 : type, d, ff, rng);
    GatedMlp m;
    m.gate.w = g.view;
    m.up.w = u.view;
    m.down.w = dn.view;
    for (int64_t T : {1, 7, 40}) {
      std::vector<float> x((size_t)(T * d));
      std::normal_distribution<float> nd(0.f, 1.f);
      for (float& v : x) v = nd(rng);
      std::vector<float> gv((size_t)(T * ff)), uv((size_t)(T * ff)), want((size_t)(T * d));
      kernels::matmul(g.view, x.data(), T, d, gv.data(), ff, nullptr);
      kernels::matmul(u.view, x.data(), T, d, uv.data(), ff, nullptr);
      for (size_t i = 0; i < gv.size(); ++i) gv[i] = gv[i] / (1.f + std::exp(-gv[i])) * uv[i];
      kernels::matmul(dn.view, gv.data(), T, ff, want.data(), d, nullptr);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        MlpScratch s;
        s.reserve(ff, T);
        std::vector<float> got((size_t)(T * d));
        gated_mlp_forward(m, x.data(), T, d, s, got.data(), &pool);
        float max_diff = 0;
        for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
        // silu_mul is a SIMD op here and a scalar loop above: allow its rounding only.
        EXPECT_LE(max_diff, 1e-3f) << format::ggml_type_name(type) << " T=" << T << " threads=" << threads;
        // Against the same call on one thread: bit-identical.
        ThreadPool one(1);
        MlpScratch s1;
        s1.reserve(ff, T);
        std::vector<float> ref((size_t)(T * d));
        gated_mlp_forward(m, x.data(), T, d, s1, ref.data(), &one);
        EXPECT_EQ(got, ref) << format::ggml_type_name(type) << " T=" << T << " threads=" << threads;
      }
    }
  }
}

}  // namespace
}  // namespace chimera::layers
