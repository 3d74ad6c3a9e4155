// `chimera serve` end to end (stories260K): concurrent streaming greedy
// outputs equal `chimera run`; chat completions with the prefix cache (a second
// turn does not re-prefill the first); stop strings spanning tokens; seeded
// sampling is reproducible; malformed / wrong-typed / out-of-range requests
// get OpenAI-style 4xx errors and leave the server healthy; API keys; a client
// that disconnects mid-stream frees its slot; tokenize / detokenize.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "server_fixture.h"

namespace chimera::test {
namespace {

const char* kPrompts[] = {
    "Once upon a time",
    "The little dog",
    "Lily and Tom went to the park",
    "One day, a big bird",
};

TEST(Server, HealthModelsMetrics) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared);
  auto c = srv.client();
  auto h = c->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = c->Get("/v1/models");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200);
  json mj = json::parse(m->body);
  EXPECT_EQ(mj["object"], "list");
  EXPECT_EQ(mj["data"][0]["id"], "stories260K");
  const std::string text = get_metrics(srv);
  for (const char* name : {"chimera_requests_running", "chimera_requests_waiting", "chimera_state_memory_bytes",
                           "chimera_prefix_cache_hit_rate", "chimera_time_to_first_token_seconds_count",
                           "chimera_inter_token_latency_seconds_count", "chimera_generation_tokens_total"})
    EXPECT_GE(metric(text, name), 0) << name << "\n" << text;
  c.reset();  // an idle keep-alive connection would hold shutdown for its timeout
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(Server, ConcurrentStreamsMatchChimeraRun) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = model_path(shared);
  const int lens[] = {40, 17, 33, 25};
  std::vector<std::string> expect;
  for (int i = 0; i < 4; ++i) expect.push_back(run_reference(model, kPrompts[i], lens[i]));
  START_SERVER(srv, shared, "--parallel", "3", "--prefill-chunk", "4");
  // Twice each, all at once: 8 requests on 3 slots (the queue and chunked prefill are exercised).
  std::vector<StreamResult> got(8);
  std::vector<std::thread> th;
  for (int k = 0; k < 8; ++k) {
    th.emplace_back([&, k] {
      auto c = srv.client();
      json body = {{"model", "stories260K"}, {"prompt", kPrompts[k % 4]}, {"max_tokens", lens[k % 4]},
                   {"temperature", 0}, {"ignore_eos", true}, {"stream", true},
                   {"stream_options", {{"include_usage", true}}}};
      got[k] = post_stream(*c, "/v1/completions", body);
    });
  }
  for (auto& t : th) t.join();
  for (int k = 0; k < 8; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(got[k].status, 200) << got[k].transport_error << "\n" << srv.log();
    EXPECT_TRUE(got[k].got_done);
    EXPECT_EQ(got[k].text, expect[k % 4]);
    EXPECT_EQ(got[k].finish_reason, "length");
    EXPECT_EQ(got[k].usage.value("completion_tokens", -1), lens[k % 4]);
  }
  // Non-streamed: the same text.
  auto c = srv.client();
  json body = {{"prompt", kPrompts[0]}, {"max_tokens", lens[0]}, {"temperature", 0}, {"ignore_eos", true}};
  auto r = post_json(*c, "/v1/completions", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], expect[0]);
  EXPECT_EQ(j["usage"]["completion_tokens"], lens[0]);
  // The repeated prompt came from the prefix cache.
  EXPECT_GT(j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  EXPECT_GT(metric(get_metrics(srv), "chimera_prefix_cache_hit_tokens_total"), 0);
}

TEST(Server, ChatTurnsReusePrefixAndStreamMatches) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--parallel", "2");
  auto c = srv.client();
  json msgs = json::array({{{"role", "system"}, {"content", "You tell short stories."}},
                           {{"role", "user"}, {"content", "Tell me about a cat."}}});
  json body = {{"messages", msgs}, {"max_tokens", 24}, {"temperature", 0}};
  auto r1 = post_json(*c, "/v1/chat/completions", body.dump());
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  json j1 = json::parse(r1->body);
  EXPECT_EQ(j1["object"], "chat.completion");
  EXPECT_EQ(j1["choices"][0]["message"]["role"], "assistant");
  const std::string reply = j1["choices"][0]["message"]["content"];
  const int p1 = j1["usage"]["prompt_tokens"];
  // Streaming the same request gives the same content, after a role delta.
  body["stream"] = true;
  StreamResult s = post_stream(*c, "/v1/chat/completions", body);
  EXPECT_TRUE(s.saw_role);
  EXPECT_TRUE(s.got_done);
  EXPECT_EQ(s.text, reply);
  // Turn 2 starts with turn 1: its prompt is (almost all) restored, not prefilled.
  const double hits_before = metric(get_metrics(srv), "chimera_prefix_cache_hit_tokens_total");
  msgs.push_back({{"role", "assistant"}, {"content", reply}});
  msgs.push_back({{"role", "user"}, {"content", "And then?"}});
  json body2 = {{"messages", msgs}, {"max_tokens", 8}, {"temperature", 0}};
  auto r2 = post_json(*c, "/v1/chat/completions", body2.dump());
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  json j2 = json::parse(r2->body);
  const int cached = j2["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, p1 - 1) << "turn-1 prompt " << p1 << " tokens";
  EXPECT_GE(metric(get_metrics(srv), "chimera_prefix_cache_hit_tokens_total") - hits_before, cached);
}

