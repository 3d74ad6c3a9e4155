// Issue 20 item 3, "n > 1": a request with n choices equals, choice by
// choice, n separate requests seeded seed, seed+1, ..., seed+n-1 (text,
// finish_reason, logprobs), streamed and not, on /v1/completions and
// /v1/chat/completions, for a llama model (stories260K) and for models with
// recurrent state (tiny granitehybrid: Mamba-2 + attention; tiny mamba2);
// usage counts the prompt once and sums the completions; the prompt is
// prefilled once (chimera_prefill_tokens_total); each choice keeps its own
// grammar (response_format) and tool-call parsing; greedy choices are all
// equal; n beyond the server's slots, n out of range and best_of are 400s;
// diffusion models refuse n > 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "server_fixture.h"

namespace chimera::test {
namespace {

struct Choice {
  std::string text;
  std::string finish;
  json logprobs = json::array();  // streamed: every chunk's logprobs in order; else the choice's logprobs
  json tool_calls = json::array();  // streamed: every tool_calls delta in order; else message.tool_calls
  bool saw_role = false;
};

// Tool-call ids are random per call (as OpenAI's): checked, then left out of comparisons.
json without_ids(json calls) {
  for (auto& c : calls) {
    if (!c.contains("id")) continue;
    EXPECT_TRUE(c["id"].is_string() && c["id"].get<std::string>().rfind("call_", 0) == 0) << c.dump();
    c.erase("id");
  }
  return calls;
}

struct Reply {
  int status = 0;
  std::vector<Choice> choices;  // by index
  json usage;
  std::string body;             // non-streamed: the raw body (diagnostics)
};

Reply post_plain(const ServerProcess& srv, const std::string& path, const json& body) {
  Reply out;
  auto c = srv.client();
  auto r = post_json(*c, path, body.dump());
  if (!r) return out;
  out.status = r->status;
  out.body = r->body;
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.contains("choices")) return out;
  out.usage = j["usage"];
  for (const auto& ch : j["choices"]) {
    const size_t i = ch["index"].get<size_t>();
    if (out.choices.size() <= i) out.choices.resize(i + 1);
    Choice& x = out.choices[i];
    const json& t = ch.contains("message") ? ch["message"]["content"] : ch["text"];
    x.text = t.is_string() ? t.get<std::string>() : "";
    if (ch.contains("message") && ch["message"].contains("tool_calls")) x.tool_calls = without_ids(ch["message"]["tool_calls"]);
    x.finish = ch["finish_reason"].is_null() ? "" : ch["finish_reason"].get<std::string>();
    x.logprobs = ch["logprobs"];
  }
  return out;
}

Reply post_streamed(const ServerProcess& srv, const std::string& path, json body) {
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  Reply out;
  auto c = srv.client();
  bool done = false;
  out.status = post_sse(
      *c, path, body,
      [&](const json& j) {
        if (j.contains("usage") && !j["usage"].is_null()) out.usage = j["usage"];
        if (!j.contains("choices")) return true;
        EXPECT_LE(j["choices"].size(), 1u) << j.dump();  // one choice per chunk, as OpenAI streams them
        for (const auto& ch : j["choices"]) {
          const size_t i = ch["index"].get<size_t>();
          if (out.choices.size() <= i) out.choices.resize(i + 1);
          Choice& x = out.choices[i];
          if (ch.contains("text")) x.text += ch["text"].get<std::string>();
          if (ch.contains("delta")) {
            if (ch["delta"].contains("role")) x.saw_role = true;
            if (ch["delta"].contains("content")) x.text += ch["delta"]["content"].get<std::string>();
            if (ch["delta"].contains("tool_calls"))
              for (const auto& d : without_ids(ch["delta"]["tool_calls"])) x.tool_calls.push_back(d);
          }
          if (!ch["finish_reason"].is_null()) x.finish = ch["finish_reason"].get<std::string>();
          if (!ch["logprobs"].is_null()) x.logprobs.push_back(ch["logprobs"]);
        }
        return true;
      },
      &done);
  EXPECT_TRUE(done) << "no [DONE]";
  return out;
}

json completions_body(uint64_t seed) {
  return {{"prompt", "Once upon a time"}, {"max_tokens", 20}, {"seed", seed}, {"logprobs", 2}, {"stop", "."}};
}

json chat_body(uint64_t seed) {
  return {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
          {"max_tokens", 20},
          {"seed", seed},
          {"logprobs", true},
          {"top_logprobs", 2},
          {"stop", "."}};
}

// n = k with seed s equals the requests with seeds s .. s+k-1, choice by
// choice; returns the n = k reply.
Reply check_equals_separate(const ServerProcess& srv, const std::string& path,
                            const std::function<json(uint64_t)>& body, bool stream, int k = 4) {
  const int kN = k;
  constexpr uint64_t kSeed = 1234;
  const bool chat = path == "/v1/chat/completions";
  auto post = [&](const json& b) { return stream ? post_streamed(srv, path, b) : post_plain(srv, path, b); };
  SCOPED_TRACE(path + (stream ? " streamed: " : " non-streamed: ") + body(kSeed).dump());

  json nb = body(kSeed);
  nb["n"] = kN;
  const Reply many = post(nb);
  EXPECT_EQ(many.status, 200) << many.body;
  EXPECT_EQ(many.choices.size(), (size_t)kN) << many.body;
  if (many.status != 200 || many.choices.size() != (size_t)kN) return many;
  int64_t completion_sum = 0, prompt = -1;
  std::set<std::string> distinct;
  for (int i = 0; i < kN; ++i) {
    const Reply one = post(body(kSeed + (uint64_t)i));
    EXPECT_EQ(one.status, 200) << one.body;
    EXPECT_EQ(one.choices.size(), 1u) << one.body;
    if (one.status != 200 || one.choices.size() != 1u) return many;
    EXPECT_EQ(many.choices[(size_t)i].text, one.choices[0].text) << "choice " << i;
    EXPECT_EQ(many.choices[(size_t)i].finish, one.choices[0].finish) << "choice " << i;
    EXPECT_FALSE(many.choices[(size_t)i].finish.empty()) << "choice " << i;
    EXPECT_EQ(many.choices[(size_t)i].logprobs, one.choices[0].logprobs) << "choice " << i;
    EXPECT_EQ(many.choices[(size_t)i].tool_calls, one.choices[0].tool_calls) << "choice " << i;
    if (stream && chat) {
      EXPECT_TRUE(many.choices[(size_t)i].saw_role) << "choice " << i;
    }
    completion_sum += one.usage["completion_tokens"].get<int64_t>();
    prompt = one.usage["prompt_tokens"].get<int64_t>();
    distinct.insert(one.choices[0].text + one.choices[0].tool_calls.dump());
  }
  // The seeds differ, so (at temperature 1) the choices do: the comparison is not vacuous.
  EXPECT_GE(distinct.size(), 2u);
  EXPECT_TRUE(many.usage.is_object()) << many.body;
  if (!many.usage.is_object()) return many;
  EXPECT_EQ(many.usage["prompt_tokens"].get<int64_t>(), prompt);
  EXPECT_EQ(many.usage["completion_tokens"].get<int64_t>(), completion_sum);
  EXPECT_EQ(many.usage["total_tokens"].get<int64_t>(), prompt + completion_sum);
  return many;
}

std::string golden(const std::string& shared, const std::string& name) {
  return shared + "/golden/models/" + name + ".gguf";
}

void check_model(const std::string& model, bool chat) {
  ASSERT_TRUE(std::filesystem::exists(model)) << model << " not found";
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model, {}, &err)) << err;
  for (bool stream : {false, true}) {
    SCOPED_TRACE(model);
    check_equals_separate(srv, "/v1/completions", completions_body, stream);
    if (chat) check_equals_separate(srv, "/v1/chat/completions", chat_body, stream);
  }
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(NChoices, LlamaEqualsSeparatelySeededRequests) {
  CHIMERA_REQUIRE_SHARED(shared);
  check_model(model_path(shared), /*chat=*/true);
}

