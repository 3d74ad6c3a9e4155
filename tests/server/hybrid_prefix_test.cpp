// Issue 9 "must show": on a hybrid model (Mamba-2 + attention, recurrent
// state), the second turn of a chat restores turn 1's prompt + reply from the
// prefix cache (a whole-only recurrent checkpoint taken at the turn boundary),
// prefills only the new tokens, and yields the same tokens and logprobs as a
// cold server given the same request.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "server_fixture.h"

namespace chimera::test {
namespace {

std::string hybrid_model(const std::string& shared) { return shared + "/golden/models/tiny-granitehybrid.gguf"; }

json chat(ServerProcess& srv, const json& body) {
  auto c = srv.client();
  auto r = post_json(*c, "/v1/chat/completions", body.dump());
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body, nullptr, /*allow_exceptions=*/false);
}

TEST(HybridPrefix, SecondTurnPrefillsOnlyNewTokensAndMatchesColdRun) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = hybrid_model(shared);
  ASSERT_TRUE(std::filesystem::exists(model)) << model << " not found";

  ServerProcess warm;
  std::string err;
  ASSERT_TRUE(warm.start(model, {}, &err)) << err;
  json msgs = json::array({{{"role", "system"}, {"content", "You are terse."}},
                           {{"role", "user"}, {"content", "Tell me about a cat."}}});
  json j1 = chat(warm, {{"messages", msgs}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_TRUE(j1.is_object());
  const std::string reply = j1["choices"][0]["message"]["content"];
  const int p1 = j1["usage"]["prompt_tokens"];
  const int g1 = j1["usage"]["completion_tokens"];
  ASSERT_GT(g1, 0);

  msgs.push_back({{"role", "assistant"}, {"content", reply}});
  msgs.push_back({{"role", "user"}, {"content", "And then?"}});
  const json body2 = {{"messages", msgs},  {"max_tokens", 8},     {"temperature", 0},
                      {"logprobs", true}, {"top_logprobs", 5}};
  const std::string m0 = get_metrics(warm);
  const double hit0 = metric(m0, "chimera_prefix_cache_hit_tokens_total");
  const double q0 = metric(m0, "chimera_prefix_cache_query_tokens_total");
  json w = chat(warm, body2);
  ASSERT_TRUE(w.is_object());
  const std::string m1 = get_metrics(warm);
  const int p2 = w["usage"]["prompt_tokens"];
  const int cached = w["usage"]["prompt_tokens_details"]["cached_tokens"];
  // Turn 1's prompt, the reply and the end-of-turn text came from the cache
  // (not only turn 1's prompt).
  EXPECT_GT(cached, p1) << "turn-1 prompt " << p1 << ", turn-2 prompt " << p2;
  EXPECT_LT(cached, p2);
  const double hit = metric(m1, "chimera_prefix_cache_hit_tokens_total") - hit0;
  const double query = metric(m1, "chimera_prefix_cache_query_tokens_total") - q0;
  EXPECT_EQ(hit, cached);
  EXPECT_EQ(query, p2);
  // Prefilled = p2 - cached: only the new user turn + generation prompt.
  const int new_tokens = p2 - cached;
  EXPECT_LT(new_tokens, p2 - p1) << "the reply was prefilled again";

  // A cold server (fresh process, no prefix cache) given the same request.
  ServerProcess cold;
  ASSERT_TRUE(cold.start(model, {"--no-prefix-cache"}, &err)) << err;
  json c = chat(cold, body2);
  ASSERT_TRUE(c.is_object());
  EXPECT_EQ(c["usage"]["prompt_tokens"], p2);
  EXPECT_EQ(c["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(c["choices"][0]["message"]["content"], w["choices"][0]["message"]["content"]);
  const json& wl = w["choices"][0]["logprobs"]["content"];
  const json& cl = c["choices"][0]["logprobs"]["content"];
  ASSERT_TRUE(wl.is_array());
  ASSERT_EQ(wl.size(), cl.size());
  ASSERT_EQ((int)wl.size(), w["usage"]["completion_tokens"].get<int>());
  double max_diff = 0;
  for (size_t i = 0; i < wl.size(); ++i) {
    EXPECT_EQ(wl[i]["token"], cl[i]["token"]) << i;
    max_diff = std::max(max_diff, std::fabs(wl[i]["logprob"].get<double>() - cl[i]["logprob"].get<double>()));
    ASSERT_EQ(wl[i]["top_logprobs"].size(), 5u);
    ASSERT_EQ(cl[i]["top_logprobs"].size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(wl[i]["top_logprobs"][k]["token"], cl[i]["top_logprobs"][k]["token"]) << i << "/" << k;
      max_diff = std::max(max_diff, std::fabs(wl[i]["top_logprobs"][k]["logprob"].get<double>() -
                                              cl[i]["top_logprobs"][k]["logprob"].get<double>()));
    }
  }
  EXPECT_LE(max_diff, 1e-5) << "warm vs cold logprobs";
  RecordProperty("max_logprob_diff", std::to_string(max_diff));
  std::printf("turn 2: prompt %d, cached %d, prefilled %d; max |warm - cold| logprob %.3g\n", p2, cached, new_tokens,
              max_diff);
}

TEST(HybridPrefix, LogprobsValidation) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = hybrid_model(shared);
  ASSERT_TRUE(std::filesystem::exists(model)) << model << " not found";
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model, {}, &err)) << err;
  auto c = srv.client();
  // Completions: legacy shape.
  auto r = post_json(*c, "/v1/completions",
                     json({{"prompt", "Hello"}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", 2}}).dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  const json& lp = j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 3u);
  ASSERT_EQ(lp["token_logprobs"].size(), 3u);
  ASSERT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_LE(lp["token_logprobs"][0].get<double>(), 0.0);
  // top_logprobs without logprobs is refused.
  r = post_json(*c, "/v1/chat/completions",
                json({{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"top_logprobs", 3}}).dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
}

}  // namespace
}  // namespace chimera::test
