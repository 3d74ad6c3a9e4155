// Tool-call parsers on canned model outputs, one suite per format: single and
// multiple calls, text before the call, malformed JSON -> plain content, and
// the stream filter (content passes, calls are held and parsed at the end,
// whatever the chunking).
#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include "server/tool_response.h"

namespace chimera::server {
namespace {

using json = nlohmann::json;

void expect_call(const ToolCall& c, const std::string& name, const json& args) {
  EXPECT_EQ(c.name, name);
  EXPECT_EQ(c.id.rfind("call_", 0), 0u) << c.id;
  EXPECT_EQ(c.id.size(), 29u);
  json a = json::parse(c.arguments, nullptr, false);
  ASSERT_FALSE(a.is_discarded()) << c.arguments;
  EXPECT_EQ(a, args) << c.arguments;
}

const json kParis = {{"city", "Paris"}, {"days", 3}};

TEST(ToolCallParser, GraniteAndHermesTagged) {
  // Granite 4.0 / Qwen / Hermes: newline-wrapped JSON inside the tags.
  auto p = parse_tool_calls("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
                            ToolFormat::kTagged);
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_weather", kParis);
  EXPECT_EQ(p.content, "");
  // Two calls, text before.
  p = parse_tool_calls("Let me check both.\n<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n"
                       "<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": [1, \"}\"]}}</tool_call>",
                       ToolFormat::kTagged);
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[0], "a", json::object());
  expect_call(p.calls[1], "b", {{"x", {1, "}"}}});
  EXPECT_NE(p.calls[0].id, p.calls[1].id);
  EXPECT_EQ(p.content, "Let me check both.");
  // The last block may lack its closing tag (a stop string cut it).
  p = parse_tool_calls("<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": 1}}", ToolFormat::kTagged);
  ASSERT_EQ(p.calls.size(), 1u);
  // Arguments already encoded as a JSON string are accepted.
  p = parse_tool_calls("<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"k\\\": 1}\"}</tool_call>", ToolFormat::kTagged);
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "a", {{"k", 1}});
}

TEST(ToolCallParser, MalformedIsPlainContent) {
  for (const std::string bad : {"<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": }}</tool_call>",
                                "<tool_call>{\"arguments\": {}}</tool_call>",          // no name
                                "<tool_call>{\"name\": \"a\", \"arguments\": 3}</tool_call>",  // not an object
                                "<tool_call>{\"name\": \"a\", \"arguments\": {}} trailing</tool_call>",
                                "<tool_call>{\"name\": \"a\"",                          // cut
                                "just text about <tool_call> tags"}) {
    auto p = parse_tool_calls(bad, ToolFormat::kTagged);
    EXPECT_TRUE(p.calls.empty()) << bad;
    EXPECT_EQ(p.content, bad);
  }
  // One bad block spoils the reply: no half calls.
  const std::string mixed = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{oops}</tool_call>";
  EXPECT_TRUE(parse_tool_calls(mixed, ToolFormat::kTagged).calls.empty());
  EXPECT_TRUE(parse_tool_calls("{\"name\": \"a\", \"parameters\": {\"k\": ", ToolFormat::kLlama3).calls.empty());
  EXPECT_TRUE(parse_tool_calls("<|tool_call|>[{\"name\": 1}]<|/tool_call|>", ToolFormat::kPhi4).calls.empty());
}

TEST(ToolCallParser, Phi4FunctoolsList) {
  auto p = parse_tool_calls(
      "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}, "
      "{\"type\": \"function\", \"function\": {\"name\": \"now\", \"arguments\": {}}}]<|/tool_call|>",
      ToolFormat::kPhi4);
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[0], "get_weather", kParis);
  expect_call(p.calls[1], "now", json::object());
  p = parse_tool_calls("Sure. functools[{\"name\": \"now\", \"arguments\": {}}]", ToolFormat::kPhi4);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "Sure.");
  p = parse_tool_calls("I think <|tool_call|>[{\"name\": \"now\", \"arguments\": {}}]<|/tool_call|>", ToolFormat::kPhi4);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "I think");
}

TEST(ToolCallParser, Llama3Json) {
  auto p = parse_tool_calls("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}",
                            ToolFormat::kLlama3);
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_weather", kParis);
  p = parse_tool_calls("<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"k\": 2}}",
                       ToolFormat::kLlama3);
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[1], "b", {{"k", 2}});
  // Only at the start of the reply: JSON in prose is content.
  p = parse_tool_calls("The call would be {\"name\": \"a\", \"parameters\": {}}", ToolFormat::kLlama3);
  EXPECT_TRUE(p.calls.empty());
  // Plain JSON that is not a call is content.
  EXPECT_TRUE(parse_tool_calls("{\"answer\": 42}", ToolFormat::kLlama3).calls.empty());
}

