// PhiMoE beyond the generic golden test: the max |diff| against the Hugging
// Face reference is reported per case; the engine's routing (experts and
// sparsemixer weights, observed through the MoE observer while running the
// reference protocol) equals the reference's `routing` rows; sparsemixer on
// the reference's router logits reproduces its experts and weights; LongRoPE
// (short/long factor tensors, switch past the original context, attention
// factor) behaves as specified; bad files are clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "format/gguf/gguf.h"
#include "golden_case.h"
#include "gguf_rewrite.h"
#include "layers/moe.h"
#include "models/context.h"
#include "models/model.h"

namespace chimera::test {
namespace {

struct Recorder : layers::MoeObserver {
  // [layer] -> sequence of (expert pair, weight pair) per token
  std::vector<std::vector<std::array<int32_t, 2>>> e;
  std::vector<std::vector<std::array<float, 2>>> w;
  void on_routing(int64_t layer, int64_t n, int64_t k, int64_t, const int32_t* ex, const float* wt) override {
    if ((int64_t)e.size() <= layer) {
      e.resize((size_t)layer + 1);
      w.resize((size_t)layer + 1);
    }
    for (int64_t t = 0; t < n; ++t) {
      e[(size_t)layer].push_back({ex[t * k], ex[t * k + 1]});
      w[(size_t)layer].push_back({wt[t * k], wt[t * k + 1]});
    }
  }
};

const char* kCases[] = {"tiny-phimoe-hf", "tiny-phimoe-hf-long"};

TEST(PhiMoe, GoldenMaxDiffAndRoutingMatchTheReference) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const char* name : kCases) {
    GoldenCase gc;
    ASSERT_TRUE(load_golden(shared + "/golden", name, &gc)) << name;
    auto mr = models::load_model(gc.model_path);
    ASSERT_TRUE(mr.is_ok()) << mr.status().message();
    models::Model& m = **mr;
    auto* obs = dynamic_cast<layers::MoeObservable*>(&m);
    ASSERT_NE(obs, nullptr);
    Recorder rec;
    obs->set_moe_observer(&rec);
    // Reference protocol: prompt in one batch, then one teacher-forced token per step.
    ThreadPool pool(2);
    const int64_t np = (int64_t)gc.prompt.size(), ng = (int64_t)gc.greedy.size(), nv = gc.n_vocab;
    models::Context ctx = m.new_context();
    auto st = ctx.new_state(512);
    std::vector<float> rows((size_t)(np * nv));
    ASSERT_TRUE(ctx.forward(*st, gc.prompt.data(), np, models::Logits::kAll, rows.data(), &pool).is_ok());
    float worst = 0;
    for (size_t i = 0; i < rows.size(); ++i) worst = std::max(worst, std::fabs(rows[i] - gc.prompt_logits[i]));
    std::vector<float> row((size_t)nv);
    for (int64_t j = 1; j < ng; ++j) {
      ASSERT_TRUE(ctx.forward(*st, &gc.greedy[(size_t)j - 1], 1, models::Logits::kLast, row.data(), &pool).is_ok());
      for (int64_t c = 0; c < nv; ++c)
        worst = std::max(worst, std::fabs(row[(size_t)c] - gc.gen_logits[(size_t)(j * nv + c)]));
    }
    obs->set_moe_observer(nullptr);
    const float bound = gc.tolerance * gc.scale();
    std::printf("[ phimoe ] %s: max |diff| %.6g (bound %.6g = %.3g x scale %.4g)\n", name, worst, bound,
                gc.tolerance, gc.scale());
    EXPECT_LE(worst, bound) << name;

    // Routing rows: [pos, layer, [e1, e2], [w1, w2], kept, router_logits].
    const auto& routing = gc.meta["routing"]["rows"];
    ASSERT_GT(routing.size(), 0u);
    int64_t checked = 0;
    for (const auto& r : routing) {
      const int64_t pos = r[0].get<int64_t>(), layer = r[1].get<int64_t>();
      ASSERT_LT((size_t)layer, rec.e.size());
      ASSERT_LT((size_t)pos, rec.e[(size_t)layer].size());
      const auto& ee = rec.e[(size_t)layer][(size_t)pos];
      const auto& ww = rec.w[(size_t)layer][(size_t)pos];
      EXPECT_EQ(ee[0], r[2][0].get<int32_t>()) << name << " pos " << pos << " layer " << layer;
      EXPECT_EQ(ee[1], r[2][1].get<int32_t>()) << name << " pos " << pos << " layer " << layer;
      EXPECT_NEAR(ww[0], r[3][0].get<float>(), 2e-3) << name << " pos " << pos << " layer " << layer;
      EXPECT_NEAR(ww[1], r[3][1].get<float>(), 2e-3) << name << " pos " << pos << " layer " << layer;
      ++checked;
    }
    EXPECT_EQ(checked, (np + ng - 1) * 2) << name;
  }
}

