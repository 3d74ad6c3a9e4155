// Tool calling through `chimera serve` (stories260K): tool_choice "required"
// and a named function are forced by the grammar, so every reply parses into
// message.tool_calls whose arguments satisfy the parameter schema, with
// finish_reason "tool_calls", streamed (OpenAI's delta shape) and not; in
// each call format (the model's own template is the plain fallback = the
// generic JSON format; Granite/Hermes-, Phi-4- and Llama-3-style templates
// via --chat-template-file). tool_choice "none" equals no tools; history with
// tool calls renders; bad tool fields are 400s naming the field.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "server_fixture.h"

namespace chimera::test {
namespace {

const json kWeatherParams = json::parse(R"({"type":"object","properties":{
  "city":{"type":"string","enum":["Paris","Oslo","Lima"]},
  "days":{"type":"integer","minimum":1,"maximum":7},
  "note":{"type":"string","maxLength":6}},
  "required":["city","days","note"],"additionalProperties":false})");

json tools() {
  return json::array({{{"type", "function"},
                       {"function", {{"name", "get_weather"}, {"description", "Weather forecast"},
                                     {"parameters", kWeatherParams}}}},
                      {{"type", "function"},
                       {"function", {{"name", "get_time"},
                                     {"parameters", {{"type", "object"},
                                                     {"properties", {{"zone", {{"type", "string"},
                                                                               {"enum", {"UTC", "CET"}}}}}},
                                                     {"required", {"zone"}},
                                                     {"additionalProperties", false}}}}}}});
}

// The arguments (JSON text) satisfy the function's schema.
void expect_valid_call(const std::string& name, const std::string& arguments) {
  json a;
  ASSERT_NO_THROW(a = json::parse(arguments)) << arguments;
  ASSERT_TRUE(a.is_object()) << arguments;
  if (name == "get_weather") {
    EXPECT_EQ(a.size(), 3u) << arguments;
    ASSERT_TRUE(a["city"].is_string()) << arguments;
    EXPECT_TRUE(std::set<std::string>({"Paris", "Oslo", "Lima"}).count(a["city"].get<std::string>())) << arguments;
    ASSERT_TRUE(a["days"].is_number_integer()) << arguments;
    EXPECT_GE(a["days"].get<int>(), 1);
    EXPECT_LE(a["days"].get<int>(), 7);
    ASSERT_TRUE(a["note"].is_string()) << arguments;
  } else {
    ASSERT_EQ(name, "get_time");
    EXPECT_EQ(a.size(), 1u) << arguments;
    EXPECT_TRUE(a["zone"] == "UTC" || a["zone"] == "CET") << arguments;
  }
}

