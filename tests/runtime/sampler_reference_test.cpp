// Every sampler stage against an independent reference computation on fixed
// logits: a plain full sort, std::exp in double, llama.cpp's chain order
// (penalties -> top-k -> top-p -> min-p -> temperature). The kept set must be
// exactly the reference's (the test data keep every cut at least 1e-9 away
// from a tie in probability mass, asserted, so rounding cannot decide it),
// the probabilities agree to 1e-9, and seeded draws are the reference's
// mt19937_64 walk.
#include "runtime/sampler.h"
#include "sampling_params_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace chimera::runtime {
namespace {

struct Ref {
  std::map<int32_t, double> probs;  // kept id -> probability
  double min_margin = 1.0;          // smallest distance of a cut to its decision threshold
};

// The reference chain, written from the llama.cpp formulas without the
// engine's shortcuts (no heaps, buckets or fixed point).
Ref reference(const std::vector<float>& logits, const SamplingParams& p, const std::vector<int32_t>& history) {
  const int32_t nv = static_cast<int32_t>(logits.size());
  std::vector<float> v = logits;
  // Penalties over the last penalty_last_n tokens (-1: all), each distinct token once.
  if (p.penalty_last_n != 0) {
    const size_t n = p.penalty_last_n < 0 ? history.size()
                                          : std::min(history.size(), static_cast<size_t>(p.penalty_last_n));
    std::map<int32_t, int> count;
    for (size_t i = history.size() - n; i < history.size(); ++i) ++count[history[i]];
    for (const auto& [id, c] : count) {
      if (id < 0 || id >= nv) continue;
      float& l = v[static_cast<size_t>(id)];
      l = l <= 0.0f ? l * p.repeat_penalty : l / p.repeat_penalty;
      l -= static_cast<float>(c) * p.frequency_penalty + p.presence_penalty;
    }
  }
  std::vector<std::pair<float, int32_t>> c;
  for (int32_t i = 0; i < nv; ++i) c.push_back({v[static_cast<size_t>(i)], i});
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  Ref r;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) {
    if (c[static_cast<size_t>(p.top_k) - 1].first == c[static_cast<size_t>(p.top_k)].first) r.min_margin = 0;
    c.resize(static_cast<size_t>(p.top_k));
  }
  auto softmax = [&](double inv_t) {
    std::vector<double> w;
    double z = 0;
    for (const auto& e : c) {
      w.push_back(std::exp((static_cast<double>(e.first) - c[0].first) * inv_t));
      z += w.back();
    }
    for (double& x : w) x /= z;
    return w;
  };
  if (p.top_p < 1.0f && c.size() > 1) {
    const std::vector<double> w = softmax(1.0);
    double cum = 0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
      cum += w[i];
      r.min_margin = std::min(r.min_margin, std::fabs(cum - p.top_p));
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
    c.resize(keep);
  }
  if (p.min_p > 0.0f && c.size() > 1) {
    std::vector<std::pair<float, int32_t>> kept;
    for (const auto& e : c) {
      const double rel = std::exp(static_cast<double>(e.first) - c[0].first);
      r.min_margin = std::min(r.min_margin, std::fabs(rel - p.min_p));
      if (rel >= p.min_p) kept.push_back(e);
    }
    c = kept;
  }
  const std::vector<double> w = softmax(1.0 / p.temperature);
  for (size_t i = 0; i < c.size(); ++i) r.probs[c[i].second] = w[i];
  return r;
}

SamplingParams off(float temperature) { return test::stages_off(temperature, 99); }

std::vector<float> normal_logits(int32_t n, uint32_t seed, float sd) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> l(static_cast<size_t>(n));
  for (auto& x : l) x = nd(g);
  return l;
}

// A history with repeats, some ids outside the vocabulary.
std::vector<int32_t> history_for(int32_t nv) {
  std::vector<int32_t> h;
  std::mt19937 g(5);
  for (int i = 0; i < 80; ++i) h.push_back(static_cast<int32_t>(g() % 40));  // ids 0..39, many repeats
  h.push_back(-3);
  h.push_back(nv + 7);
  return h;
}

