// No silently ignored request fields: every top-level field the server does
// not implement is a 400 `unsupported_parameter` naming it, on both
// endpoints; fields of the other endpoint are refused too; the documented
// fields (including `user`, accepted and unused) are accepted.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace chimera::test {
namespace {

TEST(RequestFields, UnimplementedFieldsAreRefusedByName) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {}, &err)) << err;
  auto c = srv.client();
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  const json comp = {{"prompt", "Hi"}, {"max_tokens", 2}};
  auto expect_refused = [&](const char* path, json body, const std::string& field, const json& value) {
    body[field] = value;
    auto r = c->Post(path, body.dump(), "application/json");
    ASSERT_TRUE(r) << field;
    EXPECT_EQ(r->status, 400) << path << " " << field << ": " << r->body;
    const json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object()) << r->body;
    EXPECT_EQ(e["error"]["code"], "unsupported_parameter") << r->body;
    EXPECT_EQ(e["error"]["param"], field) << r->body;
  };
  expect_refused("/v1/completions", comp, "best_of", 2);
  expect_refused("/v1/completions", comp, "tools", json::array());
  for (const char* f : {"logit_bias", "suffix", "functions", "function_call", "store", "metadata",
                        "service_tier", "modalities", "audio", "prediction", "reasoning_effort", "made_up_field"}) {
    expect_refused("/v1/chat/completions", chat, f, json::object());
    expect_refused("/v1/completions", comp, f, json::object());
  }
  expect_refused("/v1/chat/completions", chat, "prompt", "Hi");
  expect_refused("/v1/chat/completions", chat, "echo", false);
  expect_refused("/v1/completions", comp, "messages", json::array());
  expect_refused("/v1/completions", comp, "max_completion_tokens", 2);
  // Documented fields are accepted.
  json ok = chat;
  ok["user"] = "user-1234";
  ok["seed"] = 3;
  ok["stream_options"] = nullptr;
  auto r = c->Post("/v1/chat/completions", ok.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  json okc = comp;
  okc["echo"] = false;
  okc["user"] = "u";
  r = c->Post("/v1/completions", okc.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(srv.alive());
}

// Content given as text parts is the same conversation as the plain string:
// same prompt tokens, same greedy reply (it used to reach the template as a
// printed JSON array).
TEST(RequestFields, TextPartsEqualThePlainString) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {}, &err)) << err;
  auto c = srv.client();
  auto ask = [&](const json& content) {
    const json body = {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 8}, {"temperature", 0}};
    auto r = c->Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body, nullptr, false);
  };
  const json plain = ask("Tell me a story.\nOnce upon a time");
  const json parts = ask(json::array({{{"type", "text"}, {"text", "Tell me a story."}},
                                      {{"type", "text"}, {"text", "Once upon a time"}}}));
  ASSERT_TRUE(plain.is_object() && parts.is_object());
  EXPECT_EQ(parts["usage"]["prompt_tokens"], plain["usage"]["prompt_tokens"]);
  EXPECT_EQ(parts["choices"][0]["message"]["content"], plain["choices"][0]["message"]["content"]);
}

}  // namespace
}  // namespace chimera::test
