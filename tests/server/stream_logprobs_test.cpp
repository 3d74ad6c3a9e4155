// Streamed logprobs (stories260K): SSE chunks of a request that asked carry the
// logprobs of their own tokens in the OpenAI shapes — completions the legacy
// {tokens, token_logprobs, top_logprobs, text_offset} with offsets continuing
// across chunks, chat {content: [{token, logprob, bytes, top_logprobs}]} — and
// concatenated over the stream they equal the non-streamed response's; chunks
// of requests that did not ask carry "logprobs": null.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace chimera::test {
namespace {

// Every JSON chunk of a streamed POST (until [DONE]).
std::vector<json> stream_chunks(httplib::Client& cli, const std::string& path, const json& body) {
  std::vector<json> out;
  EXPECT_EQ(post_sse(cli, path, body, [&](const json& j) {
              out.push_back(j);
              return true;
            }),
            200);
  return out;
}

TEST(StreamLogprobs, CompletionsChunksConcatenateToTheNonStreamedLogprobs) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {}, &err)) << err;
  auto c = srv.client();
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true},
               {"logprobs", 2}};
  auto r = post_json(*c, "/v1/completions", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json whole = json::parse(r->body)["choices"][0]["logprobs"];
  ASSERT_EQ(whole["tokens"].size(), 12u);
  body["stream"] = true;
  json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  std::string text;
  int with_lp = 0;
  for (const json& ch : stream_chunks(*c, "/v1/completions", body)) {
    if (ch["choices"].empty()) continue;
    const json& choice = ch["choices"][0];
    text += choice["text"].get<std::string>();
    if (choice["logprobs"].is_null()) continue;
    ++with_lp;
    const json& lp = choice["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), lp["token_logprobs"].size());
    ASSERT_EQ(lp["tokens"].size(), lp["text_offset"].size());
    for (size_t i = 0; i < lp["tokens"].size(); ++i) {
      tokens.push_back(lp["tokens"][i]);
      lps.push_back(lp["token_logprobs"][i]);
      tops.push_back(lp["top_logprobs"][i]);
      offs.push_back(lp["text_offset"][i]);
    }
  }
  EXPECT_GE(with_lp, 2);  // spread over several chunks, not one at the end
  EXPECT_EQ(tokens, whole["tokens"]);
  EXPECT_EQ(lps, whole["token_logprobs"]);
  EXPECT_EQ(tops, whole["top_logprobs"]);
  EXPECT_EQ(offs, whole["text_offset"]);
  // Without logprobs every chunk says null.
  body.erase("logprobs");
  for (const json& ch : stream_chunks(*c, "/v1/completions", body))
    if (!ch["choices"].empty()) {
      EXPECT_TRUE(ch["choices"][0]["logprobs"].is_null()) << ch.dump();
    }
  c.reset();
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(StreamLogprobs, ChatChunksCarryContentLogprobs) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {}, &err)) << err;
  auto c = srv.client();
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Tell me a story"}}})},
               {"max_tokens", 10},
               {"temperature", 0},
               {"ignore_eos", true},
               {"logprobs", true},
               {"top_logprobs", 3}};
  auto r = post_json(*c, "/v1/chat/completions", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json whole = json::parse(r->body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(whole.size(), 10u);
  body["stream"] = true;
  json content = json::array();
  for (const json& ch : stream_chunks(*c, "/v1/chat/completions", body)) {
    if (ch["choices"].empty()) continue;
    const json& lp = ch["choices"][0]["logprobs"];
    if (lp.is_null()) continue;
    for (const json& t : lp["content"]) {
      EXPECT_EQ(t["top_logprobs"].size(), 3u);
      EXPECT_TRUE(t.contains("bytes"));
      content.push_back(t);
    }
  }
  EXPECT_EQ(content, whole);
  c.reset();
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

}  // namespace
}  // namespace chimera::test
