// Sampler tests: each stage against hand-computed small examples (through
// Sampler::distribution), greedy tie-breaking, llama.cpp penalty formulas,
// seeded reproducibility, a chi-square check of 20k draws against the softmax,
// and odd inputs (NaN / inf logits, empty rows, NaN parameters) never crashing.
#include "runtime/sampler.h"
#include "sampling_params_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <vector>

namespace chimera::runtime {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Only the stages a test names are on.
SamplingParams plain(float temperature = 1.0f) { return test::stages_off(temperature, 1234); }

std::map<int32_t, double> as_map(const std::vector<TokenProb>& d) {
  std::map<int32_t, double> m;
  for (const auto& t : d) m[t.id] = t.p;
  return m;
}

std::vector<float> logs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler s(plain(0.0f));
  std::vector<float> l = {1, 3, 3, 2};
  EXPECT_EQ(s.sample(l.data(), 4), 1);
  std::vector<float> flat(7, 0.5f);
  EXPECT_EQ(s.sample(flat.data(), 7), 0);
  auto d = s.distribution(l.data(), 4);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, 1);
  EXPECT_DOUBLE_EQ(d[0].p, 1.0);
  // Negative temperature is greedy too; the filters do not matter.
  SamplingParams p = plain(-1.0f);
  p.top_k = 3;
  p.min_p = 0.5f;
  Sampler neg(p);
  EXPECT_EQ(neg.sample(l.data(), 4), 1);
}

TEST(Sampler, GreedyAppliesPenaltiesFirst) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.5f;
  Sampler s(p);
  std::vector<float> l = {3.0f, 2.9f};
  EXPECT_EQ(s.sample(l.data(), 2), 0);
  s.accept(0);  // 3 / 1.5 = 2 < 2.9
  EXPECT_EQ(s.sample(l.data(), 2), 1);
  s.reset();
  EXPECT_EQ(s.sample(l.data(), 2), 0);
}

TEST(Sampler, TopKKeepsTheKLargest) {
  SamplingParams p = plain();
  p.top_k = 2;
  Sampler s(p);
  std::vector<float> l = {1, 4, 2, 3};
  auto d = s.distribution(l.data(), 4);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, 1);
  EXPECT_EQ(d[1].id, 3);
  const double z = std::exp(4.0) + std::exp(3.0);
  EXPECT_NEAR(d[0].p, std::exp(4.0) / z, 1e-12);
  EXPECT_NEAR(d[1].p, std::exp(3.0) / z, 1e-12);
  // Ties at the cut keep the lowest ids.
  std::vector<float> tie = {1, 2, 2, 2};
  auto m = as_map(s.distribution(tie.data(), 4));
  EXPECT_EQ(m.size(), 2u);
  EXPECT_TRUE(m.count(1) && m.count(2));
  // k >= vocab keeps everything.
  p.top_k = 10;
  Sampler all(p);
  EXPECT_EQ(all.distribution(l.data(), 4).size(), 4u);
}