TEST(NChoices, HybridEqualsSeparatelySeededRequests) {
  CHIMERA_REQUIRE_SHARED(shared);
  check_model(golden(shared, "tiny-granitehybrid"), /*chat=*/true);
}

TEST(NChoices, Mamba2EqualsSeparatelySeededRequests) {
  CHIMERA_REQUIRE_SHARED(shared);
  check_model(golden(shared, "tiny-mamba2"), /*chat=*/false);
}

// The prompt runs through the model once for n choices, n times for n
// separate requests (prefix cache off, so nothing is restored).
void check_prefilled_once(const std::string& model) {
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model, {"--no-prefix-cache"}, &err)) << err;
  auto prefilled = [&] { return metric(get_metrics(srv), "chimera_prefill_tokens_total"); };
  json b = completions_body(7);
  b["n"] = 4;
  const double p0 = prefilled();
  ASSERT_GE(p0, 0) << "chimera_prefill_tokens_total missing";
  const Reply many = post_plain(srv, "/v1/completions", b);
  ASSERT_EQ(many.status, 200) << many.body;
  const int64_t prompt = many.usage["prompt_tokens"].get<int64_t>();
  ASSERT_GT(prompt, 1);
  const double p1 = prefilled();
  EXPECT_EQ(p1 - p0, (double)prompt);
  for (uint64_t s = 7; s < 11; ++s) ASSERT_EQ(post_plain(srv, "/v1/completions", completions_body(s)).status, 200);
  EXPECT_EQ(prefilled() - p1, 4.0 * (double)prompt);
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(NChoices, PromptIsPrefilledOnce) {
  CHIMERA_REQUIRE_SHARED(shared);
  check_prefilled_once(model_path(shared));
  check_prefilled_once(golden(shared, "tiny-granitehybrid"));
}