TEST(ToolCallParser, GenericJson) {
  auto p = parse_tool_calls("  {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n",
                            ToolFormat::kGeneric);
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_weather", kParis);
  EXPECT_TRUE(parse_tool_calls("Hello there", ToolFormat::kGeneric).calls.empty());
}

// Feeds `text` in pieces of `step` bytes; returns streamed content + final parse.
ToolParse stream(const std::string& text, ToolFormat f, size_t step, std::string* streamed) {
  ToolStreamFilter flt(f);
  for (size_t i = 0; i < text.size(); i += step) *streamed += flt.feed(text.substr(i, step));
  return flt.finish();
}

TEST(ToolCallParser, StreamFilterAnyChunking) {
  const std::string tagged = "Checking.\n<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": \"<tool_call>\"}}</tool_call>";
  const std::string phi = "<|tool_call|>[{\"name\": \"a\", \"arguments\": {}}]<|/tool_call|>";
  const std::string llama = "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}";
  for (size_t step : {1, 2, 3, 7, 1000}) {
    std::string out;
    ToolParse p = stream(tagged, ToolFormat::kTagged, step, &out);
    EXPECT_EQ(out, "Checking.\n") << step;  // content before the tag streams, the call never does
    ASSERT_EQ(p.calls.size(), 1u) << step;
    EXPECT_EQ(p.calls[0].arguments, R"({"k":"<tool_call>"})");
    out.clear();
    p = stream(phi, ToolFormat::kPhi4, step, &out);
    EXPECT_EQ(out, "") << step;
    ASSERT_EQ(p.calls.size(), 1u) << step;
    out.clear();
    p = stream(llama, ToolFormat::kLlama3, step, &out);
    EXPECT_EQ(out, "") << step;
    ASSERT_EQ(p.calls.size(), 1u) << step;
    // Plain text passes through (all of it by the end), no calls.
    for (ToolFormat f : {ToolFormat::kTagged, ToolFormat::kPhi4, ToolFormat::kLlama3, ToolFormat::kGeneric}) {
      out.clear();
      p = stream("Once upon a <time> there was {json}", f, step, &out);
      EXPECT_EQ(out + p.content, "Once upon a <time> there was {json}") << tool_format_name(f) << " " << step;
      EXPECT_TRUE(p.calls.empty());
    }
    // A malformed held call comes back as content.
    out.clear();
    p = stream("<tool_call>{broken", ToolFormat::kTagged, step, &out);
    EXPECT_TRUE(p.calls.empty());
    EXPECT_EQ(out + p.content, "<tool_call>{broken");
  }
}

TEST(ToolCallParser, ResponseShapes) {
  ResponseMeta m{"chatcmpl-1", 1, "m", true};
  ToolSession ts;
  ts.req.tools = nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"a"}}])");
  ts.format = ToolFormat::kTagged;
  const std::string text = "<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": 1}}</tool_call>";
  json body = json::parse(with_tool_calls(completion_body(m, text, FinishReason::kStop, Usage{}), text, ts));
  const json& c = body["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  EXPECT_TRUE(c["message"]["content"].is_null());
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(c["message"]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "a");
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["arguments"], R"({"k":1})");
  // Stream tail: head delta (id, type, name, empty arguments), arguments delta, finish chunk.
  ToolStreamFilter f(ToolFormat::kTagged);
  EXPECT_EQ(f.feed(text), "");
  auto tail = tool_stream_tail(m, f, ts, FinishReason::kStop);
  ASSERT_EQ(tail.size(), 3u);
  json h = json::parse(tail[0])["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(h["index"], 0);
  EXPECT_EQ(h["function"]["name"], "a");
  EXPECT_EQ(h["function"]["arguments"], "");
  EXPECT_EQ(h["id"].get<std::string>().rfind("call_", 0), 0u);
  json a = json::parse(tail[1])["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(a["index"], 0);
  EXPECT_FALSE(a.contains("id"));
  EXPECT_EQ(a["function"]["arguments"], R"({"k":1})");
  EXPECT_EQ(json::parse(tail[2])["choices"][0]["finish_reason"], "tool_calls");
  // Tools not active (tool_choice none): the body is unchanged.
  ts.req.choice = ToolRequest::Choice::kNone;
  const std::string plain = completion_body(m, text, FinishReason::kStop, Usage{});
  EXPECT_EQ(with_tool_calls(plain, text, ts), plain);
}

}  // namespace
}  // namespace chimera::server
