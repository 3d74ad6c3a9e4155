// Server flags that change behaviour, each shown doing what it says over HTTP
// against the real process:
//  * SIGINT shuts the server down cleanly (exit 0), also with a request in flight;
//  * --max-queue: one request more than the queue holds is refused with 429;
//  * --mem-budget-mb: the budget is what /metrics reports and state + cache
//    memory never exceeds it;
//  * --checkpoint-interval: a recurrent model's prefix cache restores the
//    longest checkpoint (a multiple of the interval) of a shared prompt prefix.
// Every wait is bounded; assertions are on events and counters, not durations.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server_fixture.h"

namespace chimera::test {
namespace {

TEST(ServerFlags, SigintShutsDownCleanly) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared);
  ASSERT_EQ(kill(srv.pid(), SIGINT), 0);
  EXPECT_EQ(srv.wait_exit(20), 0) << srv.log();
  EXPECT_NE(srv.log().find("shutting down"), std::string::npos) << srv.log();
}

TEST(ServerFlags, SigintWithARequestInFlightExitsAndEndsTheStream) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--ctx-size", "4096");
  std::atomic<int> chunks{0};
  std::atomic<bool> finished{false};
  std::thread client([&] {
    auto c = srv.client(30);
    post_sse(*c, "/v1/completions",
             {{"prompt", "Once upon a time"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}},
             [&](const json&) {
               ++chunks;
               return true;
             });
    finished = true;
  });
  for (int i = 0; i < 1000 && chunks.load() == 0 && !finished.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GT(chunks.load(), 0) << "the stream never started";
  ASSERT_EQ(kill(srv.pid(), SIGINT), 0);
  const int rc = srv.wait_exit(20);
  client.join();  // the stream ended (completed or cut): the client is not left hanging
  EXPECT_EQ(rc, 0) << srv.log();
  EXPECT_TRUE(finished.load());
}

// One request runs (--parallel 1), one waits (--max-queue 1): a third is refused
// with 429 while both are in flight. A request that finishes before the third is
// sent makes room legitimately, so the round is repeated (bounded) until the
// queue was observed full; the refusal's body is checked each time it happens.
TEST(ServerFlags, MaxQueueRefusesTheNextRequestWith429) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--parallel", "1", "--max-queue", "1", "--ctx-size", "4096");
  bool saw_429 = false;
  for (int round = 0; round < 5 && !saw_429; ++round) {
    std::atomic<int> started{0};
    std::atomic<bool> stop{false};
    auto long_stream = [&] {
      auto c = srv.client(60);
      bool counted = false;
      post_sse(*c, "/v1/completions",
               {{"prompt", "Once upon a time"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}},
               [&](const json&) {
                 if (!counted) ++started, counted = true;
                 return !stop.load();
               });
    };
    std::thread a(long_stream);
    for (int i = 0; i < 1000 && started.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::thread b(long_stream);  // waits in the queue while `a` runs
    // The queue holds `b` once /metrics says so (bounded wait).
    bool queued = false;
    for (int i = 0; i < 200 && !queued; ++i) {
      queued = metric(get_metrics(srv), "chimera_requests_waiting") >= 1;
      if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (queued) {
      auto c = srv.client();
      auto r = post_json(*c, "/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 1}}.dump());
      ASSERT_TRUE(r);
      if (r->status == 429) {
        saw_429 = true;
        const json j = json::parse(r->body, nullptr, false);
        EXPECT_EQ(j["error"]["type"], "rate_limit_error") << r->body;
        EXPECT_NE(r->body.find("waiting"), std::string::npos) << r->body;
      } else {
        EXPECT_EQ(r->status, 200) << r->body;  // the queue had drained in between
      }
    }
    stop = true;
    a.join();
    b.join();
  }
  EXPECT_TRUE(saw_429) << "the queue was never observed full with a request running";
  // The server still serves once the abandoned streams are cancelled (bounded wait).
  for (int i = 0; i < 500; ++i) {
    const std::string m = get_metrics(srv);
    if (metric(m, "chimera_requests_running") == 0 && metric(m, "chimera_requests_waiting") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto c = srv.client();
  auto r = post_json(*c, "/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 1}}.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerFlags, MemBudgetIsReportedAndNeverExceeded) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--mem-budget-mb", "3", "--ctx-size", "256", "--parallel", "2");
  auto c = srv.client();
  const double budget = 3.0 * 1024 * 1024;
  // Distinct prompts fill the prefix cache; eviction keeps states + cache within the budget.
  for (int i = 0; i < 24; ++i) {
    auto r = post_json(*c, "/v1/completions",
                       json{{"prompt", "Story number " + std::to_string(i) + " begins"}, {"max_tokens", 8}}.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string m = get_metrics(srv);
    const double used = metric(m, "chimera_state_memory_bytes") + metric(m, "chimera_prefix_cache_memory_bytes");
    EXPECT_LE(used, budget) << m;
    EXPECT_EQ(metric(m, "chimera_memory_budget_bytes"), budget) << m;  // sampled by the engine loop
  }
  const std::string m = get_metrics(srv);
  EXPECT_GT(metric(m, "chimera_prefix_cache_entries"), 0) << m;
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

// tiny-mamba2 (recurrent): a prompt of 35 token ids leaves checkpoints at every
// multiple of the interval (and at 35); a second prompt sharing the first 25
// ids restores the longest checkpoint that is a prefix of it.
int64_t restored_tokens(const std::string& model, int64_t interval) {
  ServerProcess srv;
  std::string err;
  EXPECT_TRUE(srv.start(model, {"--checkpoint-interval", std::to_string(interval)}, &err)) << err;
  if (!err.empty()) return -1;
  auto c = srv.client();
  std::vector<int> first, second;
  for (int i = 0; i < 35; ++i) first.push_back(100 + 7 * i);
  second.assign(first.begin(), first.begin() + 25);
  for (int i = 0; i < 15; ++i) second.push_back(900 + i);
  auto r = post_json(*c, "/v1/completions", json{{"prompt", first}, {"max_tokens", 1}}.dump());
  EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
  const double before = metric(get_metrics(srv), "chimera_prefix_cache_hit_tokens_total");
  r = post_json(*c, "/v1/completions", json{{"prompt", second}, {"max_tokens", 1}}.dump());
  EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
  const double after = metric(get_metrics(srv), "chimera_prefix_cache_hit_tokens_total");
  EXPECT_EQ(srv.stop(), 0) << srv.log();
  return (int64_t)(after - before);
}

TEST(ServerFlags, CheckpointIntervalSetsWhereRecurrentPrefixesResume) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/golden/models/tiny-mamba2.gguf";
  EXPECT_EQ(restored_tokens(model, 10), 20);  // checkpoints 10, 20, 30, 35: 20 is the longest prefix of 25
  EXPECT_EQ(restored_tokens(model, 8), 24);   // 8, 16, 24, 32, 35
  EXPECT_EQ(restored_tokens(model, 16), 16);  // 16, 32, 35
}

}  // namespace
}  // namespace chimera::test
