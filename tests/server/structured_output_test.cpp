// Structured output through `chimera serve` (stories260K): response_format
// json_schema (strict and not) and json_object, and the "grammar" extension,
// on completions and chat, streamed and not; every answer parses and
// satisfies the schema across seeds. Unknown response_format types, bad
// schemas (unsupported keyword named) and bad grammars are 400s that leave
// the server healthy.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace chimera::test {
namespace {

const json kSchema = json::parse(
    R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":10},)"
    R"("n":{"type":"integer","minimum":0,"maximum":50},"ok":{"type":"boolean"}},)"
    R"("required":["name","n","ok"],"additionalProperties":false})");

void expect_valid(const std::string& text) {
  json v;
  ASSERT_NO_THROW(v = json::parse(text)) << text;
  ASSERT_TRUE(v.is_object()) << text;
  EXPECT_EQ(v.size(), 3u) << text;
  ASSERT_TRUE(v["name"].is_string()) << text;
  ASSERT_TRUE(v["n"].is_number_integer()) << text;
  EXPECT_GE(v["n"].get<int>(), 0);
  EXPECT_LE(v["n"].get<int>(), 50);
  EXPECT_TRUE(v["ok"].is_boolean()) << text;
}

TEST(StructuredOutput, JsonSchemaJsonObjectAndGrammar) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {}, &err)) << err;
  auto c = srv.client();
  for (int seed = 1; seed <= 4; ++seed) {
    for (bool strict : {true, false}) {
      json body = {{"prompt", "Once upon a time"}, {"max_tokens", 300}, {"seed", seed},
                   {"response_format", {{"type", "json_schema"},
                                        {"json_schema", {{"name", "thing"}, {"strict", strict}, {"schema", kSchema}}}}}};
      auto r = c->Post("/v1/completions", body.dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      expect_valid(json::parse(r->body)["choices"][0]["text"].get<std::string>());
    }
  }
  // Chat, streamed, with json_schema.
  json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}, {"max_tokens", 300}, {"seed", 3},
               {"stream", true},
               {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "t"}, {"schema", kSchema}}}}}};
  StreamResult sr = post_stream(*c, "/v1/chat/completions", chat);
  ASSERT_EQ(sr.status, 200);
  expect_valid(sr.text);
  // json_object: any object.
  json jo = {{"prompt", "Hi"}, {"max_tokens", 200}, {"seed", 5}, {"response_format", {{"type", "json_object"}}}};
  auto r = c->Post("/v1/completions", jo.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json obj;
  const std::string text = json::parse(r->body)["choices"][0]["text"];
  const std::string finish = json::parse(r->body)["choices"][0]["finish_reason"];
  if (finish == "stop") {  // a length cut can end mid-object; a stop is a complete one
    ASSERT_NO_THROW(obj = json::parse(text)) << text;
    EXPECT_TRUE(obj.is_object());
  } else {
    EXPECT_EQ(text[0], '{') << text;
  }
  // The grammar extension; "text" means no constraint.
  json g = {{"prompt", "Hi"}, {"max_tokens", 20}, {"temperature", 0}, {"grammar", "root ::= (\"yes\" | \"no\") \"!\""}};
  r = c->Post("/v1/completions", g.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string yn = json::parse(r->body)["choices"][0]["text"];
  EXPECT_TRUE(yn == "yes!" || yn == "no!") << yn;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["finish_reason"], "stop");
  json t = {{"prompt", "Hi"}, {"max_tokens", 5}, {"response_format", {{"type", "text"}}}};
  r = c->Post("/v1/completions", t.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  c.reset();
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(StructuredOutput, BadRequestsAre400) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {}, &err)) << err;
  auto c = srv.client();
  auto post = [&](const json& extra, const std::string& expect) {
    json body = {{"prompt", "Hi"}, {"max_tokens", 5}};
    body.update(extra);
    auto r = c->Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << extra.dump() << " -> " << r->body;
    EXPECT_NE(r->body.find(expect), std::string::npos) << r->body;
  };
  post({{"response_format", {{"type", "xml"}}}}, "unknown response_format type 'xml'");
  post({{"response_format", "json"}}, "must be an object");
  post({{"response_format", {{"type", "json_schema"}}}}, "json_schema' must be an object");
  post({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "a"}}}}}}}},
       "unsupported keyword 'pattern'");
  post({{"grammar", "root ::= \"a"}}, "line 1, column 12: unterminated string literal");
  post({{"grammar", 5}}, "'grammar' must be a string");
  post({{"grammar", "root ::= \"a\""}, {"response_format", {{"type", "json_object"}}}}, "not both");
  auto h = c->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  c.reset();
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

}  // namespace
}  // namespace chimera::test