struct Case {
  const char* name;
  SamplingParams p;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](const char* name, auto&& f) {
    SamplingParams p = off(1.0f);
    f(p);
    v.push_back({name, p});
  };
  add("temperature 0.7", [](SamplingParams& p) { p.temperature = 0.7f; });
  add("temperature 1.6", [](SamplingParams& p) { p.temperature = 1.6f; });
  add("top-k 1", [](SamplingParams& p) { p.top_k = 1; });
  add("top-k 17", [](SamplingParams& p) { p.top_k = 17; });
  add("top-k 1500", [](SamplingParams& p) { p.top_k = 1500; });
  add("top-p 0.5", [](SamplingParams& p) { p.top_p = 0.5f; });
  add("top-p 0.93", [](SamplingParams& p) { p.top_p = 0.93f; });
  add("min-p 0.02", [](SamplingParams& p) { p.min_p = 0.02f; });
  add("min-p 0.3", [](SamplingParams& p) { p.min_p = 0.3f; });
  add("repeat penalty 1.3", [](SamplingParams& p) { p.repeat_penalty = 1.3f; });
  add("repeat penalty 0.8 (boost)", [](SamplingParams& p) { p.repeat_penalty = 0.8f; });
  add("presence 0.7", [](SamplingParams& p) { p.presence_penalty = 0.7f; });
  add("frequency 0.4", [](SamplingParams& p) { p.frequency_penalty = 0.4f; });
  add("frequency -0.5", [](SamplingParams& p) { p.frequency_penalty = -0.5f; });
  add("penalties, last 8", [](SamplingParams& p) {
    p.repeat_penalty = 1.5f, p.frequency_penalty = 0.3f, p.presence_penalty = 0.2f, p.penalty_last_n = 8;
  });
  add("penalties, whole history", [](SamplingParams& p) {
    p.repeat_penalty = 1.5f, p.frequency_penalty = 0.3f, p.presence_penalty = 0.2f, p.penalty_last_n = -1;
  });
  add("penalties off (last_n 0)", [](SamplingParams& p) {
    p.repeat_penalty = 1.5f, p.frequency_penalty = 0.3f, p.penalty_last_n = 0;
  });
  add("top-k 200 + top-p 0.8", [](SamplingParams& p) { p.top_k = 200, p.top_p = 0.8f; });
  add("top-p 0.9 + min-p 0.05", [](SamplingParams& p) { p.top_p = 0.9f, p.min_p = 0.05f; });
  add("full chain", [](SamplingParams& p) {
    p.temperature = 0.8f, p.top_k = 40, p.top_p = 0.95f, p.min_p = 0.05f, p.repeat_penalty = 1.1f;
    p.frequency_penalty = 0.2f, p.presence_penalty = 0.1f, p.penalty_last_n = 32;
  });
  return v;
}

void expect_matches_reference(const std::vector<float>& l, const Case& c, const std::vector<int32_t>& hist) {
  SCOPED_TRACE(c.name);
  Sampler s(c.p);
  for (int32_t t : hist) s.accept(t);
  const Ref ref = reference(l, c.p, hist);
  // The engine's weights are exact to ~1e-11 relative (det_exp, fixed-point
  // top-p sums): a cut farther than 1e-9 from its threshold is decided the same.
  ASSERT_GT(ref.min_margin, 1e-9) << "test data put a cut on a numerical tie";
  const auto d = s.distribution(l.data(), static_cast<int32_t>(l.size()));
  std::map<int32_t, double> got;
  for (const auto& t : d) got[t.id] = t.p;
  ASSERT_EQ(got.size(), d.size()) << "an id listed twice";
  std::vector<int32_t> got_ids, ref_ids;
  for (const auto& [id, pr] : got) got_ids.push_back(id);
  for (const auto& [id, pr] : ref.probs) ref_ids.push_back(id);
  ASSERT_EQ(got_ids, ref_ids) << "kept sets differ (" << got_ids.size() << " vs " << ref_ids.size() << ")";
  for (const auto& [id, pr] : ref.probs) EXPECT_NEAR(got[id], pr, 1e-9) << "id " << id;

  // Seeded draws: the reference walk over the engine's draw order with the
  // reference probabilities, u = (mt19937_64() >> 11) * 2^-53.
  std::vector<double> by_id(l.size(), 0.0);
  for (const auto& [id, pr] : ref.probs) by_id[(size_t)id] = pr;
  std::mt19937_64 rng(c.p.seed);
  for (int i = 0; i < 50; ++i) {
    const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
    double cum = 0;
    int32_t want = d.back().id;
    for (const auto& t : d) {
      cum += by_id[(size_t)t.id];
      if (u < cum) {
        want = t.id;
        break;
      }
    }
    EXPECT_EQ(s.sample(l.data(), static_cast<int32_t>(l.size())), want) << "draw " << i;
  }
}

TEST(SamplerReference, EveryStageOnASmallVocabulary) {
  const auto l = normal_logits(64, 11, 2.0f);
  const auto hist = history_for(64);
  for (const Case& c : cases()) expect_matches_reference(l, c, hist);
}

TEST(SamplerReference, EveryStageOnALargeVocabulary) {
  // Large enough for the bucketed top-p (no top-k) and nth_element top-k paths.
  const auto l = normal_logits(20000, 23, 3.0f);
  const auto hist = history_for(20000);
  for (const Case& c : cases()) expect_matches_reference(l, c, hist);
}

TEST(SamplerReference, EachStageChangesTheDistribution) {
  // A sampler that ignored a parameter would give the plain softmax.
  const auto l = normal_logits(64, 11, 2.0f);
  const auto hist = history_for(64);
  const Ref plain = reference(l, off(1.0f), hist);
  for (const Case& c : cases()) {
    if (std::string(c.name).find("off") != std::string::npos || c.p.top_k >= 64) continue;  // no-ops here
    Sampler s(c.p);
    for (int32_t t : hist) s.accept(t);
    double diff = 0;
    std::map<int32_t, double> got;
    for (const auto& t : s.distribution(l.data(), 64)) got[t.id] = t.p;
    for (const auto& [id, pr] : plain.probs) diff = std::max(diff, std::fabs(pr - (got.count(id) ? got[id] : 0.0)));
    EXPECT_GT(diff, 1e-3) << c.name << " had no effect";
  }
}

}  // namespace
}  // namespace chimera::runtime