// Each choice has its own grammar state (response_format) and tool-call
// parsing (a forced call: grammar + parser per choice).
TEST(NChoices, GrammarAndToolCallsPerChoice) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared);
  const json schema = json::parse(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"ok":{"type":"boolean"}},)"
      R"("required":["name","ok"],"additionalProperties":false})");
  auto structured = [&](uint64_t seed) {
    return json{{"prompt", "Once upon a time"},
                {"max_tokens", 200},
                {"seed", seed},
                {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}};
  };
  const json tools = json::array({{{"type", "function"},
                                   {"function",
                                    {{"name", "get_time"},
                                     {"parameters",
                                      {{"type", "object"},
                                       {"properties", {{"zone", {{"type", "string"}, {"enum", {"UTC", "CET"}}}}}},
                                       {"required", {"zone"}}}}}}}});
  auto tool_call = [&](uint64_t seed) {
    return json{{"messages", {{{"role", "user"}, {"content", "What time is it?"}}}},
                {"max_tokens", 200},
                {"seed", seed},
                {"tools", tools},
                {"tool_choice", "required"}};
  };
  for (bool stream : {false, true}) {
    const Reply s = check_equals_separate(srv, "/v1/completions", structured, stream, 3);
    for (const auto& c : s.choices) {
      json v = json::parse(c.text, nullptr, false);
      EXPECT_TRUE(v.is_object() && v.contains("name") && v.contains("ok")) << c.text;
    }
    const Reply t = check_equals_separate(srv, "/v1/chat/completions", tool_call, stream, 3);
    for (const auto& c : t.choices) {
      EXPECT_EQ(c.finish, "tool_calls");
      EXPECT_FALSE(c.tool_calls.empty());
    }
  }
}

TEST(NChoices, GreedyChoicesAreIdentical) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared);
  json b = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}};
  const Reply one = post_plain(srv, "/v1/completions", b);
  ASSERT_EQ(one.status, 200) << one.body;
  ASSERT_EQ(one.choices.size(), 1u);
  b["n"] = 4;
  for (bool stream : {false, true}) {
    const Reply many = stream ? post_streamed(srv, "/v1/completions", b) : post_plain(srv, "/v1/completions", b);
    ASSERT_EQ(many.status, 200) << many.body;
    ASSERT_EQ(many.choices.size(), 4u) << many.body;
    for (const auto& c : many.choices) {
      EXPECT_EQ(c.text, one.choices[0].text);
      EXPECT_EQ(c.finish, one.choices[0].finish);
    }
  }
}

void expect_400(const ServerProcess& srv, const std::string& path, const json& body, const std::string& param) {
  auto c = srv.client();
  auto r = post_json(*c, path, body.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << body.dump() << " -> " << r->body;
  json j = json::parse(r->body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r->body;
  EXPECT_EQ(j["error"]["param"], param) << r->body;
}

TEST(NChoices, OutOfRangeNAndBestOfAreRefused) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--parallel", "3");
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  const json cmpl = {{"prompt", "Hi"}, {"max_tokens", 2}};
  for (const auto& [path, base] : std::vector<std::pair<std::string, json>>{{"/v1/completions", cmpl},
                                                                           {"/v1/chat/completions", chat}}) {
    for (const json& n : {json(4), json(129), json(0), json(-1), json("2"), json(2.5)}) {
      json b = base;
      b["n"] = n;
      expect_400(srv, path, b, "n");
      b["stream"] = true;
      expect_400(srv, path, b, "n");
    }
    json b = base;
    b["n"] = 2;
    b["best_of"] = 3;
    expect_400(srv, path, b, "best_of");
    // The bound is --parallel: n = 3 fits.
    b.erase("best_of");
    b["n"] = 3;
    const Reply ok = post_plain(srv, path, b);
    EXPECT_EQ(ok.status, 200) << ok.body;
    EXPECT_EQ(ok.choices.size(), 3u) << ok.body;
  }
  // The message says what bounds n.
  auto c = srv.client();
  auto r = post_json(*c, "/v1/completions", json({{"prompt", "Hi"}, {"n", 4}}).dump());
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("between 1 and 3"), std::string::npos) << r->body;
}

TEST(NChoices, DiffusionModelRefusesNAboveOne) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = golden(shared, "tiny-llada");
  ASSERT_TRUE(std::filesystem::exists(model)) << model << " not found";
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model, {}, &err)) << err;
  expect_400(srv, "/v1/completions", {{"prompt", "Hi"}, {"n", 2}}, "n");
  const Reply one = post_plain(srv, "/v1/completions", {{"prompt", "Hi"}, {"n", 1}});
  EXPECT_EQ(one.status, 200) << one.body;
}

}  // namespace
}  // namespace chimera::test
