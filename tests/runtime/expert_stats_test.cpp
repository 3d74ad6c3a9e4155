// Expert statistics: counts sum to tokens × layers × k; balance figures on
// known distributions (uniform, single expert, skewed); hot-set sizes; the
// placement plan's predicted hit rate equals the replayed hit rate on the same
// trace for a sweep of budgets (synthetic and a real tiny PhiMoE run); budget
// edge cases; renderers (JSON parses, CSV row count, heat map rows); the
// session attaches to MoE models only and detaches on destruction.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "models/context.h"
#include "runtime/expert_stats.h"
#include "test_util.h"

namespace chimera::runtime {
namespace {

// Feeds `tokens` routings per layer with experts drawn from a skewed distribution.
ExpertStatsCollector synthetic(int64_t n_layer, int64_t E, int64_t k, int64_t tokens, uint32_t seed) {
  ExpertStatsCollector s;
  std::mt19937 rng(seed);
  for (int64_t chunk = 0; chunk < tokens; chunk += 7) {
    const int64_t n = std::min<int64_t>(7, tokens - chunk);
    for (int64_t l = 0; l < n_layer; ++l) {
      std::vector<int32_t> e((size_t)(n * k));
      std::vector<float> w((size_t)(n * k));
      for (int64_t t = 0; t < n; ++t) {
        // Zipf-like: expert j with weight 1/(j+1), distinct per token.
        std::vector<double> p((size_t)E);
        for (int64_t j = 0; j < E; ++j) p[(size_t)j] = 1.0 / (double)(j + 1 + l);
        for (int64_t slot = 0; slot < k; ++slot) {
          std::discrete_distribution<int> d(p.begin(), p.end());
          const int x = d(rng);
          p[(size_t)x] = 0;
          e[(size_t)(t * k + slot)] = x;
          w[(size_t)(t * k + slot)] = 0.5f;
        }
      }
      s.on_routing(l, n, k, E, e.data(), w.data());
    }
  }
  return s;
}

TEST(ExpertStats, CountsSumToTokensTimesLayersTimesK) {
  const int64_t L = 3, E = 8, k = 2, T = 50;
  ExpertStatsCollector s = synthetic(L, E, k, T, 1);
  int64_t total = 0;
  double mass = 0;
  for (const auto& layer : s.layers()) {
    EXPECT_EQ(layer.tokens, T);
    for (int64_t c : layer.count) total += c;
    for (double m : layer.mass) mass += m;
    EXPECT_EQ((int64_t)layer.trace.size(), T * k);
  }
  EXPECT_EQ(total, T * L * k);
  EXPECT_EQ(s.total_routings(), T * L * k);
  EXPECT_DOUBLE_EQ(mass, 0.5 * (double)(T * L * k));
}

TEST(ExpertStats, BalanceOnKnownDistributions) {
  ExpertStatsCollector s;
  // Layer 0: uniform (each of 4 experts twice); layer 1: one expert always (k = 1).
  const int32_t uni[] = {0, 1, 2, 3, 0, 1, 2, 3};
  const float w[] = {1, 1, 1, 1, 1, 1, 1, 1};
  s.on_routing(0, 4, 2, 4, uni, w);
  const int32_t one[] = {2, 2, 2, 2};
  s.on_routing(1, 4, 1, 4, one, w);
  auto b = layer_balance(s);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_NEAR(b[0].cv, 0.0, 1e-12);
  EXPECT_NEAR(b[0].norm_entropy, 1.0, 1e-12);
  EXPECT_EQ(b[0].hot50, 2);
  EXPECT_EQ(b[0].hot90, 4);
  EXPECT_EQ(b[0].hot99, 4);
  // counts {0,0,4,0}: mean 1, std sqrt(3) -> cv sqrt(3); entropy 0; hot set 1.
  EXPECT_NEAR(b[1].cv, std::sqrt(3.0), 1e-12);
  EXPECT_NEAR(b[1].norm_entropy, 0.0, 1e-12);
  EXPECT_EQ(b[1].hot50, 1);
  EXPECT_EQ(b[1].hot99, 1);
}

TEST(ExpertStats, HotSetSizes) {
  EXPECT_EQ(hot_set_size({50, 30, 15, 5}, 0.5), 1);
  EXPECT_EQ(hot_set_size({30, 50, 5, 15}, 0.8), 2);
  EXPECT_EQ(hot_set_size({30, 50, 5, 15}, 0.81), 3);
  EXPECT_EQ(hot_set_size({30, 50, 5, 15}, 0.95), 3);
  EXPECT_EQ(hot_set_size({30, 50, 5, 15}, 0.99), 4);
  EXPECT_EQ(hot_set_size({0, 0}, 0.5), 0);
}

TEST(ExpertStats, PredictedHitRateEqualsReplayForEveryBudget) {
  const int64_t L = 4, E = 16, k = 2;
  ExpertStatsCollector s = synthetic(L, E, k, 200, 9);
  const std::vector<uint64_t> bytes = {1000, 1000, 1500, 2000};  // per-layer expert sizes
  for (int64_t slots : {0, 1, 2}) {
    for (uint64_t budget = 0; budget <= 100000; budget += 2500) {
      PlacementOptions o;
      o.budget_bytes = budget;
      o.prefetch_slots = slots;
      auto p = plan_placement(s, bytes, o);
      ASSERT_TRUE(p.is_ok()) << p.status().message();
      auto r = replay(s, *p);
      ASSERT_TRUE(r.is_ok());
      EXPECT_EQ(r->routings, p->routings);
      EXPECT_EQ(r->hits, p->resident_routings) << "budget " << budget;
      EXPECT_DOUBLE_EQ(r->hit_rate(), p->expected_hit_rate) << "budget " << budget;
      EXPECT_DOUBLE_EQ(r->staged_rate(), p->expected_staged_rate) << "budget " << budget;
      EXPECT_LE(p->resident_bytes + p->prefetch_bytes, budget);
      EXPECT_LE(p->n_prefetch(), L * slots);
    }
  }
  // No budget: nothing resident. Everything fits: all resident, hit rate 1, nothing staged separately.
  PlacementOptions none;
  auto p0 = plan_placement(s, bytes, none);
  ASSERT_TRUE(p0.is_ok());
  EXPECT_EQ(p0->expected_hit_rate, 0.0);
  PlacementOptions all;
  all.budget_bytes = 16 * (1000 + 1000 + 1500 + 2000);
  auto p1 = plan_placement(s, bytes, all);
  ASSERT_TRUE(p1.is_ok());
  EXPECT_EQ(p1->expected_hit_rate, 1.0);
  EXPECT_EQ(p1->n_resident(), L * E);
  EXPECT_EQ(p1->n_prefetch(), 0);
  // Residents are the hottest: with room for one layer-0 expert only, it is layer 0's most chosen.
  PlacementOptions one;
  one.budget_bytes = 1000;
  one.prefetch_slots = 0;
  auto p2 = plan_placement(s, bytes, one);
  ASSERT_TRUE(p2.is_ok());
  EXPECT_EQ(p2->n_resident(), 1);
  // Too few per-layer sizes is an error.
  EXPECT_FALSE(plan_placement(s, {1000}, all).is_ok());
}

TEST(ExpertStats, ReplayNeedsATrace) {
  ExpertStatsCollector s(/*keep_trace=*/false);
  const int32_t e[] = {0, 1};
  const float w[] = {1, 1};
  s.on_routing(0, 1, 2, 4, e, w);
  EXPECT_TRUE(s.layers()[0].trace.empty());
  auto p = plan_placement(s, {10}, PlacementOptions{});
  ASSERT_TRUE(p.is_ok());
  EXPECT_FALSE(replay(s, *p).is_ok());
}

TEST(ExpertStats, RenderersAreWellFormed) {
  ExpertStatsCollector s = synthetic(2, 6, 2, 30, 3);
  PlacementOptions o;
  o.budget_bytes = 5000;
  auto p = plan_placement(s, {1000, 1000}, o);
  ASSERT_TRUE(p.is_ok());
  auto j = nlohmann::json::parse(stats_json(s, &*p));
  EXPECT_EQ(j["total_routings"].get<int64_t>(), 2 * 30 * 2);
  ASSERT_EQ(j["layers"].size(), 2u);
  EXPECT_EQ(j["layers"][0]["count"].size(), 6u);
  EXPECT_TRUE(j["layers"][0].contains("cv"));
  EXPECT_TRUE(j["layers"][0]["hot_set"].contains("p90"));
  EXPECT_DOUBLE_EQ(j["placement"]["expected_hit_rate"].get<double>(), p->expected_hit_rate);
  EXPECT_EQ(j["placement"]["resident"].size(), 2u);
  EXPECT_FALSE(nlohmann::json::parse(stats_json(s, nullptr)).contains("placement"));
  const std::string csv = stats_csv(s, &*p);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 * 6);
  EXPECT_EQ(csv.rfind("layer,expert,count,share,weight_mass,mean_weight,tier\n", 0), 0u);
  EXPECT_NE(csv.find("resident"), std::string::npos);
  const std::string hm = heat_map(s);
  EXPECT_EQ(std::count(hm.begin(), hm.end(), '\n'), 2 + 2);  // title, axis, two layers
  EXPECT_NE(hm.find('@'), std::string::npos);
}

TEST(ExpertStats, RealModelRunCountsAndReplay) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = models::load_model(shared + "/golden/models/tiny-phimoe-hf.gguf");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto sess = ExpertStatsSession::attach(**m);
  ASSERT_TRUE(sess.is_ok()) << sess.status().message();
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(1 + (i * 53) % 3100);
  models::Context ctx = (*m)->new_context();
  auto st = ctx.new_state(64);
  ThreadPool pool(2);
  ASSERT_TRUE(ctx.forward(*st, ids.data(), 25, models::Logits::kNone, nullptr, &pool).is_ok());
  for (int i = 25; i < 40; ++i)
    ASSERT_TRUE(ctx.forward(*st, &ids[(size_t)i], 1, models::Logits::kNone, nullptr, &pool).is_ok());
  const ExpertStatsCollector& s = (*sess)->stats();
  ASSERT_EQ(s.layers().size(), 2u);
  int64_t total = 0;
  for (const auto& l : s.layers())
    for (int64_t c : l.count) total += c;
  EXPECT_EQ(total, 40 * 2 * 2);  // tokens x layers x k
  const std::vector<uint64_t> bytes = (*sess)->expert_bytes();
  ASSERT_EQ(bytes.size(), 2u);
  EXPECT_EQ(bytes[0], 3u * 64 * 128 * 2);  // gate + up + down, F16
  for (uint64_t budget = 0; budget <= 8 * bytes[0]; budget += bytes[0] / 2) {
    PlacementOptions o;
    o.budget_bytes = budget;
    auto p = plan_placement(s, bytes, o);
    ASSERT_TRUE(p.is_ok());
    auto r = replay(s, *p);
    ASSERT_TRUE(r.is_ok());
    EXPECT_DOUBLE_EQ(r->hit_rate(), p->expected_hit_rate);
  }
  const std::string path = test::temp_path("experts-session.json");
  ASSERT_TRUE((*sess)->write_json(path, 4 * bytes[0]).is_ok());
  std::ifstream f(path);
  auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["total_routings"].get<int64_t>(), 160);
  EXPECT_TRUE(j.contains("placement"));
  // Detach: no more collection after the session ends.
  (*sess).reset();
  ASSERT_TRUE(ctx.forward(*st, ids.data(), 1, models::Logits::kNone, nullptr, &pool).is_ok());
}

TEST(ExpertStats, SessionRejectsDenseModels) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = models::load_model(shared + "/models/stories260K.gguf");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto sess = ExpertStatsSession::attach(**m);
  ASSERT_FALSE(sess.is_ok());
  EXPECT_NE(sess.status().message().find("mixture-of-experts"), std::string::npos);
}

}  // namespace
}  // namespace chimera::runtime
