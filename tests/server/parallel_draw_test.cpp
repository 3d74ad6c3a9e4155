// The engine draws the tokens of the sequences of a step on its pool
// (Engine::after_forward): seeded requests running together on 2 threads must
// emit exactly the tokens, logprobs and text each one gives alone on 1
// thread — each sequence keeps its own sampler and random stream whatever
// thread draws for it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "models/model.h"
#include "server/engine.h"
#include "server_fixture.h"

namespace chimera::test {
namespace {

struct Outcome {
  std::string text;
  std::vector<int32_t> ids;      // the drawn token of each logprob entry
  std::vector<float> logprobs;   // its logprob, then the top ones' ids and values
  server::FinishReason finish = server::FinishReason::kNone;
};

// Events of ch until its final one (bounded: 60 s).
Outcome collect(server::RequestChannel& ch) {
  Outcome o;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<server::StreamEvent> evs;
    if (!ch.pop(&evs, std::chrono::milliseconds(200))) continue;
    for (auto& e : evs) {
      o.text += e.text;
      for (const auto& lp : e.logprobs) {
        o.ids.push_back(lp.id);
        o.logprobs.push_back(lp.logprob);
        for (const auto& [id, v] : lp.top) {
          o.logprobs.push_back((float)id);
          o.logprobs.push_back(v);
        }
      }
      if (e.done) {
        o.finish = e.finish;
        return o;
      }
    }
  }
  ADD_FAILURE() << "no final event within 60 s";
  return o;
}

server::GenerationParams request(int i) {
  server::GenerationParams p;
  p.prompt = {1, (int32_t)(10 + 7 * i), (int32_t)(40 + 3 * i)};
  p.max_tokens = 24;
  p.ignore_eos = true;
  p.top_logprobs = 3;
  p.sampling.temperature = 1.0f;  // a wide distribution: every draw uses its random stream
  p.sampling.top_k = 0;
  p.sampling.top_p = 1.0f;
  p.sampling.min_p = 0.0f;
  p.sampling.seed = 1000 + (uint64_t)i;
  return p;
}

TEST(ParallelDraw, ConcurrentSeededRequestsEqualEachAloneOnOneThread) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto model = models::load_model(model_path(shared));
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  constexpr int kRequests = 5;  // odd: the pool's two ranges differ in size

  std::vector<Outcome> alone;
  {
    ThreadPool pool(1);
    server::EngineOptions o;
    o.n_ctx = 256;
    server::Engine e(**model, &pool, o, nullptr);
    ASSERT_TRUE(e.start().is_ok());
    for (int i = 0; i < kRequests; ++i) {
      auto r = e.submit(request(i));
      ASSERT_TRUE(r.is_ok()) << r.status().message();
      alone.push_back(collect(**r));
    }
    e.stop();
  }

  ThreadPool pool(2);
  server::EngineOptions o;
  o.n_ctx = 256;
  o.max_running = kRequests;
  server::Engine e(**model, &pool, o, nullptr);
  ASSERT_TRUE(e.start().is_ok());
  std::vector<std::shared_ptr<server::RequestChannel>> chs;
  for (int i = 0; i < kRequests; ++i) {
    auto r = e.submit(request(i));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    chs.push_back(*r);
  }
  for (int i = 0; i < kRequests; ++i) {
    const Outcome got = collect(*chs[(size_t)i]);
    EXPECT_EQ(got.finish, server::FinishReason::kLength) << "request " << i;
    EXPECT_EQ(got.ids.size(), 24u) << "request " << i;
    EXPECT_EQ(got.ids, alone[(size_t)i].ids) << "request " << i;
    EXPECT_EQ(got.logprobs, alone[(size_t)i].logprobs) << "request " << i;
    EXPECT_EQ(got.text, alone[(size_t)i].text) << "request " << i;
  }
  // The requests really differ (a test of five copies of one stream could not fail).
  EXPECT_NE(alone[0].ids, alone[1].ids);
  e.stop();
}

}  // namespace
}  // namespace chimera::test
