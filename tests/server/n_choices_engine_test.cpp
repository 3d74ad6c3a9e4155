// Engine-level checks of n > 1 (stories260K): a request with n choices takes
// n slots — it waits in the queue while fewer are free, and runs once they
// are — and n states of the memory budget (max_choices() is bounded by the
// budget; a larger n is refused with kInvalidArgument, the server's 400);
// a full queue refuses it with kOutOfRange (429) like any request.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/thread_pool.h"
#include "models/model.h"
#include "server/engine.h"
#include "server_fixture.h"

namespace chimera::test {
namespace {

using server::FinishReason;
using server::StreamEvent;

// Pops events of ch until `done_needed` final events arrived (bounded: 60 s).
std::vector<StreamEvent> collect(server::RequestChannel& ch, int done_needed) {
  std::vector<StreamEvent> all;
  int done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (done < done_needed && std::chrono::steady_clock::now() < deadline) {
    std::vector<StreamEvent> evs;
    if (!ch.pop(&evs, std::chrono::milliseconds(200))) continue;
    for (auto& e : evs) {
      done += e.done;
      all.push_back(std::move(e));
    }
  }
  return all;
}

// Tokens generated so far by a request that asked for logprobs (one entry per token).
int64_t pop_tokens(server::RequestChannel& ch, int64_t at_least) {
  int64_t n = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (n < at_least && std::chrono::steady_clock::now() < deadline) {
    std::vector<StreamEvent> evs;
    if (!ch.pop(&evs, std::chrono::milliseconds(200))) continue;
    for (auto& e : evs) {
      EXPECT_FALSE(e.done) << "the long request ended early: " << e.error;
      n += (int64_t)e.logprobs.size();
    }
  }
  return n;
}

TEST(NChoicesEngine, ChoicesWaitForAsManyFreeSlots) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto model = models::load_model(model_path(shared));
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ThreadPool pool(1);
  server::EngineOptions o;
  o.n_ctx = 4096;
  o.max_running = 2;
  server::Engine e(**model, &pool, o, nullptr);
  ASSERT_TRUE(e.start().is_ok());
  EXPECT_EQ(e.max_choices(), 2);

  server::GenerationParams a;
  a.prompt = {1, 2, 3};
  a.max_tokens = 4000;  // far more than the test needs: a still runs when b arrives
  a.ignore_eos = true;
  a.top_logprobs = 0;  // one logprob per token: events count the loop's steps
  auto ra = e.submit(a);
  ASSERT_TRUE(ra.is_ok());
  auto cha = *ra;
  ASSERT_GE(pop_tokens(*cha, 1), 1);  // a runs: one slot is taken

  server::GenerationParams b;
  b.prompt = {1, 4, 5};
  b.max_tokens = 20;
  b.ignore_eos = true;
  b.n = 2;
  auto rb = e.submit(b);
  ASSERT_TRUE(rb.is_ok());
  auto chb = *rb;
  // Drain a's events, then wait for three more tokens of a (one per loop
  // iteration): the iteration after the one in flight took b from the inbox
  // and ran its admission, and the one after that began after its counters
  // were published.
  std::vector<StreamEvent> drained;
  while (cha->pop(&drained, std::chrono::milliseconds(0))) {
  }
  for (const auto& ev : drained) ASSERT_FALSE(ev.done) << "the long request ended early";
  ASSERT_GE(pop_tokens(*cha, 3), 3);
  const server::EngineCounters c = e.counters();
  EXPECT_EQ(c.running, 1) << "b (2 choices) must not run beside a with 2 slots";
  EXPECT_EQ(c.waiting, 1);
  std::vector<StreamEvent> none;
  EXPECT_FALSE(chb->pop(&none, std::chrono::milliseconds(0)));  // queued: nothing generated yet

  cha->cancel();  // frees the slot: b is admitted and runs both choices
  auto evs = collect(*chb, 2);
  std::set<int> finished;
  std::map<int, std::string> text;
  for (const auto& ev : evs) {
    text[ev.index] += ev.text;
    if (!ev.done) continue;
    EXPECT_EQ(ev.finish, FinishReason::kLength) << ev.error;
    EXPECT_EQ(ev.usage.completion_tokens, 20);
    EXPECT_EQ(ev.usage.prompt_tokens, 3);
    finished.insert(ev.index);
  }
  EXPECT_EQ(finished, (std::set<int>{0, 1}));
  e.stop();
}

TEST(NChoicesEngine, MemoryBudgetBoundsN) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto model = models::load_model(model_path(shared));
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ThreadPool pool(1);
  server::EngineOptions o;
  o.n_ctx = 256;
  o.max_running = 4;
  size_t state_bytes = 0;
  {
    server::Engine probe(**model, &pool, o, nullptr);
    ASSERT_TRUE(probe.start().is_ok());
    state_bytes = probe.state_bytes();
    EXPECT_EQ(probe.max_choices(), 4);  // default budget: 2 x 4 states; --parallel bounds n
    probe.stop();
  }
  ASSERT_GT(state_bytes, 0u);
  o.mem_budget_bytes = 2 * state_bytes + state_bytes / 2;  // room for two states, not three
  server::Metrics metrics;
  server::Engine e(**model, &pool, o, &metrics);
  ASSERT_TRUE(e.start().is_ok());
  EXPECT_EQ(e.max_choices(), 2);
  server::GenerationParams p;
  p.prompt = {1, 2, 3};
  p.max_tokens = 8;
  p.n = 3;
  auto r = e.submit(p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("between 1 and 2"), std::string::npos) << r.status().message();
  p.n = 2;
  auto ok = e.submit(p);
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  auto evs = collect(**ok, 2);
  int done = 0;
  for (const auto& ev : evs) done += ev.done && ev.error.empty();
  EXPECT_EQ(done, 2);
  e.stop();
  // Never more than the budget in states + cache.
  const std::string m = metrics.render();
  EXPECT_LE(metric(m, "chimera_state_memory_bytes") + metric(m, "chimera_prefix_cache_memory_bytes"),
            (double)o.mem_budget_bytes)
      << m;
}

TEST(NChoicesEngine, FullQueueRefusesChoicesLikeAnyRequest) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto model = models::load_model(model_path(shared));
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ThreadPool pool(1);
  server::EngineOptions o;
  o.n_ctx = 128;
  o.max_running = 2;
  o.max_queue = 0;  // nothing may wait
  server::Engine e(**model, &pool, o, nullptr);
  ASSERT_TRUE(e.start().is_ok());
  server::GenerationParams p;
  p.prompt = {1, 2, 3};
  p.max_tokens = 2;
  p.n = 2;
  auto r = e.submit(p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);  // HTTP 429
  e.stop();
}

}  // namespace
}  // namespace chimera::test
