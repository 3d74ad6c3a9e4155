// Diffusion requests do not hold the engine loop (tiny-llada): each advances
// one denoising step per engine iteration, so a short request sent while a long
// one is streaming finishes first (with whole-request generation it would wait
// for the long one), /health is answered while the long one is still
// streaming, and both outputs equal `chimera run` alone. Only the order of
// events is asserted, never a duration.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "server_fixture.h"

namespace chimera::test {
namespace {

using Clock = std::chrono::steady_clock;

struct Timed {
  std::string text;
  Clock::time_point first{}, last{};
  int chunks = 0;
};

Timed stream_timed(httplib::Client& cli, const json& body, std::function<void()> on_first = nullptr) {
  Timed t;
  const int status = post_sse(cli, "/v1/completions", body, [&](const json& j) {
    if (!j.contains("choices") || j["choices"].empty()) return true;
    const std::string piece = j["choices"][0]["text"].get<std::string>();
    if (piece.empty()) return true;
    const auto now = Clock::now();
    if (t.chunks++ == 0) {
      t.first = now;
      if (on_first) on_first();
    }
    t.last = now;
    t.text += piece;
    return true;
  });
  EXPECT_EQ(status, 200);
  return t;
}

std::string run_text(const std::string& model, const json& ids, const std::string& flags) {
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) list += ',';
    list += std::to_string(ids[i].get<int>());
  }
  const std::string cmd = chimera_binary() + " run -q --threads 1 -m " + model + " -t " + list +
                          " --temp 0 --ignore-eos " + flags + " 2>/dev/null";
  std::string out = command_output(cmd);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(DiffusionInterleave, ConcurrentRequestsInterleaveAndMatchRun) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/golden/models/tiny-llada.gguf";
  std::ifstream f(shared + "/golden/tiny-llada.json");
  const json ids = json::parse(f)["prompt_tokens"];
  json ids_b = ids;
  ids_b.erase(ids_b.begin());  // a different prompt
  // Long: 16 blocks of 16 tokens, one step each token; short: 2 blocks.
  const std::string want_a = run_text(model, ids, "-n 256 --steps 256 --block-length 16");
  const std::string want_b = run_text(model, ids_b, "-n 32 --steps 32 --block-length 16");
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model, {"--parallel", "2", "--block-length", "16"}, &err)) << err;
  auto body = [](const json& p, int n) {
    return json{{"prompt", p}, {"max_tokens", n}, {"steps", n}, {"temperature", 0}, {"ignore_eos", true},
                {"stream", true}};
  };
  Timed a, b;
  std::atomic<bool> a_streaming{false};
  std::thread ta([&] { a = stream_timed(*srv.client(), body(ids, 256), [&] { a_streaming = true; }); });
  const auto t0 = Clock::now();
  while (!a_streaming && Clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(a_streaming);
  std::thread tb([&] { b = stream_timed(*srv.client(), body(ids_b, 32)); });
  // /health while both generate.
  auto h = srv.client(10)->Get("/health");
  const auto health_done = Clock::now();
  tb.join();
  ta.join();
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  // Answered before the long request finished (a server that ran a diffusion
  // request to its end inside the loop would answer only afterwards).
  EXPECT_LT(health_done, a.last);
  EXPECT_EQ(a.text, want_a);
  EXPECT_EQ(b.text, want_b);
  ASSERT_GE(a.chunks, 2);
  ASSERT_GE(b.chunks, 2);
  // The short request, sent while the long one streamed, ended before it.
  EXPECT_LT(b.last, a.last);
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

}  // namespace
}  // namespace chimera::test