TEST(Server, StopStringsAcrossTokenBoundaries) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = model_path(shared);
  const std::string full = run_reference(model, kPrompts[0], 48);
  ASSERT_GT(full.size(), 30u);
  START_SERVER(srv, shared);
  auto c = srv.client();
  // Stops starting at several offsets (most span a token boundary).
  for (size_t off : {5u, 12u, 21u}) {
    const std::string stop = full.substr(off, 6);
    const std::string want = full.substr(0, full.find(stop));
    json body = {{"prompt", kPrompts[0]}, {"max_tokens", 48}, {"temperature", 0}, {"ignore_eos", true},
                 {"stop", json::array({"zzzz-never", stop})}};
    auto r = post_json(*c, "/v1/completions", body.dump());
    ASSERT_TRUE(r);
    json j = json::parse(r->body);
    EXPECT_EQ(j["choices"][0]["text"], want) << "stop '" << stop << "'";
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    body["stream"] = true;
    StreamResult s = post_stream(*c, "/v1/completions", body);
    EXPECT_EQ(s.text, want) << "stop '" << stop << "'";
    EXPECT_EQ(s.finish_reason, "stop");
    EXPECT_EQ(s.text.find(stop), std::string::npos);
  }
}

TEST(Server, SeededSamplingIsReproducible) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared);
  auto c = srv.client();
  json body = {{"prompt", kPrompts[1]}, {"max_tokens", 30}, {"temperature", 0.9}, {"top_p", 0.9}, {"top_k", 20},
               {"min_p", 0.02}, {"presence_penalty", 0.5}, {"frequency_penalty", 0.2}, {"repetition_penalty", 1.1},
               {"seed", 1234}};
  std::string first;
  for (int i = 0; i < 3; ++i) {
    auto r = post_json(*c, "/v1/completions", body.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string t = json::parse(r->body)["choices"][0]["text"];
    if (i == 0) first = t;
    EXPECT_EQ(t, first);
  }
}

TEST(Server, BadRequestsGetOpenAIErrorsAndServerStaysHealthy) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "-c", "256");
  auto c = srv.client();
  std::string long_prompt;
  for (int i = 0; i < 400; ++i) long_prompt += "the cat sat on the mat. ";
  struct Case {
    const char* path;
    std::string body;
    int status;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", "{", 400},
      {"/v1/completions", "", 400},
      {"/v1/completions", "[1,2]", 400},
      {"/v1/completions", "\"just a string\"", 400},
      {"/v1/completions", R"({"max_tokens": 5})", 400},
      {"/v1/completions", R"({"prompt": 123})", 400},
      {"/v1/completions", R"({"prompt": ""})", 400},
      {"/v1/completions", R"({"prompt": ["a", "b"]})", 400},
      {"/v1/completions", R"({"prompt": [999999999]})", 400},
      {"/v1/completions", R"({"prompt": [-1]})", 400},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": "10"})", 400},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": -5})", 400},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": 0})", 400},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": 1000000000000})", 400},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": 18446744073709551615})", 400},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": 1e30})", 400},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": 256})", 400},  // prompt + 256 > 256
      {"/v1/completions", R"({"prompt": "hi", "temperature": "hot"})", 400},
      {"/v1/completions", R"({"prompt": "hi", "temperature": -1})", 400},
      {"/v1/completions", R"({"prompt": "hi", "top_p": 2})", 400},
      {"/v1/completions", R"({"prompt": "hi", "top_k": 1.5})", 400},
      {"/v1/completions", R"({"prompt": "hi", "seed": "x"})", 400},
      {"/v1/completions", R"({"prompt": "hi", "stop": 5})", 400},
      {"/v1/completions", R"({"prompt": "hi", "stop": [""]})", 400},
      {"/v1/completions", R"({"prompt": "hi", "stop": ["a", 1]})", 400},
      {"/v1/completions", R"({"prompt": "hi", "stream": "yes"})", 400},
      {"/v1/completions", R"({"prompt": "hi", "n": 0})", 400},
      {"/v1/completions", R"({"prompt": "hi", "n": 129})", 400},
      {"/v1/completions", R"({"prompt": "hi", "n": 1.5})", 400},
      {"/v1/completions", R"({"prompt": "hi", "echo": true})", 400},
      {"/v1/completions", R"({"prompt": "hi", "model": 7})", 400},
      {"/v1/completions", R"({"prompt": "hi", "model": "gpt-4"})", 404},
      {"/v1/completions", json({{"prompt", long_prompt}}).dump(), 400},
      {"/v1/chat/completions", R"({"messages": []})", 400},
      {"/v1/chat/completions", R"({"messages": "hi"})", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": 1, "content": "x"}]})", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": 5}]})", 400},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})", 400},
      {"/v1/chat/completions", R"({"prompt": "hi"})", 400},
      {"/tokenize", R"({"content": 5})", 400},
      {"/detokenize", R"({"tokens": [1, "a"]})", 400},
      {"/detokenize", R"({"tokens": [123456789]})", 400},
      {"/v1/nope", "{}", 404},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(std::string(k.path) + " " + k.body.substr(0, 120));
    auto r = post_json(*c, k.path, k.body);
    ASSERT_TRUE(r) << "no response";
    EXPECT_EQ(r->status, k.status) << r->body;
    json j = json::parse(r->body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r->body;
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"]["type"].is_string());
    EXPECT_TRUE(j["error"].contains("param"));
    EXPECT_TRUE(j["error"].contains("code"));
  }
  auto g = c->Get("/v1/completions");  // wrong method
  ASSERT_TRUE(g);
  EXPECT_GE(g->status, 400);
  EXPECT_LT(g->status, 500);
  EXPECT_TRUE(json::parse(g->body, nullptr, false).contains("error"));
  // Oversize body (limit 16 MiB).
  auto big = post_json(*c, "/v1/completions", std::string(17u << 20, ' '));
  if (big) {
    EXPECT_EQ(big->status, 413);
  }
  // Still healthy and serving.
  auto h = c->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto ok = post_json(*c, "/v1/completions", R"({"prompt": "Once", "max_tokens": 4, "temperature": 0})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_TRUE(srv.alive());
}