TEST(PhiMoe, SparseMixerReproducesTheReferenceOnItsRouterLogits) {
  CHIMERA_REQUIRE_SHARED(shared);
  layers::RoutingParams p;
  p.kind = layers::MoeRouting::kSparseMixer;
  p.n_expert = 4;
  p.k = 2;
  p.jitter_eps = 0.01f;
  for (const char* name : kCases) {
    GoldenCase gc;
    ASSERT_TRUE(load_golden(shared + "/golden", name, &gc));
    for (const auto& r : gc.meta["routing"]["rows"]) {
      const std::vector<float> s = r[5].get<std::vector<float>>();
      int32_t e[2];
      float w[2];
      layers::route_token(s.data(), p, e, w);
      EXPECT_EQ(e[0], r[2][0].get<int32_t>());
      EXPECT_EQ(e[1], r[2][1].get<int32_t>());
      EXPECT_NEAR(w[0], r[3][0].get<float>(), 1e-6);
      EXPECT_NEAR(w[1], r[3][1].get<float>(), 1e-6);
    }
  }
}

// ---- rewritten files

std::string tiny(const std::string& shared) { return shared + "/golden/models/tiny-phimoe-hf.gguf"; }

std::vector<float> prompt_logits(const std::string& path, int64_t n) {
  auto m = models::load_model(path);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return {};
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((int32_t)(1 + 37 * i % 3000));
  models::Context ctx = (*m)->new_context();
  auto st = ctx.new_state(64);
  std::vector<float> out((size_t)(n * (*m)->info().n_vocab));
  EXPECT_TRUE(ctx.forward(*st, ids.data(), n, models::Logits::kAll, out.data(), nullptr).is_ok());
  return out;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(PhiMoe, LongRopeSwitchesFactorSetsPastTheOriginalContext) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::vector<float> ones(8, 1.f), twos(8, 2.f);  // n_rot 16 -> 8 factors
  const auto orig = format::GgufValue::from_u32(8);
  // Short factors 1, long factors 2, original context 8.
  const std::string lr = rewrite(tiny(shared), "phimoe-longrope.gguf", keep_all,
                                 {{"phimoe.rope.scaling.original_context_length", orig}},
                                 {{"rope_factors_short.weight", ones}, {"rope_factors_long.weight", twos}});
  // Linear scaling by 2 divides every angle by 2, as long factors of 2 do.
  const std::string lin = rewrite(tiny(shared), "phimoe-linear.gguf", keep_all,
                                  {{"phimoe.rope.scaling.type", format::GgufValue::from_string("linear")},
                                   {"phimoe.rope.scaling.factor", format::GgufValue::from_f32(2.f)}});
  // Up to the original context: short factors (= plain RoPE).
  EXPECT_EQ(max_diff(prompt_logits(lr, 8), prompt_logits(tiny(shared), 8)), 0.f);
  // Past it: long factors for every position of the call.
  EXPECT_LE(max_diff(prompt_logits(lr, 12), prompt_logits(lin, 12)), 1e-5f);
  EXPECT_GT(max_diff(prompt_logits(lr, 12), prompt_logits(tiny(shared), 12)), 1e-3f);
  // The choice is per forward call, not per 256-row micro-batch: a 300-token
  // call past an original context of 260 takes the long factors for its first
  // 256 rows too (their K rows feed the last token's logits).
  {
    const std::string lr260 =
        rewrite(tiny(shared), "phimoe-longrope260.gguf", keep_all,
                {{"phimoe.rope.scaling.original_context_length", format::GgufValue::from_u32(260)}},
                {{"rope_factors_short.weight", ones}, {"rope_factors_long.weight", twos}});
    auto last_logits = [](const std::string& path, int64_t n) {
      auto m = models::load_model(path);
      EXPECT_TRUE(m.is_ok()) << m.status().message();
      if (!m.is_ok()) return std::vector<float>{};
      std::vector<int32_t> ids;
      for (int64_t i = 0; i < n; ++i) ids.push_back((int32_t)(1 + 37 * i % 3000));
      models::Context ctx = (*m)->new_context();
      auto st = ctx.new_state(n);
      std::vector<float> out((size_t)(*m)->info().n_vocab);
      EXPECT_TRUE(ctx.forward(*st, ids.data(), n, models::Logits::kLast, out.data(), nullptr).is_ok());
      return out;
    };
    const std::vector<float> long300 = last_logits(lr260, 300);
    EXPECT_LE(max_diff(long300, last_logits(lin, 300)), 1e-4f);
    EXPECT_GT(max_diff(long300, last_logits(tiny(shared), 300)), 1e-3f);
  }
  // The attention factor scales cos/sin (changes the logits); 1 is the identity.
  const std::string af1 = rewrite(tiny(shared), "phimoe-af1.gguf", keep_all,
                                  {{"phimoe.rope.scaling.attn_factor", format::GgufValue::from_f32(1.f)}},
                                  {{"rope_factors_short.weight", ones}, {"rope_factors_long.weight", ones}});
  const std::string af = rewrite(tiny(shared), "phimoe-af.gguf", keep_all,
                                 {{"phimoe.rope.scaling.attn_factor", format::GgufValue::from_f32(1.19f)}},
                                 {{"rope_factors_short.weight", ones}, {"rope_factors_long.weight", ones}});
  EXPECT_EQ(max_diff(prompt_logits(af1, 6), prompt_logits(tiny(shared), 6)), 0.f);
  EXPECT_GT(max_diff(prompt_logits(af, 6), prompt_logits(tiny(shared), 6)), 1e-3f);
  // Only one of the two factor tensors: a clear error.
  const std::string half = rewrite(tiny(shared), "phimoe-half.gguf", keep_all, {},
                                   {{"rope_factors_long.weight", ones}});
  auto m = models::load_model(half);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("rope_factors"), std::string::npos) << m.status().message();
}