TEST(Sampler, TopKMatchesAFullSortForSmallAndLargeK) {
  // Both selection paths (bounded heap up to k = 1024, nth_element above),
  // with many ties so the id tie-break matters.
  const int32_t n = 5000;
  std::vector<float> l(n);
  for (int32_t i = 0; i < n; ++i) l[i] = static_cast<float>((i * 7919) % 613) * 0.01f;
  std::vector<std::pair<float, int32_t>> ref;
  for (int32_t i = 0; i < n; ++i) ref.push_back({l[i], i});
  std::sort(ref.begin(), ref.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  for (int32_t k : {1, 7, 1024, 1025, 3000}) {
    SamplingParams p = plain();
    p.top_k = k;
    auto d = Sampler(p).distribution(l.data(), n);
    ASSERT_EQ(d.size(), static_cast<size_t>(k));
    for (int32_t i = 0; i < k; ++i) EXPECT_EQ(d[i].id, ref[i].second) << "k=" << k << " i=" << i;
  }
}

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  // Probabilities 0.05, 0.5, 0.15, 0.3 for ids 0..3.
  std::vector<float> l = logs({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = plain();
  p.top_p = 0.75f;  // 0.5 + 0.3 = 0.8 >= 0.75
  auto m = as_map(Sampler(p).distribution(l.data(), 4));
  ASSERT_EQ(m.size(), 2u);
  EXPECT_NEAR(m[1], 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(m[3], 0.3 / 0.8, 1e-6);
  p.top_p = 0.85f;  // needs 0.95
  EXPECT_EQ(Sampler(p).distribution(l.data(), 4).size(), 3u);
  p.top_p = 0.1f;  // the top token alone
  auto one = Sampler(p).distribution(l.data(), 4);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].id, 1);
  p.top_p = 0.0f;  // still at least one token
  EXPECT_EQ(Sampler(p).distribution(l.data(), 4).size(), 1u);
  // After top-k, p applies to the renormalised top-k set.
  p.top_k = 3;  // 0.5, 0.3, 0.15 -> 0.526, 0.316, 0.158
  p.top_p = 0.8f;
  EXPECT_EQ(Sampler(p).distribution(l.data(), 4).size(), 2u);
  p.top_p = 0.85f;  // 0.842 < 0.85
  EXPECT_EQ(Sampler(p).distribution(l.data(), 4).size(), 3u);
}

TEST(Sampler, TopPWithoutTopKOnALargeFlatVocabulary) {
  // 1000 equal logits: half the mass is exactly the 500 lowest ids; the
  // prefix search has to grow past its first partial sort.
  std::vector<float> l(1000, 0.0f);
  SamplingParams p = plain();
  p.top_p = 0.5f;
  auto d = Sampler(p).distribution(l.data(), 1000);
  ASSERT_EQ(d.size(), 500u);
  for (size_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(d[i].id, static_cast<int32_t>(i));
    EXPECT_NEAR(d[i].p, 1.0 / 500, 1e-12);
  }
}

TEST(Sampler, MinPKeepsTokensAboveFractionOfMax) {
  std::vector<float> l = logs({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = plain();
  p.min_p = 0.2f;  // threshold 0.1: drops 0.05
  auto m = as_map(Sampler(p).distribution(l.data(), 4));
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.count(0), 0u);
  EXPECT_NEAR(m[1], 0.5 / 0.95, 1e-6);
  EXPECT_NEAR(m[2], 0.15 / 0.95, 1e-6);
  p.min_p = 0.7f;  // threshold 0.35: only 0.5
  EXPECT_EQ(Sampler(p).distribution(l.data(), 4).size(), 1u);
  p.min_p = 5.0f;  // impossible: the best token stays
  auto best = Sampler(p).distribution(l.data(), 4);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].id, 1);
}

TEST(Sampler, TemperatureScalesLogits) {
  std::vector<float> l = {0.0f, static_cast<float>(std::log(2.0))};
  auto m = as_map(Sampler(plain(0.5f)).distribution(l.data(), 2));  // weights 1 : 4
  EXPECT_NEAR(m[0], 0.2, 1e-6);
  EXPECT_NEAR(m[1], 0.8, 1e-6);
  auto hot = as_map(Sampler(plain(1e6f)).distribution(l.data(), 2));
  EXPECT_NEAR(hot[0], 0.5, 1e-5);
  // Filters see temperature-1 probabilities: min-p 0.6 drops 1/3 vs 2/3
  // regardless of a high temperature.
  SamplingParams p = plain(100.0f);
  p.min_p = 0.6f;
  EXPECT_EQ(Sampler(p).distribution(l.data(), 2).size(), 1u);
}

