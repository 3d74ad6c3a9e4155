// Engine-level checks of fused diffusion serving (tiny-llada): four
// concurrent requests with different prompts and options (greedy, sampled +
// dual cache, prefix cache + threshold, guidance) each return exactly what the
// same request returns alone, and the engine ran them in fused forwards
// (chimera_diffusion_forwards_total below the requests' summed steps, which
// equal the lone runs' steps); cancelling one mid-generation ends it with
// `cancelled` and leaves the others' outputs unchanged. Outputs and counters
// are asserted, never durations; every wait is bounded.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/thread_pool.h"
#include "models/model.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "test_util.h"

namespace chimera::test {
namespace {

using server::FinishReason;
using server::StreamEvent;

struct Outcome {
  std::string text;
  FinishReason finish = FinishReason::kNone;
  int64_t completion_tokens = -1;
  std::string error;
};

// Reads ch to its final event (bounded: 120 s); on_text runs after each text event.
Outcome collect(server::RequestChannel& ch, const std::function<void(const Outcome&)>& on_text = nullptr) {
  Outcome o;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool done = false;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    std::vector<StreamEvent> evs;
    if (!ch.pop(&evs, std::chrono::milliseconds(200))) continue;
    for (auto& e : evs) {
      o.text += e.text;
      if (!e.text.empty() && on_text) on_text(o);
      if (e.done) {
        done = true;
        o.finish = e.finish;
        o.completion_tokens = e.usage.completion_tokens;
        o.error = e.error;
      }
    }
  }
  EXPECT_TRUE(done) << "no final event within the bound";
  return o;
}

double counter(const server::Metrics& m, const std::string& name) {
  std::istringstream in(m.render());
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  ADD_FAILURE() << name << " not in /metrics";
  return -1;
}

struct Fixture {
  std::unique_ptr<models::Model> model;
  std::vector<server::GenerationParams> reqs;
};

// Four requests: 32 generated tokens in blocks of 8 (4 streamed blocks each);
// request 1 generates long_tokens.
bool make_fixture(const std::string& shared, Fixture* f, int64_t long_tokens = 32) {
  auto m = models::load_model(shared + "/golden/models/tiny-llada.gguf");
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return false;
  f->model = std::move(m).value();
  std::ifstream in(shared + "/golden/tiny-llada.json");
  const std::vector<int32_t> ids = nlohmann::json::parse(in)["prompt_tokens"].get<std::vector<int32_t>>();
  for (int i = 0; i < 4; ++i) {
    server::GenerationParams p;
    p.prompt.assign(ids.begin() + i, ids.end());  // different prompts (and canvas lengths)
    p.max_tokens = 32;
    p.ignore_eos = true;
    p.sampling.temperature = 0;
    p.diffusion.steps = 32;
    p.diffusion.block_length = 8;
    f->reqs.push_back(p);
  }
  f->reqs[1].sampling.temperature = 0.8;  // sampled: the job's RNG
  f->reqs[1].sampling.seed = 5;
  f->reqs[1].diffusion.dual_cache = true;
  f->reqs[1].max_tokens = f->reqs[1].diffusion.steps = long_tokens;
  f->reqs[2].diffusion.prefix_cache = true;
  f->reqs[2].diffusion.threshold = 0.3;
  f->reqs[3].diffusion.cfg_scale = 1.0;  // two canvases per step
  return true;
}

server::EngineOptions engine_options() {
  server::EngineOptions o;
  o.n_ctx = 1024;
  o.max_running = 4;
  return o;
}

// Each request alone on an engine, and the summed steps it took.
std::vector<Outcome> lone_outcomes(const Fixture& f, ThreadPool& pool, double* steps) {
  server::Metrics metrics;
  server::Engine e(*f.model, &pool, engine_options(), &metrics);
  EXPECT_TRUE(e.start().is_ok());
  std::vector<Outcome> out;
  for (const auto& p : f.reqs) {
    auto ch = e.submit(p);
    EXPECT_TRUE(ch.is_ok()) << ch.status().message();
    if (!ch.is_ok()) return {};
    out.push_back(collect(**ch));
    EXPECT_EQ(out.back().finish, FinishReason::kLength) << out.back().error;
    EXPECT_EQ(out.back().completion_tokens, p.max_tokens);
  }
  *steps = counter(metrics, "chimera_diffusion_request_steps_total");
  // Alone, every forward ran one request.
  EXPECT_EQ(counter(metrics, "chimera_diffusion_forwards_total"), *steps);
  e.stop();
  return out;
}

// Submits every request of f to e, in order; stops at the first refusal
// (a test failure), so fewer channels than requests means one was refused.
std::vector<std::shared_ptr<server::RequestChannel>> submit_all(server::Engine& e, const Fixture& f) {
  std::vector<std::shared_ptr<server::RequestChannel>> chs;
  for (const auto& p : f.reqs) {
    auto ch = e.submit(p);
    EXPECT_TRUE(ch.is_ok()) << ch.status().message();
    if (!ch.is_ok()) break;
    chs.push_back(*ch);
  }
  return chs;
}

TEST(DiffusionFusedEngine, ConcurrentRequestsEqualLoneRequestsInFusedSteps) {
  CHIMERA_REQUIRE_SHARED(shared);
  Fixture f;
  // Request 1 takes 512 steps, so the requests submitted after it run beside
  // it (the forwards < steps check needs two of them to overlap).
  ASSERT_TRUE(make_fixture(shared, &f, 512));
  ThreadPool pool(2);
  double lone_steps = 0;
  const std::vector<Outcome> want = lone_outcomes(f, pool, &lone_steps);
  ASSERT_EQ(want.size(), f.reqs.size());
  ASSERT_GT(lone_steps, 0);
  // The four outputs differ (options and prompts are visible in the output).
  for (size_t i = 1; i < want.size(); ++i) EXPECT_NE(want[i].text, want[0].text) << i;

  server::Metrics metrics;
  server::Engine e(*f.model, &pool, engine_options(), &metrics);
  ASSERT_TRUE(e.start().is_ok());
  const auto chs = submit_all(e, f);
  ASSERT_EQ(chs.size(), f.reqs.size());
  for (size_t i = 0; i < chs.size(); ++i) {
    const Outcome got = collect(*chs[i]);
    EXPECT_EQ(got.finish, FinishReason::kLength) << i << " " << got.error;
    EXPECT_EQ(got.text, want[i].text) << "request " << i;
    EXPECT_EQ(got.completion_tokens, want[i].completion_tokens) << "request " << i;
  }
  const double steps = counter(metrics, "chimera_diffusion_request_steps_total");
  const double forwards = counter(metrics, "chimera_diffusion_forwards_total");
  EXPECT_EQ(steps, lone_steps);  // the same steps as alone ...
  EXPECT_LT(forwards, steps);    // ... in fewer forwards: several requests per forward
  e.stop();
}

TEST(DiffusionFusedEngine, CancellingOneLeavesTheOthersCorrect) {
  CHIMERA_REQUIRE_SHARED(shared);
  Fixture f;
  // The victim generates 512 tokens (64 blocks): the cancel, sent when its
  // first block arrives, lands long before its end.
  ASSERT_TRUE(make_fixture(shared, &f, 512));
  ThreadPool pool(2);
  double lone_steps = 0;
  const std::vector<Outcome> want = lone_outcomes(f, pool, &lone_steps);
  ASSERT_EQ(want.size(), f.reqs.size());

  server::Metrics metrics;
  server::Engine e(*f.model, &pool, engine_options(), &metrics);
  ASSERT_TRUE(e.start().is_ok());
  const auto chs = submit_all(e, f);
  ASSERT_EQ(chs.size(), f.reqs.size());
  // Request 1 is cancelled when its first block arrives (63 of its 64 blocks still to come).
  auto* victim = chs[1].get();
  const Outcome cancelled = collect(*victim, [victim](const Outcome&) { victim->cancel(); });
  EXPECT_EQ(cancelled.finish, FinishReason::kCancelled);
  EXPECT_LT(cancelled.completion_tokens, 512);
  EXPECT_EQ(cancelled.text, want[1].text.substr(0, cancelled.text.size()));
  for (size_t i : {0u, 2u, 3u}) {
    const Outcome got = collect(*chs[i]);
    EXPECT_EQ(got.finish, FinishReason::kLength) << i << " " << got.error;
    EXPECT_EQ(got.text, want[i].text) << "request " << i;
  }
  EXPECT_EQ(counter(metrics, "chimera_requests_total{finish_reason=\"cancelled\"}"), 1);
  e.stop();
}

}  // namespace
}  // namespace chimera::test