TEST(PhiMoe, BadFilesAreClearErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto expect_error = [&](const std::string& p, const std::string& needle) {
    auto m = models::load_model(p);
    ASSERT_FALSE(m.is_ok()) << p;
    EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().message();
  };
  expect_error(rewrite(tiny(shared), "phimoe-k3.gguf", keep_all,
                       {{"phimoe.expert_used_count", format::GgufValue::from_u32(3)}}),
               "sparsemixer");
  expect_error(rewrite(tiny(shared), "phimoe-k9.gguf", keep_all,
                       {{"phimoe.expert_used_count", format::GgufValue::from_u32(9)}}),
               "expert_used_count");
  expect_error(rewrite(tiny(shared), "phimoe-noup.gguf",
                       [](format::GgufTensorInfo& t) { return t.name != "blk.1.ffn_up_exps.weight"; }),
               "blk.1.ffn_up_exps.weight");
  expect_error(rewrite(tiny(shared), "phimoe-e3.gguf", keep_all,
                       {{"phimoe.expert_count", format::GgufValue::from_u32(3)}}),
               "ffn_gate_inp");
  expect_error(rewrite(tiny(shared), "phimoe-nobias.gguf",
                       [](format::GgufTensorInfo& t) { return t.name != "blk.0.ffn_norm.bias"; }),
               "blk.0.ffn_norm.bias");
  expect_error(rewrite(tiny(shared), "phimoe-shape.gguf",
                       [](format::GgufTensorInfo& t) {
                         if (t.name == "blk.0.ffn_down_exps.weight") std::swap(t.ne[0], t.ne[1]);
                         return true;
                       }),
               "blk.0.ffn_down_exps.weight");
}

// `chimera bench` decode bandwidth = decode_bytes_per_token × tok/s: a decoded
// token reads every non-expert tensor, one embedding row, and only k of the
// n_expert expert slices per layer.
TEST(PhiMoe, DecodeBytesCountActiveExpertsOnly) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = models::load_model(shared + "/golden/models/tiny-phimoe-hf.gguf");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const format::GgufFile& g = (*m)->gguf();
  const int64_t E = g.get_int("phimoe.expert_count").value(), k = g.get_int("phimoe.expert_used_count").value();
  ASSERT_LT(k, E);
  double experts = 0, other = 0;
  for (const auto& t : g.tensors()) {
    if (t.name.find("_exps.weight") != std::string::npos) experts += (double)t.n_bytes;
    else if (t.name == "token_embd.weight" && g.find_tensor("output.weight")) other += (double)t.n_bytes / (double)t.dim(1);
    else other += (double)t.n_bytes;
  }
  ASSERT_GT(experts, 0);
  const double want = other + experts * (double)k / (double)E;
  EXPECT_NEAR((double)(*m)->info().decode_bytes_per_token, want, 2.0);
  EXPECT_LT((double)(*m)->info().decode_bytes_per_token, other + experts);
}

}  // namespace
}  // namespace chimera::test