TEST(Sampler, PenaltiesFollowLlamaCpp) {
  SamplingParams p = plain();
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p);
  for (int32_t t : {0, 1, 0, -5, 1000}) s.accept(t);  // out-of-range ids ignored
  std::vector<float> l = {2.0f, -1.0f, 0.5f, 3.0f};
  // id 0 (count 2): 2 / 2 - 2 * 0.5 - 0.25 = -0.25
  // id 1 (count 1): -1 * 2 - 0.5 - 0.25 = -2.75
  std::vector<double> expect_logit = {-0.25, -2.75, 0.5, 3.0};
  double z = 0;
  for (double e : expect_logit) z += std::exp(e);
  auto m = as_map(s.distribution(l.data(), 4));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(m[i], std::exp(expect_logit[i]) / z, 1e-6) << i;

  // Window of the last 2 tokens: history 0, 1, 0 -> window {1, 0}, counts 1.
  p.penalty_last_n = 2;
  Sampler w(p);
  for (int32_t t : {0, 1, 0}) w.accept(t);
  expect_logit = {2.0 / 2 - 0.5 - 0.25, -1 * 2 - 0.5 - 0.25, 0.5, 3.0};
  z = 0;
  for (double e : expect_logit) z += std::exp(e);
  m = as_map(w.distribution(l.data(), 4));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(m[i], std::exp(expect_logit[i]) / z, 1e-6) << i;

  // penalty_last_n = 0 disables penalties.
  p.penalty_last_n = 0;
  Sampler off(p);
  off.accept(3);
  m = as_map(off.distribution(l.data(), 4));
  EXPECT_GT(m[3], 0.6);
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> l = {0.1f, 0.5f, 0.2f, 0.9f, 0.3f, 0.0f, 0.7f, 0.4f};
  SamplingParams p = plain(1.0f);
  p.seed = 42;
  Sampler a(p), b(p);
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 200; ++i) {
    ta.push_back(a.sample(l.data(), 8));
    tb.push_back(b.sample(l.data(), 8));
  }
  EXPECT_EQ(ta, tb);
  a.reset();
  std::vector<int32_t> again;
  for (int i = 0; i < 200; ++i) again.push_back(a.sample(l.data(), 8));
  EXPECT_EQ(ta, again);
  // Golden prefix: pins the RNG -> uniform -> choice mapping, which must not
  // depend on the standard library or machine. Computed independently (a
  // Python mt19937_64 + u = (x >> 11) * 2^-53 + cumulative walk in id order).
  const std::vector<int32_t> golden(ta.begin(), ta.begin() + 12);
  EXPECT_EQ(golden, (std::vector<int32_t>{6, 5, 6, 1, 7, 1, 4, 3, 2, 3, 0, 4}));
}

TEST(Sampler, DifferentSeedsDiffer) {
  std::vector<float> l(16, 0.0f);
  SamplingParams p = plain(1.0f);
  p.seed = 1;
  Sampler a(p);
  p.seed = 2;
  Sampler b(p);
  int same = 0;
  for (int i = 0; i < 200; ++i) same += a.sample(l.data(), 16) == b.sample(l.data(), 16);
  EXPECT_LT(same, 50);  // ~12.5 expected by chance
}

