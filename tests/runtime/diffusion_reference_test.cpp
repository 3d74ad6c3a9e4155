// Diffusion options against a teacher-forced reference loop (tiny-llada):
// the test re-derives every step of masked-diffusion decoding on its own —
// a full non-causal Context::forward of the canvas (the path the golden test
// checks against LLaDA's reference logits), the remasking confidence written
// from its definition (low_confidence softmax(l)[x̂], margin p1 - p2, entropy
// Σ p log p, random U(0,1) from the seeded mt19937_64), classifier-free
// guidance u + (w + 1)(c - u) on a prompt-masked canvas, LLaDA's per-block
// quota and the threshold rule — and at each step compares the generator's
// commits (positions, tokens, confidences) with its own choice on the
// generator's canvas before that step (teacher forcing: the comparison never
// drifts). Only numerical near-ties (a confidence or logit gap below 1e-5)
// may pick differently, and at most two of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/thread_pool.h"
#include "models/context.h"
#include "models/model.h"
#include "runtime/diffusion.h"
#include "runtime/diffusion_model.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace chimera::test {
namespace {

using runtime::Remasking;

struct Pick {
  int32_t token = 0;
  double conf = 0;
  double logit_gap = 0;  // top-1 minus top-2 logit (a near-tie may flip the token)
};

// One canvas position's choice from its logits row (T = 0).
Pick pick(const float* l, int64_t nv, Remasking r, std::mt19937_64& rng) {
  Pick p;
  int64_t best = 0;
  for (int64_t v = 1; v < nv; ++v)
    if (l[v] > l[best]) best = v;
  double second = -INFINITY, z = 0;
  for (int64_t v = 0; v < nv; ++v) {
    if (v != best) second = std::max(second, (double)l[v]);
    z += std::exp((double)l[v] - l[best]);
  }
  p.token = (int32_t)best;
  p.logit_gap = (double)l[best] - second;
  switch (r) {
    case Remasking::kLowConfidence:
      p.conf = 1.0 / z;
      break;
    case Remasking::kMargin:
      p.conf = (1.0 - std::exp(second - l[best])) / z;
      break;
    case Remasking::kEntropy:
      for (int64_t v = 0; v < nv; ++v) {
        const double q = std::exp((double)l[v] - l[best]) / z;
        if (q > 0) p.conf += q * std::log(q);
      }
      break;
    case Remasking::kRandom:
      p.conf = ((double)(rng() >> 11) + 0.5) / 9007199254740992.0;
      break;
  }
  return p;
}

// Full non-causal logits of a canvas, [L][n_vocab].
std::vector<float> canvas_logits(models::Model& m, const std::vector<int32_t>& canvas, ThreadPool* pool) {
  const int64_t nv = m.info().n_vocab, L = (int64_t)canvas.size();
  models::Context ctx = m.new_context();
  auto st = ctx.new_state(L);
  std::vector<float> out((size_t)(L * nv));
  EXPECT_TRUE(ctx.forward(*st, canvas.data(), L, models::Logits::kAll, out.data(), pool).is_ok());
  return out;
}

struct Case {
  const char* name;
  Remasking remasking = Remasking::kLowConfidence;
  double cfg = 0, threshold = 0;
  int64_t gen = 16, block = 8, steps = 8;
};

void check_against_reference(models::Model& m, const std::vector<int32_t>& prompt, const Case& c) {
  SCOPED_TRACE(c.name);
  ThreadPool pool(2);
  const int64_t nv = m.info().n_vocab, P = (int64_t)prompt.size(), L = P + c.gen;
  auto spec = models::diffusion_spec(m);
  ASSERT_TRUE(spec.is_ok());
  const int32_t mask = spec->mask_id;

  runtime::GenerateOptions o;
  o.n_predict = c.gen;
  o.stop_at_eog = false;
  o.sampling.temperature = 0;
  o.sampling.seed = 4242;
  o.diffusion.steps = c.steps;
  o.diffusion.block_length = c.block;
  o.diffusion.remasking = c.remasking;
  o.diffusion.cfg_scale = c.cfg;
  o.diffusion.threshold = c.threshold;
  runtime::DiffusionGenerator gen(m, L, &pool);
  std::vector<int32_t> out;
  auto r = gen.generate(prompt, o, [&](int32_t t) {
    out.push_back(t);
    return true;
  });
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ((int64_t)out.size(), c.gen);
  std::map<int64_t, std::vector<runtime::DiffusionCommit>> by_step;
  for (const auto& cm : gen.last_commits()) by_step[cm.step].push_back(cm);

  std::vector<int32_t> canvas = prompt;
  canvas.resize((size_t)L, mask);
  std::mt19937_64 rng(o.sampling.seed);
  const int64_t steps_b = c.steps / (c.gen / c.block);
  int64_t step = 0, ties = 0, committed = 0;
  for (int64_t bs = P; bs < L; bs += c.block) {
    // LLaDA's quota: floor(n / steps), the first n mod steps steps one more.
    std::vector<int64_t> quota((size_t)steps_b, c.block / steps_b);
    for (int64_t i = 0; i < c.block % steps_b; ++i) ++quota[(size_t)i];
    for (int64_t s = 0;; ++s) {
      std::vector<int64_t> masked;
      for (int64_t p = bs; p < bs + c.block; ++p)
        if (canvas[(size_t)p] == mask) masked.push_back(p);
      if (masked.empty()) break;
      ASSERT_LT(s, c.threshold > 0 ? c.block : steps_b) << "the block never completes";
      if (c.threshold <= 0 && quota[(size_t)s] == 0) continue;
      std::vector<float> lg = canvas_logits(m, canvas, &pool);
      if (c.cfg > 0) {
        std::vector<int32_t> un = canvas;
        std::fill(un.begin(), un.begin() + P, mask);
        const std::vector<float> lu = canvas_logits(m, un, &pool);
        const float w = (float)c.cfg;
        for (size_t i = 0; i < lg.size(); ++i) lg[i] = lu[i] + (w + 1.f) * (lg[i] - lu[i]);
      }
      std::vector<Pick> picks;
      for (int64_t p : masked) picks.push_back(pick(lg.data() + p * nv, nv, c.remasking, rng));
      // Selection: the q most confident (ties: lower position); with a
      // threshold every one above it, at least max(q, 1).
      std::vector<size_t> order(masked.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return picks[a].conf > picks[b].conf; });
      const int64_t q = s < steps_b ? quota[(size_t)s] : 1;
      size_t take = (size_t)std::max<int64_t>(q, c.threshold > 0 ? 1 : q);
      if (c.threshold > 0)
        while (take < order.size() && picks[order[take]].conf > c.threshold) ++take;
      take = std::min(take, order.size());
      std::map<int64_t, int32_t> want;
      for (size_t k = 0; k < take; ++k) want[masked[order[k]]] = picks[order[k]].token;

      const auto& got = by_step[step];
      std::map<int64_t, int32_t> have;
      for (const auto& cm : got) have[cm.pos] = cm.token;
      if (have != want) {
        // Accept only a near-tie: at the selection cut, or between a token's top two logits.
        double cut_gap = INFINITY;
        if (take < order.size()) cut_gap = picks[order[take - 1]].conf - picks[order[take]].conf;
        if (c.threshold > 0) {
          for (const auto& pk : picks) cut_gap = std::min(cut_gap, std::fabs(pk.conf - c.threshold));
        }
        double tok_gap = INFINITY;
        for (const auto& pk : picks) tok_gap = std::min(tok_gap, pk.logit_gap);
        EXPECT_TRUE(cut_gap < 1e-5 || tok_gap < 1e-5)
            << "step " << step << ": the generator committed something else than the reference (cut gap " << cut_gap
            << ", token gap " << tok_gap << ")";
        ++ties;
      }
      for (const auto& cm : got) {
        // Confidences of the positions both chose the same token for.
        for (size_t k = 0; k < masked.size(); ++k)
          if (masked[k] == cm.pos && picks[k].token == cm.token) {
            EXPECT_NEAR(cm.confidence, picks[k].conf, 1e-5 * std::max(1.0, std::fabs(picks[k].conf)))
                << "step " << step << " pos " << cm.pos;
          }
        canvas[(size_t)cm.pos] = cm.token;  // teacher forcing: continue on the generator's canvas
        ++committed;
      }
      ASSERT_FALSE(got.empty()) << "step " << step << " committed nothing";
      ++step;
    }
  }
  EXPECT_EQ(step, (int64_t)by_step.size());
  EXPECT_EQ(committed, c.gen);
  EXPECT_LE(ties, 2);
  // The emitted tokens are the final canvas.
  EXPECT_EQ(out, std::vector<int32_t>(canvas.begin() + P, canvas.end()));
}