json chat_body(const json& choice, int seed) {
  return {{"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
          {"tools", tools()}, {"tool_choice", choice}, {"seed", seed}};
}

// Non-streamed: returns the single tool call (name, arguments).
void expect_forced_call(httplib::Client& c, const json& choice, int seed, const std::string& want_name = "") {
  auto r = post_json(c, "/v1/chat/completions", chat_body(choice, seed).dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  const json& ch = j["choices"][0];
  EXPECT_EQ(ch["finish_reason"], "tool_calls") << r->body;
  ASSERT_TRUE(ch["message"]["tool_calls"].is_array()) << r->body;
  ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u) << r->body;
  const json& call = ch["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  const std::string name = call["function"]["name"];
  if (!want_name.empty()) {
    EXPECT_EQ(name, want_name);
  }
  expect_valid_call(name, call["function"]["arguments"].get<std::string>());
}

// Streamed: checks OpenAI's delta shape and returns nothing; asserts inside.
void expect_forced_call_streamed(httplib::Client& c, const json& choice, int seed, const std::string& want_name) {
  json body = chat_body(choice, seed);
  body["stream"] = true;
  std::vector<json> deltas;
  std::string finish, content;
  bool done = false;
  const int status = post_sse(
      c, "/v1/chat/completions", body,
      [&](const json& e) {
        if (!e.contains("choices") || e["choices"].empty()) return true;
        const json& ch = e["choices"][0];
        if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
        if (ch["delta"].contains("content") && ch["delta"]["content"].is_string())
          content += ch["delta"]["content"].get<std::string>();
        if (ch["delta"].contains("tool_calls"))
          for (const auto& d : ch["delta"]["tool_calls"]) deltas.push_back(d);
        return true;
      },
      &done);
  ASSERT_EQ(status, 200);
  EXPECT_TRUE(done);
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(content, "");  // the call is never streamed as content
  ASSERT_GE(deltas.size(), 2u);
  // First delta: index, id, type, name, empty arguments; then argument fragments.
  EXPECT_EQ(deltas[0]["index"], 0);
  EXPECT_EQ(deltas[0]["type"], "function");
  EXPECT_EQ(deltas[0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(deltas[0]["function"]["name"], want_name);
  EXPECT_EQ(deltas[0]["function"]["arguments"], "");
  std::string args;
  for (size_t i = 1; i < deltas.size(); ++i) {
    EXPECT_EQ(deltas[i]["index"], 0);
    EXPECT_FALSE(deltas[i].contains("id"));
    args += deltas[i]["function"]["arguments"].get<std::string>();
  }
  expect_valid_call(want_name, args);
}

std::string write_template(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

// Minimal templates of each family, as far as family detection and tools go.
const char* kGraniteTemplate =
    "{%- if tools %}<|start_of_role|>system<|end_of_role|>Tools: {{ tools | tojson }}. Call one as "
    "<tool_call>{\"name\": ..., \"arguments\": ...}</tool_call><|end_of_text|>\n{% endif %}"
    "{%- for m in messages %}<|start_of_role|>{{ m.role }}<|end_of_role|>"
    "{%- if m.tool_calls %}{% for tc in m.tool_calls %}<tool_call>{{ {'name': tc.function.name, 'arguments': "
    "tc.function.arguments} | tojson }}</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|end_of_text|>\n"
    "{% endfor %}{%- if add_generation_prompt %}<|start_of_role|>assistant<|end_of_role|>{% endif %}";
const char* kPhi4Template =
    "{%- for m in messages %}{% if m.role == 'system' and tools %}<|system|>{{ m.content }}<|tool|>{{ tools | tojson }}"
    "<|/tool|><|end|>{% else %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endif %}{% endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}";
const char* kLlama3Template =
    "{%- if tools %}<|start_header_id|>system<|end_header_id|>\n\nFunctions: {{ tools | tojson }}<|eot_id|>{% endif %}"
    "{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% endfor %}"
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";

TEST(ToolCalling, ForcedCallsInEveryFormat) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::vector<std::pair<std::string, std::string>> templates = {
      {"fallback (generic JSON)", ""},
      {"granite", write_template("granite.jinja", kGraniteTemplate)},
      {"phi4", write_template("phi4.jinja", kPhi4Template)},
      {"llama3", write_template("llama3.jinja", kLlama3Template)}};
  for (const auto& [label, file] : templates) {
    SCOPED_TRACE(label);
    std::vector<std::string> args;
    if (!file.empty()) args = {"--chat-template-file", file};
    ServerProcess srv;
    std::string err;
    ASSERT_TRUE(srv.start(model_path(shared), args, &err)) << err;
    auto c = srv.client();
    const json named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
    for (int seed = 1; seed <= 3; ++seed) {
      expect_forced_call(*c, "required", seed);
      expect_forced_call(*c, named, seed, "get_weather");
    }
    expect_forced_call_streamed(*c, named, 4, "get_weather");
    expect_forced_call_streamed(*c, {{"type", "function"}, {"function", {{"name", "get_time"}}}}, 5, "get_time");
  }
}

TEST(ToolCalling, NoneEqualsNoToolsAndHistoryRenders) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {}, &err)) << err;
  auto c = srv.client();
  json plain = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}, {"max_tokens", 12},
                {"temperature", 0}};
  json none = plain;
  none["tools"] = tools();
  none["tool_choice"] = "none";
  auto a = post_json(*c, "/v1/chat/completions", plain.dump());
  auto b = post_json(*c, "/v1/chat/completions", none.dump());
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->status, 200) << a->body;
  ASSERT_EQ(b->status, 200) << b->body;
  const json ja = json::parse(a->body)["choices"][0], jb = json::parse(b->body)["choices"][0];
  EXPECT_EQ(ja["message"]["content"], jb["message"]["content"]);
  EXPECT_FALSE(jb["message"].contains("tool_calls"));
  EXPECT_EQ(jb["finish_reason"], ja["finish_reason"]);
  // auto: the story model just writes text; it comes back as content.
  json autob = plain;
  autob["tools"] = tools();
  auto r = post_json(*c, "/v1/chat/completions", autob.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(json::parse(r->body)["choices"][0]["message"]["content"].is_string()) << r->body;
  // A conversation with an earlier call and its result, then a forced call.
  json hist = chat_body("required", 9);
  hist["messages"] = json::parse(R"([
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 1, \"note\": \"\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 20 C"},
    {"role": "user", "content": "And the time?"}])");
  r = post_json(*c, "/v1/chat/completions", hist.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["finish_reason"], "tool_calls") << r->body;
}

