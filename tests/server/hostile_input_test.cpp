// Hostile requests against the real `chimera serve` (stories260K): JSON nested
// 60,000 and 1,000,000 levels deep in every kind of field, multi-megabyte
// prompts, prefix-cache probing across API keys and cache salts, /metrics
// without the key, special-token text in chat messages. Every case asserts the
// 4xx (by its error code, never by timing) and that the server stays alive and
// answers /health afterwards.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/openai_json.h"
#include "server_fixture.h"

namespace chimera::test {
namespace {

std::string nested(const std::string& open, const std::string& close, size_t depth, const std::string& inner = "") {
  std::string s;
  s.reserve((open.size() + close.size()) * depth + inner.size());
  for (size_t i = 0; i < depth; ++i) s += open;
  s += inner;
  for (size_t i = 0; i < depth; ++i) s += close;
  return s;
}

void expect_healthy(const ServerProcess& srv, const std::string& what) {
  EXPECT_TRUE(srv.alive()) << what << "\n" << srv.log();
  EXPECT_TRUE(srv.answers_health()) << what;
}

json error_of(const httplib::Result& r) {
  if (!r) return json();
  json j = json::parse(r->body, nullptr, false);
  return j.is_discarded() || !j.contains("error") ? json() : j["error"];
}

TEST(JsonDepth, ScanCountsBracketsOutsideStrings) {
  using server::json_nesting_depth;
  EXPECT_EQ(json_nesting_depth("{}", 100), 1);
  EXPECT_EQ(json_nesting_depth(R"({"a": [[1], {"b": [2]}]})", 100), 4);
  EXPECT_EQ(json_nesting_depth(R"({"a": "[[[[{{{{"})", 100), 1);        // inside a string
  EXPECT_EQ(json_nesting_depth(R"({"a": "\"[[[[", "b": [1]})", 100), 2);  // escaped quote keeps the string open
  EXPECT_EQ(json_nesting_depth(R"(["\\", [[]]])", 100), 3);                // an escaped backslash ends before the quote
  EXPECT_EQ(json_nesting_depth("]]]][", 100), 1);                           // stray closers never go negative
  // Stops early: a million levels cost no more than the limit.
  EXPECT_EQ(json_nesting_depth(std::string(1000000, '['), 64), 65);
}

// Every place a value can sit in a request, with `V` standing for the deep value.
const std::vector<std::pair<std::string, std::string>> kDeepBodies = {
    {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": V}]})"},
    {"/v1/chat/completions", R"({"messages": [{"role": V, "content": "hi"}]})"},
    {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi", "name": V}]})"},
    {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": [{"type": "text", "text": V}]}]})"},
    {"/v1/chat/completions", R"({"messages": [{"role": "assistant", "content": "", "tool_calls": V}]})"},
    {"/v1/chat/completions", R"({"messages": V})"},
    {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "stop": V})"},
    {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "tools": V})"},
    {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "unknown_field": V})"},
    {"/v1/completions", R"({"prompt": V})"},
    {"/v1/completions", R"({"prompt": "hi", "stream_options": V})"},
    {"/v1/completions", R"({"prompt": "hi", "logit_bias": V})"},
    {"/tokenize", R"({"content": V})"},
    {"/detokenize", R"({"tokens": V})"},
};

std::string with_value(const std::string& body, const std::string& v) {
  std::string s = body;
  s.replace(s.find('V'), 1, v);
  return s;
}

TEST(HostileInput, DeepNestingInEveryFieldIsA400) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "-c", "256");
  auto c = srv.client();
  for (size_t depth : {(size_t)60000, (size_t)1000000}) {
    const std::vector<std::string> values = {nested("[", "]", depth), nested("{\"a\":", "}", depth, "1"),
                                             std::string(depth, '[')};  // unterminated too
    for (const auto& [path, body] : kDeepBodies) {
      for (const auto& v : values) {
        const std::string what = path + " " + body + " depth " + std::to_string(depth) + " (" + v.substr(0, 5) + ")";
        auto r = post_json(*c, path, with_value(body, v));
        ASSERT_TRUE(r) << what << ": no answer; server log:\n" << srv.log();
        EXPECT_EQ(r->status, 400) << what;
        EXPECT_EQ(error_of(r).value("code", ""), "invalid_json") << what << ": " << r->body.substr(0, 300);
      }
    }
    expect_healthy(srv, "after depth " + std::to_string(depth));
  }
  // Ordinary nesting is still accepted (the limit is far above what requests need).
  auto ok = post_json(*c, "/v1/chat/completions",
                      with_value(R"({"messages": [{"role": "user", "content": "hi", "meta": V}], "max_tokens": 2})",
                                 nested("[", "]", 30)));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST(HostileInput, HugePromptsAreRefusedBySize) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "-c", "256");
  auto c = srv.client(120);
  std::string big;
  while (big.size() < (6u << 20)) big += "Once upon a time, a little girl went to the park. ";
  const json bodies[] = {
      {{"prompt", big}, {"max_tokens", 1}},
      {{"messages", {{{"role", "user"}, {"content", big}}}}, {"max_tokens", 1}},
      // Whitespace counts too where no marker can strip it.
      {{"prompt", std::string(6u << 20, ' ') + "x"}, {"max_tokens", 1}},
  };
  const char* paths[] = {"/v1/completions", "/v1/chat/completions", "/v1/completions"};
  for (int i = 0; i < 3; ++i) {
    auto r = post_json(*c, paths[i], bodies[i].dump());
    ASSERT_TRUE(r) << paths[i];
    EXPECT_EQ(r->status, 400) << r->body;
    const json e = error_of(r);
    EXPECT_EQ(e.value("code", ""), "context_length_exceeded") << r->body;
    EXPECT_EQ(e.value("type", ""), "invalid_request_error");
    // Refused from its size ("at least N tokens"), i.e. before tokenization.
    EXPECT_NE(e.value("message", "").find("at least"), std::string::npos) << e.dump();
  }
  // /tokenize counts long texts, but not ones that prove more than 8 contexts of tokens.
  auto t = post_json(*c, "/tokenize", json{{"content", big}}.dump());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 400);
  EXPECT_NE(error_of(t).value("message", "").find("at least"), std::string::npos) << t->body;
  auto t_ok = post_json(*c, "/tokenize", json{{"content", big.substr(0, 4000)}}.dump());
  ASSERT_TRUE(t_ok);
  EXPECT_EQ(t_ok->status, 200) << t_ok->body;
  EXPECT_GT(json::parse(t_ok->body)["count"].get<int>(), 256);  // more than one context is fine
  // A prompt just over the context is tokenized and gets the same error, with the exact count.
  std::string over;
  while (over.size() < 2000) over += "Once upon a time. ";
  auto r = post_json(*c, "/v1/completions", json{{"prompt", over}, {"max_tokens", 1}}.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r).value("code", ""), "context_length_exceeded");
  EXPECT_EQ(error_of(r).value("message", "").find("at least"), std::string::npos) << r->body;
  expect_healthy(srv, "after huge prompts");
}

int64_t cached_tokens(const httplib::Result& r) {
  if (!r || r->status != 200) return -1;
  return json::parse(r->body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
}

const char* kSecret = "Once upon a time there was a princess who kept a secret in a golden box";

httplib::Result complete(httplib::Client& c, const std::string& key, const std::string& salt = "") {
  json b = {{"prompt", kSecret}, {"max_tokens", 1}, {"temperature", 0}};
  if (!salt.empty()) b["cache_salt"] = salt;
  return post_json(c, "/v1/completions", b.dump(), key);
}

TEST(HostileInput, PrefixCacheIsScopedPerKeyAndSalt) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "-c", "256", "--api-key", "alice-key", "--api-key", "bob-key");
  auto c = srv.client();
  EXPECT_EQ(cached_tokens(complete(*c, "alice-key")), 0);
  // Bob probes Alice's prompt: no hit, so nothing learned (and no faster answer).
  EXPECT_EQ(cached_tokens(complete(*c, "bob-key")), 0);
  // Alice's own repeat hits her cache.
  EXPECT_GT(cached_tokens(complete(*c, "alice-key")), 0);
  // A salt partitions within one key: a new salt misses, the same salt hits.
  EXPECT_EQ(cached_tokens(complete(*c, "alice-key", "tenant-1")), 0);
  EXPECT_GT(cached_tokens(complete(*c, "alice-key", "tenant-1")), 0);
  EXPECT_EQ(cached_tokens(complete(*c, "alice-key", "tenant-2")), 0);
  EXPECT_EQ(cached_tokens(complete(*c, "bob-key", "tenant-1")), 0);
  // Bad salts are refused.
  auto bad = post_json(*c, "/v1/completions", R"({"prompt": "x", "cache_salt": 5})", "alice-key");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(error_of(bad).value("param", ""), "cache_salt");
  expect_healthy(srv, "after cache probes");
}

TEST(HostileInput, SharedScopeIsOptIn) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "-c", "256", "--api-key", "alice-key", "--api-key", "bob-key", "--prefix-cache-scope",
               "shared");
  auto c = srv.client();
  EXPECT_EQ(cached_tokens(complete(*c, "alice-key")), 0);
  EXPECT_GT(cached_tokens(complete(*c, "bob-key")), 0);
  // The salt still partitions a shared cache.
  EXPECT_EQ(cached_tokens(complete(*c, "bob-key", "s")), 0);
}