class DiffusionReference : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string shared = shared_dir();
    if (shared.empty()) return;
    auto m = models::load_model(shared + "/golden/models/tiny-llada.gguf");
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    model_ = std::move(m).value().release();
    std::ifstream f(shared + "/golden/tiny-llada.json");
    prompt_ = nlohmann::json::parse(f)["prompt_tokens"].get<std::vector<int32_t>>();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  static models::Model* model_;
  static std::vector<int32_t> prompt_;
};
models::Model* DiffusionReference::model_ = nullptr;
std::vector<int32_t> DiffusionReference::prompt_;

#define DIFFUSION_CASE(test_name, ...)                         \
  TEST_F(DiffusionReference, test_name) {                      \
    CHIMERA_REQUIRE_SHARED(shared);                            \
    ASSERT_NE(model_, nullptr);                                \
    Case c{__VA_ARGS__};                                       \
    check_against_reference(*model_, prompt_, c);              \
  }

DIFFUSION_CASE(LowConfidenceTwoTokensPerStep, "low_confidence", Remasking::kLowConfidence)
DIFFUSION_CASE(Margin, "margin", Remasking::kMargin)
DIFFUSION_CASE(Entropy, "entropy", Remasking::kEntropy)
DIFFUSION_CASE(RandomIsTheSeededUniform, "random", Remasking::kRandom)
DIFFUSION_CASE(UnevenQuota, "low_confidence, 3 steps per block of 8", Remasking::kLowConfidence, 0, 0, 16, 8, 6)
DIFFUSION_CASE(ClassifierFreeGuidance, "cfg 1.5", Remasking::kLowConfidence, 1.5)
DIFFUSION_CASE(Threshold, "threshold 0.005", Remasking::kLowConfidence, 0, 0.005, 16, 8, 16)

}  // namespace
}  // namespace chimera::test
