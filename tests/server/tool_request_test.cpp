// Tool request pieces without a server: the forced-call grammar accepts
// exactly the calls whose arguments satisfy the schema, in each format's
// syntax; $ref inside parameters keeps working; templates receive `tools` and
// history arguments as objects; the generic format lists the functions in
// the system prompt.
#include "server/tool_request.h"

#include <gtest/gtest.h>

namespace chimera::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using runtime::grammar::CompiledGrammar;
using runtime::grammar::GrammarMatcher;
using runtime::grammar::TokenVocab;

ToolRequest request(const std::string& choice) {
  ToolRequest tr;
  json body = json::parse(R"({"messages": [{"role": "user", "content": "hi"}], "tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"$ref": "#/$defs/city"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "days"], "additionalProperties": false,
      "$defs": {"city": {"type": "string", "enum": ["Paris", "Oslo"]}}}}},
    {"type": "function", "function": {"name": "now"}}]})");
  if (choice == "named")
    body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  else
    body["tool_choice"] = choice;
  ApiError err;
  EXPECT_TRUE(parse_tool_request(body, true, &tr, &err)) << err.message;
  return tr;
}

bool matches(const runtime::grammar::GrammarSource& src, const std::string& text) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, (char)b));
  auto g = CompiledGrammar::compile(src, TokenVocab::from_bytes(bytes, {}));
  EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << src.text;
  if (!g.is_ok()) return false;
  GrammarMatcher m(*g);
  return m.accept_bytes(text) && m.is_complete();
}

TEST(ToolRequest, ForcedGrammarPerFormat) {
  const ToolRequest req = request("required"), named = request("named");
  runtime::grammar::GrammarSource g;
  ApiError err;
  const std::string w = R"({"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}})";
  const std::string n = R"({"name": "now", "arguments": {}})";
  const std::string bad = R"({"name": "get_weather", "arguments": {"city": "Rome", "days": 2}})";
  ASSERT_TRUE(forced_call_grammar(req, ToolFormat::kGeneric, &g, &err)) << err.message;
  EXPECT_TRUE(matches(g, w)) << g.text;
  EXPECT_TRUE(matches(g, n));
  EXPECT_FALSE(matches(g, bad));
  EXPECT_FALSE(matches(g, R"({"name": "get_weather", "arguments": {"city": "Oslo", "days": 9}})"));
  ASSERT_TRUE(forced_call_grammar(named, ToolFormat::kGeneric, &g, &err));
  EXPECT_TRUE(matches(g, w));
  EXPECT_FALSE(matches(g, n));  // only the named function
  ASSERT_TRUE(forced_call_grammar(named, ToolFormat::kTagged, &g, &err));
  EXPECT_TRUE(matches(g, "<tool_call>\n" + w + "\n</tool_call>"));
  EXPECT_FALSE(matches(g, w));
  ASSERT_TRUE(forced_call_grammar(named, ToolFormat::kPhi4, &g, &err));
  EXPECT_TRUE(matches(g, "<|tool_call|>[" + w + "]<|/tool_call|>"));
  ASSERT_TRUE(forced_call_grammar(named, ToolFormat::kLlama3, &g, &err));
  EXPECT_TRUE(matches(g, R"({"name": "get_weather", "parameters": {"city": "Paris", "days": 7}})"));
  EXPECT_FALSE(matches(g, w));  // Llama 3 says "parameters"
}

TEST(ToolRequest, TemplatesReceiveToolsAndHistory) {
  auto t = tokenizer::ChatTemplate::parse(
      "{% for m in messages %}[{{ m.role }}]{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>"
      "{{ c.function.arguments | tojson }}</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}{% endfor %}"
      "{% if tools %}(tools: {% for x in tools %}{{ x.function.name }} {% endfor %}){% endif %}");
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(tool_format_for(*t), ToolFormat::kTagged);
  EXPECT_EQ(tool_format_for(tokenizer::ChatTemplate::fallback()), ToolFormat::kGeneric);
  auto fmt = [](const std::string& src) {
    auto t = tokenizer::ChatTemplate::parse(src);
    EXPECT_TRUE(t.is_ok()) << src;
    return t.is_ok() ? tool_format_for(*t) : ToolFormat::kGeneric;
  };
  EXPECT_EQ(fmt("<|start_of_role|>{{ tools }}<tool_call>"), ToolFormat::kTagged);          // Granite 4.0
  EXPECT_EQ(fmt("<|im_start|>{{ tools }}<tool_call></tool_call>"), ToolFormat::kTagged);   // Qwen / Hermes
  EXPECT_EQ(fmt("<|user|>{{ tools }}<|end|><|tool|><|assistant|>"), ToolFormat::kPhi4);
  EXPECT_EQ(fmt("<|start_header_id|>{{ tools }}"), ToolFormat::kLlama3);
  EXPECT_EQ(fmt("<|im_start|>{{ messages }}"), ToolFormat::kGeneric);                      // no tool support
  const ojson msgs = ojson::parse(R"([{"role": "user", "content": "w?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"}])");
  ojson out;
  tokenizer::ChatRenderOptions ro;
  ro.add_generation_prompt = false;
  prepare_tool_render(msgs, request("auto"), ToolFormat::kTagged, &out, &ro);
  auto r = t->render_json(out, ro);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, "[user]w?[assistant]<tool_call>{\"city\": \"Oslo\"}</tool_call>[tool]sunny(tools: get_weather now )");
  // tool_choice none: no tools for the template.
  tokenizer::ChatRenderOptions ro2;
  ro2.add_generation_prompt = false;
  prepare_tool_render(msgs, request("none"), ToolFormat::kTagged, &out, &ro2);
  EXPECT_FALSE(ro2.extra_context.contains("tools"));
  // Generic: a system paragraph lists the functions; history calls in the generic JSON.
  tokenizer::ChatRenderOptions ro3;
  prepare_tool_render(msgs, request("auto"), ToolFormat::kGeneric, &out, &ro3);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0]["role"], "system");
  EXPECT_NE(out[0]["content"].get<std::string>().find("\"name\":\"get_weather\""), std::string::npos);
  EXPECT_EQ(out[2]["content"], R"({"name":"get_weather","arguments":{"city":"Oslo"}})");
  EXPECT_FALSE(out[2].contains("tool_calls"));
}

}  // namespace
}  // namespace chimera::server