TEST(HostileInput, MetricsNeedTheKeyWhenOneIsSet) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--api-key", "alice-key");
  auto c = srv.client();
  auto open = c->Get("/metrics");
  ASSERT_TRUE(open);
  EXPECT_EQ(open->status, 401);
  EXPECT_EQ(error_of(open).value("code", ""), "invalid_api_key");
  auto keyed = c->Get("/metrics", httplib::Headers{{"Authorization", "Bearer alice-key"}});
  ASSERT_TRUE(keyed);
  EXPECT_EQ(keyed->status, 200);
  EXPECT_NE(keyed->body.find("chimera_prefix_cache_hit_tokens_total"), std::string::npos);
  auto health = c->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

int64_t prompt_tokens(const httplib::Result& r) {
  if (!r || r->status != 200) return -1;
  return json::parse(r->body)["usage"]["prompt_tokens"].get<int64_t>();
}

TEST(HostileInput, SpecialTokenTextInMessagesStaysText) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "-c", "256");
  auto c = srv.client();
  // stories260K: "</s>" is the EOS control token (1 id) when parsed, 4+ ids as text.
  const std::string markers = "</s></s></s></s>";
  auto chat = [&](std::optional<bool> parse_special) {
    json b = {{"messages", {{{"role", "user"}, {"content", markers}}}}, {"max_tokens", 1}};
    if (parse_special) b["parse_special"] = *parse_special;
    return prompt_tokens(post_json(*c, "/v1/chat/completions", b.dump()));
  };
  const int64_t as_text = chat(std::nullopt), parsed = chat(true);
  ASSERT_GT(as_text, 0);
  ASSERT_GT(parsed, 0);
  // Each marker is 1 id parsed and at least 3 as text.
  EXPECT_GE(as_text, parsed + 4 * 2) << "chat contents must not parse special tokens by default";
  // Completions parse them by default (like llama.cpp); "parse_special": false opts out.
  auto completion = [&](std::optional<bool> parse_special) {
    json b = {{"prompt", markers}, {"max_tokens", 1}};
    if (parse_special) b["parse_special"] = *parse_special;
    return prompt_tokens(post_json(*c, "/v1/completions", b.dump()));
  };
  EXPECT_EQ(completion(std::nullopt), 1 + 4);  // BOS + four EOS ids
  EXPECT_GE(completion(false), 1 + 4 * 4);
  // A role spelling a marker is refused, not rendered.
  auto r = post_json(*c, "/v1/chat/completions",
                     json{{"messages", {{{"role", "user</s>"}, {"content", "hi"}}}}}.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(error_of(r).value("message", "").find("messages[0].role"), std::string::npos) << r->body;
  auto bad = post_json(*c, "/v1/completions", R"({"prompt": "x", "parse_special": "yes"})");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  // /tokenize follows llama.cpp (parse_special defaults to true) and takes the field too.
  auto t1 = post_json(*c, "/tokenize", R"({"content": "</s>", "add_special": false})");
  auto t2 = post_json(*c, "/tokenize", R"({"content": "</s>", "add_special": false, "parse_special": false})");
  ASSERT_TRUE(t1 && t2);
  EXPECT_EQ(json::parse(t1->body)["count"], 1);
  EXPECT_GT(json::parse(t2->body)["count"].get<int>(), 1);
  expect_healthy(srv, "after special-token requests");
}

}  // namespace
}  // namespace chimera::test
