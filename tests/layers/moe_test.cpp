// MoE block: routing strategies against hand-computed results (sparsemixer
// including exact ties, near-ties on both sides of the 2·eps threshold,
// negative logits and the second mask's use of the original logits; softmax
// top-k with and without renormalisation), parameter validation, and the
// forward pass against a direct per-token double-precision reference on
// synthetic F32 experts (with and without a shared expert), bit-identical
// across batch sizes and thread counts, with the observer seeing every routing.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "layers/moe.h"
#include "models/synth/synth.h"

namespace chimera::layers {
namespace {

RoutingParams sparsemixer(int64_t n) {
  RoutingParams p;
  p.kind = MoeRouting::kSparseMixer;
  p.n_expert = n;
  p.k = 2;
  p.jitter_eps = 0.01f;
  return p;
}

struct Routed {
  int32_t e[8];
  float w[8];
};

Routed route(const std::vector<float>& s, const RoutingParams& p) {
  Routed r{};
  route_token(s.data(), p, r.e, r.w);
  return r;
}

// 1 / Σ_j exp(s_j - m) over the listed kept logits (hand formula, double).
float hand_weight(float m, std::initializer_list<float> kept) {
  double sum = 0;
  for (float v : kept) sum += std::exp((double)v - (double)m);
  return (float)(1.0 / sum);
}

TEST(SparseMixer, RunnerUpWithinThresholdSharesTheFirstWeight) {
  // m = 3: r(2.99) = 0.01/3 = 0.0033 <= 0.02 kept; 1.0 and 0.5 masked.
  // Second: m2 = 2.99, 1.0 and 0.5 masked, expert 1 excluded -> w2 = 1.
  Routed r = route({1.0f, 3.0f, 2.99f, 0.5f}, sparsemixer(4));
  EXPECT_EQ(r.e[0], 1);
  EXPECT_EQ(r.e[1], 2);
  EXPECT_NEAR(r.w[0], hand_weight(3.0f, {3.0f, 2.99f}), 1e-7);
  EXPECT_NEAR(r.w[0], 0.5024999f, 1e-6);
  EXPECT_FLOAT_EQ(r.w[1], 1.0f);
}

TEST(SparseMixer, ExactTieGoesToTheLowerIndex) {
  Routed r = route({2.f, 2.f, 1.f, 1.f}, sparsemixer(4));
  EXPECT_EQ(r.e[0], 0);
  EXPECT_EQ(r.e[1], 1);
  EXPECT_FLOAT_EQ(r.w[0], 0.5f);  // both 2's kept: 1 / (1 + 1)
  EXPECT_FLOAT_EQ(r.w[1], 1.0f);  // expert 0 excluded, the 1's are masked (r = 0.5)
  // Tie for second place.
  Routed r2 = route({0.f, 5.f, 1.f, 1.f}, sparsemixer(4));
  EXPECT_EQ(r2.e[0], 1);
  EXPECT_EQ(r2.e[1], 2);
  EXPECT_FLOAT_EQ(r2.w[0], 1.0f);
  EXPECT_FLOAT_EQ(r2.w[1], 0.5f);  // 1 and 1 kept under m2 = 1; 0 masked (r = 1)
}

TEST(SparseMixer, NearTiesOnBothSidesOfTheThreshold) {
  // r = (10 - 9.8f) / 10 = 0.019999981 (float) <= 0.02f: kept.
  Routed in = route({10.f, 9.8f, 0.f, 0.f}, sparsemixer(4));
  EXPECT_EQ(in.e[0], 0);
  EXPECT_NEAR(in.w[0], hand_weight(10.f, {10.f, 9.8f}), 1e-7);
  // r = 0.021 > 0.02: masked, the first expert takes weight 1.
  Routed out = route({10.f, 9.79f, 0.f, 0.f}, sparsemixer(4));
  EXPECT_EQ(out.e[0], 0);
  EXPECT_FLOAT_EQ(out.w[0], 1.0f);
  EXPECT_EQ(out.e[1], 1);
  EXPECT_FLOAT_EQ(out.w[1], 1.0f);
  // A router-logit gap of 1e-6 between first and second choice still picks the larger.
  Routed close = route({4.f, 4.000001f, 0.f, 0.f}, sparsemixer(4));
  EXPECT_EQ(close.e[0], 1);
  EXPECT_EQ(close.e[1], 0);
  EXPECT_NEAR(close.w[0], 0.5f, 1e-6);
  EXPECT_FLOAT_EQ(close.w[1], 1.0f);  // expert 1 excluded from the second softmax
}

TEST(SparseMixer, NegativeLogitsDivideByTheMagnitude) {
  // m = -1: factor = max(|s_j|, m) = |s_j|; r(-1.01) = 0.01/1.01 kept; -5, -3 masked.
  Routed r = route({-1.f, -1.01f, -5.f, -3.f}, sparsemixer(4));
  EXPECT_EQ(r.e[0], 0);
  EXPECT_EQ(r.e[1], 1);
  EXPECT_NEAR(r.w[0], hand_weight(-1.f, {-1.f, -1.01f}), 1e-7);
  EXPECT_FLOAT_EQ(r.w[1], 1.0f);
}

TEST(SparseMixer, SecondMaskUsesTheOriginalLogitsAndItsOwnMaximum) {
  // First: m = 5, factor max(|s_j|, m) = 5: r(4.93) = 0.014 kept, r(4.85) = 0.03 masked.
  // Second: m2 = 4.93 (expert 0 excluded): r(4.85) = 0.08/4.93 = 0.0162 kept, r(1) masked.
  Routed r = route({5.f, 4.93f, 4.85f, 1.f}, sparsemixer(4));
  EXPECT_EQ(r.e[0], 0);
  EXPECT_EQ(r.e[1], 1);
  EXPECT_NEAR(r.w[0], hand_weight(5.f, {5.f, 4.93f}), 1e-7);
  EXPECT_NEAR(r.w[1], hand_weight(4.93f, {4.93f, 4.85f}), 1e-7);
  // No renormalisation: the weights sum to more than 1.
  EXPECT_GT(r.w[0] + r.w[1], 1.0f);
  // Exactly on the threshold in float arithmetic: (5 - 4.9f) / 5 = 0.01999998 <= 0.02f, kept.
  Routed edge = route({5.f, 4.95f, 4.9f, 1.f}, sparsemixer(4));
  EXPECT_NEAR(edge.w[0], hand_weight(5.f, {5.f, 4.95f, 4.9f}), 1e-7);
}

TEST(SparseMixer, ZeroLogitsKeepEveryoneWithoutNaN) {
  // 0/0 is NaN, NaN > 2eps is false: kept (torch semantics) -> uniform weights.
  Routed r = route({0.f, 0.f, 0.f, 0.f}, sparsemixer(4));
  EXPECT_EQ(r.e[0], 0);
  EXPECT_EQ(r.e[1], 1);
  EXPECT_FLOAT_EQ(r.w[0], 0.25f);
  EXPECT_FLOAT_EQ(r.w[1], 1.f / 3.f);
}

TEST(SoftmaxTopK, WithAndWithoutRenormalisation) {
  RoutingParams p;
  p.kind = MoeRouting::kSoftmaxTopK;
  p.n_expert = 4;
  p.k = 2;
  const std::vector<float> s = {1.f, 2.f, 3.f, 0.f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + 1.0;
  Routed r = route(s, p);
  EXPECT_EQ(r.e[0], 2);
  EXPECT_EQ(r.e[1], 1);
  EXPECT_NEAR(r.w[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(r.w[1], std::exp(2.0) / z, 1e-6);
  p.renormalize = true;
  Routed n = route(s, p);
  EXPECT_NEAR(n.w[0], std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(n.w[0] + n.w[1], 1.0, 1e-6);
  // Ties: lowest index first.
  p.k = 3;
  Routed t = route({1.f, 1.f, 1.f, 1.f}, p);
  EXPECT_EQ(t.e[0], 0);
  EXPECT_EQ(t.e[1], 1);
  EXPECT_EQ(t.e[2], 2);
  EXPECT_NEAR(t.w[0], 1.f / 3.f, 1e-6);
}

TEST(Routing, ParameterValidation) {
  RoutingParams p = sparsemixer(4);
  EXPECT_TRUE(check_routing(p).is_ok());
  p.k = 3;
  EXPECT_FALSE(check_routing(p).is_ok());  // sparsemixer is top-2 only
  p.kind = MoeRouting::kSoftmaxTopK;
  EXPECT_TRUE(check_routing(p).is_ok());
  p.k = 5;
  EXPECT_FALSE(check_routing(p).is_ok());
  p.k = 0;
  EXPECT_FALSE(check_routing(p).is_ok());
  p.k = 1;
  p.n_expert = 0;
  EXPECT_FALSE(check_routing(p).is_ok());
}

// ---- forward pass on synthetic F32 experts

struct Synth {
  MoeConfig c;
  std::vector<float> router, gate, up, down, sg, su, sd;
  MoeWeights w;
};

kernels::WeightView view(const std::vector<float>& v, int64_t rows, int64_t cols) {
  kernels::WeightView w;
  w.type = format::GgmlType::F32;
  w.data = v.data();
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = (size_t)cols * 4;
  return w;
}

ExpertTensor experts_view(const std::vector<float>& v, int64_t rows, int64_t cols, int64_t E) {
  ExpertTensor t;
  t.base = view(v, rows, cols);
  t.n_expert = E;
  t.expert_bytes = (size_t)(rows * cols * 4);
  return t;
}

void fill(std::vector<float>& v, size_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  v.resize(n);
  for (float& x : v) x = u(rng);
}

std::unique_ptr<Synth> make_synth(MoeRouting kind, int64_t E, int64_t k, int64_t shexp) {
  auto s = std::make_unique<Synth>();
  std::mt19937 rng(42);
  const int64_t d = 24, ff = 40;
  s->c.n_embd = d;
  s->c.n_ff = ff;
  s->c.n_ff_shexp = shexp;
  s->c.routing.kind = kind;
  s->c.routing.n_expert = E;
  s->c.routing.k = k;
  fill(s->router, (size_t)(E * d), rng, 1.f);
  fill(s->gate, (size_t)(E * ff * d), rng, 0.3f);
  fill(s->up, (size_t)(E * ff * d), rng, 0.3f);
  fill(s->down, (size_t)(E * d * ff), rng, 0.3f);
  s->w.router.w = view(s->router, E, d);
  s->w.gate = experts_view(s->gate, ff, d, E);
  s->w.up = experts_view(s->up, ff, d, E);
  s->w.down = experts_view(s->down, d, ff, E);
  if (shexp > 0) {
    fill(s->sg, (size_t)(shexp * d), rng, 0.3f);
    fill(s->su, (size_t)(shexp * d), rng, 0.3f);
    fill(s->sd, (size_t)(d * shexp), rng, 0.3f);
    s->w.shexp.gate.w = view(s->sg, shexp, d);
    s->w.shexp.up.w = view(s->su, shexp, d);
    s->w.shexp.down.w = view(s->sd, d, shexp);
  }
  return s;
}

double silu(double x) { return x / (1 + std::exp(-x)); }

// out = Σ_j w_j E_j(x) (+ shared) computed directly in double.
std::vector<double> reference(const Synth& s, const float* x) {
  const int64_t d = s.c.n_embd, ff = s.c.n_ff, E = s.c.routing.n_expert, k = s.c.routing.k;
  std::vector<float> logits((size_t)E);
  for (int64_t e = 0; e < E; ++e) {
    double a = 0;
    for (int64_t i = 0; i < d; ++i) a += (double)s.router[(size_t)(e * d + i)] * x[i];
    logits[(size_t)e] = (float)a;
  }
  int32_t ex[8];
  float wt[8];
  route_token(logits.data(), s.c.routing, ex, wt);
  auto mlp = [&](const float* G, const float* U, const float* D, int64_t f, double w, std::vector<double>& out) {
    std::vector<double> hbuf((size_t)f);
    for (int64_t r = 0; r < f; ++r) {
      double g = 0, u = 0;
      for (int64_t i = 0; i < d; ++i) {
        g += (double)G[r * d + i] * x[i];
        u += (double)U[r * d + i] * x[i];
      }
      hbuf[(size_t)r] = silu(g) * u;
    }
    for (int64_t o = 0; o < d; ++o) {
      double a = 0;
      for (int64_t r = 0; r < f; ++r) a += (double)D[o * f + r] * hbuf[(size_t)r];
      out[(size_t)o] += w * a;
    }
  };
  std::vector<double> out((size_t)d, 0.0);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t e = ex[j];
    mlp(s.gate.data() + e * ff * d, s.up.data() + e * ff * d, s.down.data() + e * d * ff, ff, wt[j], out);
  }
  if (s.c.n_ff_shexp > 0) mlp(s.sg.data(), s.su.data(), s.sd.data(), s.c.n_ff_shexp, 1.0, out);
  return out;
}

struct CountingObserver : MoeObserver {
  int64_t calls = 0, rows = 0;
  std::vector<int64_t> per_expert;
  void on_routing(int64_t, int64_t n, int64_t k, int64_t E, const int32_t* e, const float*) override {
    ++calls;
    rows += n * k;
    per_expert.resize((size_t)E);
    for (int64_t i = 0; i < n * k; ++i) per_expert[(size_t)e[i]]++;
  }
};

void check_forward(MoeRouting kind, int64_t E, int64_t k, int64_t shexp) {
  auto s = make_synth(kind, E, k, shexp);
  const int64_t d = s->c.n_embd, T = 37;
  std::mt19937 rng(7);
  std::vector<float> x;
  fill(x, (size_t)(T * d), rng, 1.f);
  MoeScratch scratch;
  scratch.reserve(s->c, T);
  CountingObserver obs;
  std::vector<float> batch((size_t)(T * d));
  ThreadPool pool2(2);
  moe_forward(s->c, s->w, x.data(), T, scratch, batch.data(), &pool2, 0, &obs);
  EXPECT_EQ(obs.calls, 1);
  EXPECT_EQ(obs.rows, T * k);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> ref = reference(*s, x.data() + t * d);
    for (int64_t o = 0; o < d; ++o)
      ASSERT_NEAR(batch[(size_t)(t * d + o)], ref[(size_t)o], 1e-4 * (1 + std::fabs(ref[(size_t)o])))
          << "token " << t << " out " << o;
  }
  // Token by token, one thread, in-place (out aliases h): bit-identical to the batch.
  ThreadPool pool1(1);
  std::vector<float> step = x;
  for (int64_t t = 0; t < T; ++t)
    moe_forward(s->c, s->w, step.data() + t * d, 1, scratch, step.data() + t * d, &pool1, 0, nullptr);
  for (size_t i = 0; i < step.size(); ++i) ASSERT_EQ(step[i], batch[i]) << i;
  // Null pool works too.
  std::vector<float> nopool((size_t)(T * d));
  moe_forward(s->c, s->w, x.data(), T, scratch, nopool.data(), nullptr);
  for (size_t i = 0; i < nopool.size(); ++i) ASSERT_EQ(nopool[i], batch[i]) << i;
}

TEST(MoeForward, SparseMixerMatchesReferenceAndIsDeterministic) { check_forward(MoeRouting::kSparseMixer, 4, 2, 0); }
TEST(MoeForward, SoftmaxTopKWithSharedExpert) { check_forward(MoeRouting::kSoftmaxTopK, 8, 3, 32); }
TEST(MoeForward, SoftmaxTopOneOfMany) { check_forward(MoeRouting::kSoftmaxTopK, 16, 1, 0); }

TEST(MoeForward, RenormalisedWeightsSumToOne) {
  auto s = make_synth(MoeRouting::kSoftmaxTopK, 8, 2, 0);
  s->c.routing.renormalize = true;
  std::vector<float> x;
  std::mt19937 rng(3);
  fill(x, (size_t)(5 * s->c.n_embd), rng, 1.f);
  struct W : MoeObserver {
    std::vector<float> w;
    void on_routing(int64_t, int64_t n, int64_t k, int64_t, const int32_t*, const float* wt) override {
      w.assign(wt, wt + n * k);
    }
  } obs;
  MoeScratch scratch;
  scratch.reserve(s->c, 5);
  std::vector<float> out(x.size());
  moe_forward(s->c, s->w, x.data(), 5, scratch, out.data(), nullptr, 3, &obs);
  ASSERT_EQ(obs.w.size(), 10u);
  for (int t = 0; t < 5; ++t) EXPECT_NEAR(obs.w[2 * t] + obs.w[2 * t + 1], 1.f, 1e-6);
}

// An ExpertTensor view of buf: E experts, base `rows` x `cols` of `type`,
// buf.size() / E bytes apart.
ExpertTensor expert_tensor_over(const std::vector<uint8_t>& buf, format::GgmlType type, int64_t rows, int64_t cols,
                                int64_t E) {
  ExpertTensor t;
  t.base.type = type;
  t.base.data = buf.data();
  t.base.rows = rows;
  t.base.cols = cols;
  t.base.row_bytes = format::ggml_row_size(type, cols);
  t.n_expert = E;
  t.expert_bytes = buf.size() / (size_t)E;
  return t;
}

// The fused small-call path (decode: all selected experts' gate/up as one job,
// then all downs) against the per-expert path, on quantized experts (Q8_0
// gate/up, Q4_K down: different kernels in one block), every ISA, 1-3
// threads, 1-8 tokens: bit-identical outputs.
TEST(MoeForward, FusedSmallCallsMatchPerExpertPath) {
  const int64_t d = 256, ff = 256, E = 6;
  std::mt19937 rng(9);
  auto encode = [&](format::GgmlType type, int64_t rows, int64_t cols, std::vector<uint8_t>& buf) {
    std::vector<float> f;
    fill(f, (size_t)(rows * cols), rng, 0.2f);
    buf.resize(format::ggml_row_size(type, cols) * (size_t)rows);
    EXPECT_TRUE(models::synth::encode_values(type, f.data(), rows * cols, buf.data()).is_ok());
    return expert_tensor_over(buf, type, rows, cols, E);
  };
  std::vector<uint8_t> gb, ub, db;
  std::vector<float> router;
  fill(router, (size_t)(E * d), rng, 1.f);
  MoeConfig c;
  c.n_embd = d;
  c.n_ff = ff;
  c.routing = sparsemixer(E);
  MoeWeights w;
  w.router.w = view(router, E, d);
  w.gate = encode(format::GgmlType::Q8_0, E * ff, d, gb);
  w.up = encode(format::GgmlType::Q8_0, E * ff, d, ub);
  w.down = encode(format::GgmlType::Q4_K, E * d, ff, db);
  w.gate.base.rows = w.up.base.rows = ff;
  w.down.base.rows = d;
  const int64_t T = 8;
  std::vector<float> x;
  fill(x, (size_t)(T * d), rng, 1.f);
  MoeScratch fused, plain;
  fused.reserve(c, T);
  plain.fused_max_rows = 0;
  plain.reserve(c, T);
  for (kernels::Isa isa : kernels::available_isas()) {
    kernels::ScopedIsa scoped(isa);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (int64_t n : {1, 2, 5, 8}) {
        std::vector<float> a((size_t)(n * d)), b((size_t)(n * d));
        moe_forward(c, w, x.data(), n, plain, a.data(), &pool);
        moe_forward(c, w, x.data(), n, fused, b.data(), &pool);
        for (size_t i = 0; i < a.size(); ++i)
          ASSERT_EQ(a[i], b[i]) << kernels::isa_name(isa) << " threads " << threads << " T " << n << " i " << i;
      }
    }
  }
}

}  // namespace
}  // namespace chimera::layers

namespace chimera::layers {
namespace {

// The grouped path at prefill sizes: gathered rows split into chunks of at
// most fused_max_rows rows and 32 experts (40 experts force a split by the
// expert limit; a cap of 7 rows sends experts with more rows down the
// single-expert fallback; 1024 is the default, one or two chunks), odd token
// counts, every ISA, 1-3 threads: bit-identical to the per-expert path.
TEST(MoeForward, GroupedPrefillChunksMatchPerExpertPath) {
  const int64_t d = 256, ff = 256, E = 40;
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto encode = [&](format::GgmlType type, int64_t rows, int64_t cols, std::vector<uint8_t>& buf) {
    std::vector<float> f((size_t)(E * rows * cols));
    for (float& v : f) v = 0.2f * dist(rng);
    buf.resize(format::ggml_row_size(type, cols) * (size_t)(E * rows));
    EXPECT_TRUE(models::synth::encode_values(type, f.data(), E * rows * cols, buf.data()).is_ok());
    return expert_tensor_over(buf, type, rows, cols, E);
  };
  std::vector<uint8_t> gb, ub, db;
  std::vector<float> router((size_t)(E * d));
  for (float& v : router) v = dist(rng);
  MoeConfig c;
  c.n_embd = d;
  c.n_ff = ff;
  c.routing.kind = MoeRouting::kSoftmaxTopK;
  c.routing.n_expert = E;
  c.routing.k = 4;
  c.routing.renormalize = true;
  MoeWeights w;
  w.router.w = {format::GgmlType::F32, router.data(), E, d, (size_t)d * sizeof(float)};
  w.gate = encode(format::GgmlType::Q4_K, ff, d, gb);
  w.up = encode(format::GgmlType::Q4_K, ff, d, ub);
  w.down = encode(format::GgmlType::Q6_K, d, ff, db);
  const int64_t T = 67, ffs = 96;
  std::vector<float> x((size_t)(T * d));
  for (float& v : x) v = dist(rng);
  std::vector<uint8_t> sgb, sub, sdb;
  auto encode2d = [&](int64_t rows, int64_t cols, std::vector<uint8_t>& buf) {
    std::vector<float> f((size_t)(rows * cols));
    for (float& v : f) v = 0.2f * dist(rng);
    buf.resize(format::ggml_row_size(format::GgmlType::Q8_0, cols) * (size_t)rows);
    EXPECT_TRUE(models::synth::encode_values(format::GgmlType::Q8_0, f.data(), rows * cols, buf.data()).is_ok());
    return kernels::WeightView{format::GgmlType::Q8_0, buf.data(), rows, cols,
                               format::ggml_row_size(format::GgmlType::Q8_0, cols)};
  };
  const kernels::WeightView sg = encode2d(ffs, d, sgb), su = encode2d(ffs, d, sub), sd = encode2d(d, ffs, sdb);
  for (bool with_shexp : {false, true}) {
  SCOPED_TRACE(with_shexp ? "with shared expert" : "without shared expert");
  c.n_ff_shexp = with_shexp ? ffs : 0;
  w.shexp = {};
  if (with_shexp) {
    w.shexp.gate.w = sg;
    w.shexp.up.w = su;
    w.shexp.down.w = sd;
  }
  MoeScratch plain;
  plain.fused_max_rows = 0;
  plain.reserve(c, T);
  std::vector<MoeScratch> grouped(3);
  const int64_t caps[] = {7, 40, 1024};
  for (int i = 0; i < 3; ++i) {
    grouped[i].fused_max_rows = caps[i];
    grouped[i].reserve(c, T);
    ASSERT_EQ(grouped[i].grouped_rows(), std::min<int64_t>(caps[i], T * (c.routing.k + (with_shexp ? 1 : 0))));
  }
  for (kernels::Isa isa : kernels::available_isas()) {
    kernels::ScopedIsa scoped(isa);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (int64_t n : {1, 13, 67}) {
        std::vector<float> a((size_t)(n * d)), b((size_t)(n * d));
        moe_forward(c, w, x.data(), n, plain, a.data(), &pool);
        for (int i = 0; i < 3; ++i) {
          moe_forward(c, w, x.data(), n, grouped[i], b.data(), &pool);
          for (size_t j = 0; j < a.size(); ++j)
            ASSERT_EQ(a[j], b[j]) << kernels::isa_name(isa) << " threads " << threads << " T " << n << " cap "
                                  << caps[i] << " j " << j;
        }
      }
    }
  }
  }
}

}  // namespace
}  // namespace chimera::layers
