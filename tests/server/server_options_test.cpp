// Server options and request fields no other test reaches (stories260K):
// --alias names the model in /v1/models and in requests; max_completion_tokens
// (chat) bounds the reply and wins over max_tokens; a content part that is not
// text is refused naming the field; /metrics values count what was served;
// `bench serve` drives the chat endpoint at a request rate; a full queue is
// refused with kOutOfRange (the server's 429).
#include <gtest/gtest.h>

#include "models/model.h"
#include "server/engine.h"
#include "server_fixture.h"

namespace chimera::test {
namespace {

json post_ok(httplib::Client& c, const std::string& path, const json& body) {
  auto r = post_json(c, path, body.dump());
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body, nullptr, false);
}

TEST(ServerOptions, AliasNamesTheModel) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {"--alias", "tiny-story-teller"}, &err)) << err;
  auto c = srv.client();
  auto m = c->Get("/v1/models");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200);
  const json mj = json::parse(m->body);
  ASSERT_EQ(mj["data"].size(), 1u);
  EXPECT_EQ(mj["data"][0]["id"], "tiny-story-teller");
  const json ok = post_ok(*c, "/v1/completions", {{"model", "tiny-story-teller"}, {"prompt", "Once"}, {"max_tokens", 2}});
  EXPECT_EQ(ok["model"], "tiny-story-teller");
  auto r = post_json(*c, "/v1/completions", json{{"model", "stories260K"}, {"prompt", "Once"}, {"max_tokens", 2}}.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  c.reset();
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerOptions, MaxCompletionTokensAndNonTextParts) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {}, &err)) << err;
  auto c = srv.client();
  const json msgs = json::array({{{"role", "user"}, {"content", "Tell me a story"}}});
  json j = post_ok(*c, "/v1/chat/completions",
                   {{"messages", msgs}, {"max_completion_tokens", 5}, {"max_tokens", 9}, {"temperature", 0},
                    {"ignore_eos", true}});
  EXPECT_EQ(j["usage"]["completion_tokens"], 5) << j.dump();
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  j = post_ok(*c, "/v1/chat/completions",
              {{"messages", msgs}, {"max_completion_tokens", 7}, {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(j["usage"]["completion_tokens"], 7) << j.dump();
  // A part of another type is refused, naming the field.
  auto r = post_json(*c, "/v1/chat/completions",
                     json{{"messages", json::array({{{"role", "user"},
                                                     {"content", json::array({{{"type", "image_url"},
                                                                               {"image_url", "x"}}})}}})}}
                         .dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("content"), std::string::npos) << r->body;
  c.reset();
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerOptions, MetricValuesCountWhatWasServed) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {"--no-prefix-cache"}, &err)) << err;
  auto c = srv.client();
  const std::string m0 = get_metrics(srv);
  int64_t prompt = 0, gen = 0;
  const std::vector<std::pair<std::string, int>> reqs = {{"Once upon a time", 5}, {"The little dog", 9},
                                                         {"Lily and Tom", 3}};
  for (const auto& [p, n] : reqs) {
    const json j = post_ok(*c, "/v1/completions", {{"prompt", p}, {"max_tokens", n}, {"ignore_eos", true}});
    prompt += j["usage"]["prompt_tokens"].get<int64_t>();
    gen += j["usage"]["completion_tokens"].get<int64_t>();
    EXPECT_EQ(j["usage"]["completion_tokens"], n);
  }
  auto bad = post_json(*c, "/v1/completions", json{{"prompt", 3}}.dump());
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  const std::string m = get_metrics(srv);
  EXPECT_EQ(metric(m, "chimera_prompt_tokens_total"), (double)prompt) << m;
  EXPECT_EQ(metric(m, "chimera_generation_tokens_total"), (double)gen) << m;
  EXPECT_EQ(metric(m, "chimera_requests_total{finish_reason=\"length\"}"), 3) << m;
  EXPECT_EQ(metric(m, "chimera_requests_total{finish_reason=\"stop\"}"), 0) << m;
  // HTTP responses since m0: at least the 3 completions (plus /health and
  // /metrics requests, whose log lines may land on either side of m0); the
  // one bad request is the only 400.
  const double ok = metric(m, "chimera_http_requests_total{code=\"200\"}") -
                    metric(m0, "chimera_http_requests_total{code=\"200\"}");
  EXPECT_GE(ok, 3) << m;
  EXPECT_EQ(metric(m, "chimera_http_requests_total{code=\"400\"}"), 1) << m;
  EXPECT_EQ(metric(m, "chimera_time_to_first_token_seconds_count"), 3) << m;
  EXPECT_EQ(metric(m, "chimera_request_latency_seconds_count"), 3) << m;
  // One inter-token gap per generated token after the first of each request.
  EXPECT_EQ(metric(m, "chimera_inter_token_latency_seconds_count"), (double)(gen - 3)) << m;
  EXPECT_EQ(metric(m, "chimera_prefix_cache_hit_tokens_total"), 0) << m;
  // The gauges are sampled by the engine loop after it releases a finished
  // request's slot, which may follow the response by one iteration: they must
  // reach 0 (bounded wait: 30 s, for a machine loaded by parallel test runs),
  // not already be 0 at the first scrape.
  std::string g = m;
  for (int i = 0; i < 600 && (metric(g, "chimera_requests_running") != 0 || metric(g, "chimera_requests_waiting") != 0);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    g = get_metrics(srv);
  }
  EXPECT_EQ(metric(g, "chimera_requests_running"), 0) << g;
  EXPECT_EQ(metric(g, "chimera_requests_waiting"), 0) << g;
  c.reset();
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerOptions, BenchServeChatEndpointWithRequestRate) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {"--parallel", "2"}, &err)) << err;
  const std::string out_json = temp_path("bench-serve-chat.json");
  const SplitResult r = run_chimera_split("bench serve --url http://127.0.0.1:" + std::to_string(srv.port()) +
                                          " --endpoint /v1/chat/completions --request-rate 50 --input-len 12"
                                          " --output-len 6 --num-prompts 5 --result-file " + out_json);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream f(out_json);
  const json j = json::parse(f, nullptr, false);
  std::filesystem::remove(out_json);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["completed"], 5);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["total_output_tokens"], 30);
  // The server saw exactly those: five chat requests that ran to their length.
  const std::string m = get_metrics(srv);
  EXPECT_EQ(metric(m, "chimera_requests_total{finish_reason=\"length\"}"), 5) << m;
  EXPECT_EQ(metric(m, "chimera_generation_tokens_total"), 30) << m;
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(EngineQueue, FullQueueIsRefusedWithOutOfRange) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto model = models::load_model(model_path(shared));
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ThreadPool pool(1);
  server::EngineOptions o;
  o.n_ctx = 128;
  o.max_running = 1;
  o.max_queue = 0;  // nothing may wait: every submission is refused
  server::Engine e(**model, &pool, o, nullptr);
  ASSERT_TRUE(e.start().is_ok());
  server::GenerationParams p;
  p.prompt = {1, 2, 3};
  p.max_tokens = 2;
  auto r = e.submit(p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);  // HTTP 429 in http_server.cpp
  EXPECT_NE(r.status().message().find("too many requests"), std::string::npos) << r.status().message();
  e.stop();
}

}  // namespace
}  // namespace chimera::test
