// Soak: 32 concurrent clients hammer one server (8 slots, so requests queue)
// with a mix of streamed and non-streamed greedy completions over prompts that
// share prefixes (the prefix cache restores them) and of clients that hang up
// mid-stream. Every completed response must equal `chimera run`'s output for
// its prompt and length — no lost, duplicated or mixed-up tokens — and at the
// end the server must be idle (no running or waiting requests) and healthy.
// Length: CHIMERA_SOAK_REQUESTS requests per client (default 4, a short CI
// run; e.g. 60 for a long soak). No timing is asserted: every request is
// accounted for (completed or hung up on purpose), none failed.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "server_fixture.h"

namespace chimera::test {
namespace {

TEST(ServerSoak, ConcurrentClientsGetExactOutputs) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = model_path(shared);
  int per_client = 4;
  if (const char* e = std::getenv("CHIMERA_SOAK_REQUESTS"); e && *e) per_client = std::max(1, std::atoi(e));
  constexpr int kClients = 32;
  const std::vector<std::string> prompts = {
      "Once upon a time",
      "Once upon a time, there was a little girl named Lily. She",
      "Once upon a time, there was a little girl named Lily. He",
      "The sun was shining and the birds",
      "Tom had a red ball",
      "The cat and the dog were friends. One day",
      "Mom said",
      "In the big forest there lived a",
  };
  const std::vector<int> lens = {6, 20, 45};
  std::map<std::pair<int, int>, std::string> expect;
  for (int p = 0; p < (int)prompts.size(); ++p)
    for (int n : lens) expect[{p, n}] = run_reference(model, prompts[p], n);

  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model, {"--parallel", "8", "-c", "512", "--prefill-chunk", "32"}, &err)) << err;

  std::atomic<int> completed{0}, aborted{0}, mismatched{0}, failed{0};
  std::mutex mu;
  std::vector<std::string> problems;
  std::vector<std::thread> clients;
  for (int id = 0; id < kClients; ++id) {
    clients.emplace_back([&, id] {
      std::mt19937 rng(1000 + id);
      auto c = srv.client(120);
      for (int req = 0; req < per_client; ++req) {
        const int p = (int)(rng() % prompts.size());
        const int n = lens[rng() % lens.size()];
        const int mode = (int)(rng() % 10);  // 0: hang up mid-stream, 1-5: stream, 6-9: whole response
        json body = {{"model", "stories260K"}, {"prompt", prompts[p]}, {"max_tokens", n}, {"temperature", 0},
                     {"ignore_eos", true}};
        std::string text, why;
        if (mode <= 5) {
          body["stream"] = true;
          StreamResult s = post_stream(*c, "/v1/completions", body, mode == 0 ? 2 : 0);
          if (mode == 0) {
            ++aborted;
            c = srv.client(120);  // the aborted connection is gone
            continue;
          }
          if (s.status != 200 || !s.got_done) why = "stream status " + std::to_string(s.status);
          text = s.text;
        } else {
          auto r = post_json(*c, "/v1/completions", body.dump());
          if (!r || r->status != 200) {
            why = r ? "status " + std::to_string(r->status) + " " + r->body
                  : "no response: " + httplib::to_string(r.error());
          } else {
            json j = json::parse(r->body, nullptr, false);
            if (j.is_discarded()) why = "bad json";
            else text = j["choices"][0]["text"];
          }
        }
        if (!why.empty()) {
          ++failed;
          std::lock_guard<std::mutex> lk(mu);
          if (problems.size() < 10) problems.push_back(why);
          c = srv.client(120);
          continue;
        }
        if (text != expect[{p, n}]) {
          ++mismatched;
          std::lock_guard<std::mutex> lk(mu);
          if (problems.size() < 10)
            problems.push_back("prompt " + std::to_string(p) + " n " + std::to_string(n) + ": got '" + text +
                               "' want '" + expect[{p, n}] + "'");
        }
        ++completed;
      }
    });
  }
  for (auto& t : clients) t.join();
  for (const auto& p : problems) ADD_FAILURE() << p;
  EXPECT_EQ(mismatched.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(completed.load() + aborted.load() + failed.load(), kClients * per_client);
  EXPECT_GT(completed.load(), 0);
  EXPECT_GT(aborted.load(), 0) << "no client hung up: the mix does not exercise disconnects";
  // Idle and healthy afterwards: hung-up clients' slots were freed.
  double running = -1, waiting = -1;
  std::string m;
  for (int i = 0; i < 200; ++i) {  // <= 10 s
    m = get_metrics(srv);
    running = metric(m, "chimera_requests_running");
    waiting = metric(m, "chimera_requests_waiting");
    if (running == 0 && waiting == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(running, 0);
  EXPECT_EQ(waiting, 0);
  EXPECT_GT(metric(m, "chimera_prefix_cache_hit_tokens_total"), 0);
  std::printf("soak: %d requests, %d completed, %d hung up mid-stream, %.0f tokens generated, prefix-cache hit rate %.2f\n",
              kClients * per_client, completed.load(), aborted.load(), metric(m, "chimera_generation_tokens_total"),
              metric(m, "chimera_prefix_cache_hit_rate"));
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

}  // namespace
}  // namespace chimera::test