TEST(ToolCalling, BadToolFieldsAre400) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {}, &err)) << err;
  auto c = srv.client();
  auto expect_400 = [&](const std::string& path, const json& body, const std::string& param, const std::string& text) {
    auto r = post_json(*c, path, body.dump());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body.dump() << " -> " << r->body;
    json j = json::parse(r->body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r->body;
    EXPECT_EQ(j["error"]["param"], param) << r->body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(text), std::string::npos) << r->body;
  };
  auto with = [&](std::function<void(json&)> edit) {
    json b = chat_body("auto", 1);
    edit(b);
    return b;
  };
  const std::string chat = "/v1/chat/completions";
  expect_400(chat, with([](json& b) { b["tools"] = "get_weather"; }), "tools", "must be an array");
  expect_400(chat, with([](json& b) { b["tools"][0]["type"] = "retrieval"; }), "tools[0].type", "\"function\"");
  expect_400(chat, with([](json& b) { b["tools"][1]["function"].erase("name"); }), "tools[1].function.name", "1-64");
  expect_400(chat, with([](json& b) { b["tools"][0]["function"]["name"] = "get weather"; }), "tools[0].function.name",
             "1-64");
  expect_400(chat, with([](json& b) { b["tools"][1]["function"]["name"] = "get_weather"; }), "tools[1].function.name",
             "duplicate");
  expect_400(chat, with([](json& b) { b["tools"][0]["function"]["parameters"] = "x"; }),
             "tools[0].function.parameters", "JSON Schema object");
  expect_400(chat, with([](json& b) { b["tools"][0]["function"]["examples"] = json::array(); }),
             "tools[0].function.examples", "not supported");
  expect_400(chat, with([](json& b) { b["tool_choice"] = "sometimes"; }), "tool_choice", "\"required\"");
  expect_400(chat, with([](json& b) { b["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}}; }),
             "tool_choice.function.name", "not in 'tools'");
  expect_400(chat, with([](json& b) { b.erase("tools"); b["tool_choice"] = "required"; }), "tool_choice",
             "non-empty 'tools'");
  expect_400(chat, with([](json& b) {
               b["tool_choice"] = "required";
               b["tools"][0]["function"]["parameters"]["properties"]["note"]["pattern"] = "^a";
             }),
             "tools[0].function.parameters", "pattern");
  expect_400(chat, with([](json& b) { b["parallel_tool_calls"] = "yes"; }), "parallel_tool_calls", "boolean");
  expect_400(chat, with([](json& b) { b["logprobs"] = true; }), "logprobs", "cannot be combined");
  expect_400(chat, with([](json& b) {
               b["tool_choice"] = "required";
               b["response_format"] = {{"type", "json_object"}};
             }),
             "tool_choice", "response_format");
  expect_400(chat, with([](json& b) {
               b["messages"].push_back({{"role", "tool"}, {"content", "42"}});
             }),
             "messages[1].tool_call_id", "tool_call_id");
  expect_400(chat, with([](json& b) {
               b["messages"].push_back({{"role", "assistant"}, {"tool_calls", {{{"type", "function"},
                   {"function", {{"name", "a"}, {"arguments", {{"k", 1}}}}}}}}});
             }),
             "messages[1].tool_calls[0].function.arguments", "JSON text");
  expect_400("/v1/completions", {{"prompt", "Hi"}, {"tools", tools()}}, "tools", "/v1/chat/completions");
  auto h = c->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST(ToolCalling, ChatTemplateFileErrorsStopTheServer) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const auto& [file, expect] : std::vector<std::pair<std::string, std::string>>{
           {temp_path("no-such-template.jinja"), "cannot read"},
           {write_template("broken.jinja", "{% for m in messages %}{{ m.content }}"), "--chat-template-file:"}}) {
    ServerProcess srv;
    std::string err;
    EXPECT_FALSE(srv.start(model_path(shared), {"--chat-template-file", file}, &err));
    EXPECT_NE(err.find(expect), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace chimera::test