TEST(Server, ApiKey) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--api-key", "sekrit");
  auto c = srv.client();
  const std::string body = R"({"prompt": "Once", "max_tokens": 2})";
  auto r = post_json(*c, "/v1/completions", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "invalid_api_key");
  auto w = post_json(*c, "/v1/completions", body, "wrong");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->status, 401);
  auto ok = post_json(*c, "/v1/completions", body, "sekrit");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto h = c->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST(Server, DisconnectMidStreamFreesSlot) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "-c", "16384", "--parallel", "1");
  auto c = srv.client();
  json body = {{"prompt", kPrompts[0]}, {"max_tokens", 16000}, {"temperature", 0}, {"ignore_eos", true},
               {"stream", true}};
  StreamResult s = post_stream(*c, "/v1/completions", body, /*abort_after=*/3);
  EXPECT_FALSE(s.got_done);
  EXPECT_EQ(s.pieces.size(), 3u) << "transport_ok=" << s.transport_ok << " status=" << s.status
                                 << " error=" << s.error.dump() << "\nserver log:\n" << srv.log();
  // The engine notices at its next write and frees the slot.
  double running = -1, cancelled = -1;
  for (int i = 0; i < 200; ++i) {  // <= 10 s
    const std::string m = get_metrics(srv);
    running = metric(m, "chimera_requests_running");
    cancelled = metric(m, "chimera_requests_total{finish_reason=\"cancelled\"}");
    if (running == 0 && cancelled >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(running, 0);
  EXPECT_EQ(cancelled, 1);
  // The single slot serves the next request.
  auto ok = post_json(*c, "/v1/completions", R"({"prompt": "Once", "max_tokens": 4, "temperature": 0})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST(Server, BenchServeReportsVllmMetrics) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--parallel", "2");
  const std::string out_json = temp_path("bench-serve.json");
  const std::string cmd = chimera_binary() + " bench serve --url http://127.0.0.1:" + std::to_string(srv.port()) +
                          " --input-len 16 --output-len 8 --num-prompts 6 --concurrency 3 --result-file " + out_json +
                          " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char b[4096];
  size_t k;
  while ((k = fread(b, 1, sizeof b, p)) > 0) out.append(b, k);
  EXPECT_EQ(pclose(p), 0) << out;
  for (const char* key : {"Successful requests:", "Failed requests:", "Request throughput (req/s):",
                          "Output token throughput (tok/s):", "Mean TTFT (ms):", "Median TPOT (ms):", "P99 ITL (ms):"})
    EXPECT_NE(out.find(key), std::string::npos) << key << "\n" << out;
  std::ifstream f(out_json);
  json j = json::parse(f, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["completed"], 6);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["total_output_tokens"], 48);
  EXPECT_EQ(j["total_input_tokens"], 96);
}

TEST(Server, TokenizeDetokenize) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared);
  auto c = srv.client();
  auto t = post_json(*c, "/tokenize", R"({"content": "Once upon a time"})");
  ASSERT_TRUE(t);
  ASSERT_EQ(t->status, 200) << t->body;
  json tj = json::parse(t->body);
  ASSERT_GT(tj["tokens"].size(), 2u);
  EXPECT_EQ(tj["count"], tj["tokens"].size());
  auto d = post_json(*c, "/detokenize", json({{"tokens", tj["tokens"]}}).dump());
  ASSERT_TRUE(d);
  ASSERT_EQ(d->status, 200) << d->body;
  EXPECT_EQ(json::parse(d->body)["content"], "Once upon a time");
}

}  // namespace
}  // namespace chimera::test