TEST(Sampler, EmpiricalDistributionMatchesSoftmax) {
  std::vector<float> l = {1.0f, 0.0f, -1.0f, 2.0f, 0.5f, -0.5f, 1.5f, -2.0f};
  const int n = 8, draws = 20000;
  Sampler s(plain(1.0f));
  std::vector<int> counts(n, 0);
  for (int i = 0; i < draws; ++i) {
    int32_t t = s.sample(l.data(), n);
    ASSERT_GE(t, 0);
    ASSERT_LT(t, n);
    ++counts[t];
  }
  double z = 0;
  for (float v : l) z += std::exp(static_cast<double>(v));
  double chi2 = 0;
  for (int i = 0; i < n; ++i) {
    const double expected = draws * std::exp(static_cast<double>(l[i])) / z;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  EXPECT_LT(chi2, 24.32);  // chi-square, 7 degrees of freedom, p = 0.001
}

TEST(Sampler, NaNAndInfinityDoNotCrash) {
  Sampler s(plain(1.0f));
  // NaN counts as -inf: never drawn while finite tokens exist.
  std::vector<float> l = {kNaN, 0.0f, kNaN, 0.0f};
  for (int i = 0; i < 100; ++i) {
    int32_t t = s.sample(l.data(), 4);
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
  // +inf tokens share the mass equally.
  std::vector<float> inf = {0.0f, kInf, 5.0f, kInf};
  auto m = as_map(s.distribution(inf.data(), 4));
  EXPECT_DOUBLE_EQ(m[1], 0.5);
  EXPECT_DOUBLE_EQ(m[3], 0.5);
  EXPECT_DOUBLE_EQ(m[0], 0.0);
  // All NaN / -inf: uniform over the candidates; greedy gives id 0.
  std::vector<float> bad = {kNaN, -kInf, kNaN};
  int32_t t = s.sample(bad.data(), 3);
  EXPECT_TRUE(t >= 0 && t < 3);
  EXPECT_EQ(Sampler(plain(0.0f)).sample(bad.data(), 3), 0);
  EXPECT_EQ(Sampler(plain(0.0f)).sample(inf.data(), 4), 1);
  // Default chain (top-k, top-p, min-p) on the same rows.
  Sampler def(SamplingParams{});
  t = def.sample(bad.data(), 3);
  EXPECT_TRUE(t >= 0 && t < 3);
  t = def.sample(inf.data(), 4);
  EXPECT_TRUE(t == 1 || t == 3);
  // Empty rows.
  EXPECT_EQ(s.sample(nullptr, 4), -1);
  EXPECT_EQ(s.sample(l.data(), 0), -1);
  EXPECT_TRUE(s.distribution(l.data(), -3).empty());
  // NaN parameters act as disabled.
  SamplingParams p;
  p.temperature = kNaN;
  p.top_p = kNaN;
  p.min_p = kNaN;
  p.repeat_penalty = kNaN;
  p.frequency_penalty = kInf;
  Sampler weird(p);
  weird.accept(1);
  EXPECT_EQ(weird.sample(inf.data(), 4), 1);
}

TEST(Sampler, LargeVocabularyDefaultChain) {
  const int32_t n = 200000;
  std::vector<float> l(n);
  for (int32_t i = 0; i < n; ++i) l[i] = static_cast<float>((i * 7919) % 1000) / 100.0f;
  Sampler s(SamplingParams{});
  for (int i = 0; i < 20; ++i) {
    int32_t t = s.sample(l.data(), n);
    ASSERT_GE(t, 0);
    ASSERT_LT(t, n);
    s.accept(t);
  }
  // Top-p alone on the same row keeps a bounded, consistent set.
  SamplingParams p = plain();
  p.top_p = 0.9f;
  auto d = Sampler(p).distribution(l.data(), n);
  double sum = 0;
  for (const auto& e : d) sum += e.p;
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_LT(d.size(), static_cast<size_t>(n));
  // The kept tokens are exactly the best ones: the worst kept logit is not
  // below the best dropped one, and the mass just reaches 0.9.
  std::vector<char> kept(n, 0);
  for (const auto& e : d) kept[e.id] = 1;
  float worst_kept = kInf, best_dropped = -kInf;
  double z = 0, zk = 0;
  for (int32_t i = 0; i < n; ++i) {
    z += std::exp(static_cast<double>(l[i]));
    if (kept[i]) {
      worst_kept = std::min(worst_kept, l[i]);
      zk += std::exp(static_cast<double>(l[i]));
    } else {
      best_dropped = std::max(best_dropped, l[i]);
    }
  }
  EXPECT_GE(worst_kept, best_dropped);
  EXPECT_GE(zk / z, 0.9 - 1e-9);
  EXPECT_LT((zk - std::exp(static_cast<double>(worst_kept))) / z, 0.9 + 1e-9);
  // Same rule on random logits without ties, against a full sort.
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (auto& v : l) v = nd(g);
  for (float top_p : {0.3f, 0.9f, 0.99f}) {
    p.top_p = top_p;
    auto got = Sampler(p).distribution(l.data(), n);
    std::vector<double> w(l.begin(), l.end());
    std::sort(w.begin(), w.end(), std::greater<>());
    double tot = 0, cum = 0;
    for (double v : w) tot += std::exp(v - w[0]);
    size_t expect = 0;
    double margin = 1;
    while (expect < w.size() && cum < top_p * tot) {
      cum += std::exp(w[expect++] - w[0]);
      margin = std::min(margin, std::fabs(cum - top_p * tot) / tot);
    }
    ASSERT_GT(margin, 1e-9) << "the cut is a numerical tie: pick other data";
    EXPECT_EQ(got.size(), expect) << top_p;
  }
}

}  // namespace
}  // namespace chimera::runtime
