// The long real chat templates (Llama-3.1/3.2 with tools and dates, Granite 4
// with tools/documents), rendered for a 1-turn and a 2-turn conversation (with a system message where the template
// accepts one), with and without add_generation_prompt. Template texts are
// copied verbatim from the models' tokenizer_config.json (JSON escapes kept as
// C++ escapes for one-line templates; multi-line ones as raw strings). The
// expected strings were written by reading each template, not by running it.
// (Helpers are repeated from chat_template_test.cpp to keep each file standalone.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "chat_test_util.h"
#include "real_chat_templates.h"

namespace chimera::tokenizer {
namespace {

using namespace ::chimera::tokenizer::chat_test;

// Expected outputs of one family: 1-turn / 2-turn, with / without generation prompt.
struct Expected {
  std::string one_gen, one_nogen, two_gen, two_nogen;
};

void check_family(const std::string& src, const std::vector<ChatMessage>& one, const std::vector<ChatMessage>& two,
                  const std::string& bos, const std::string& eos, const Expected& want, ChatRenderOptions opt = {}) {
  EXPECT_EQ(render(src, one, true, bos, eos, opt), want.one_gen);
  EXPECT_EQ(render(src, one, false, bos, eos, opt), want.one_nogen);
  EXPECT_EQ(render(src, two, true, bos, eos, opt), want.two_gen);
  EXPECT_EQ(render(src, two, false, bos, eos, opt), want.two_nogen);
}

// meta-llama/Llama-3.1-8B-Instruct (and Llama-3.3-70B-Instruct)
const char* kLlama31 = R"JINJA({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)JINJA";

// meta-llama/Llama-3.2-1B-Instruct / Llama-3.2-3B-Instruct
const char* kLlama32 = R"JINJA({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)JINJA";


// ----------------------------------------------------------- Llama-3.1 / 3.2
Expected llama31_expected(const std::string& date) {
  const std::string head = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                           "Cutting Knowledge Date: December 2023\nToday Date: " +
                           date + "\n\nYou are a helpful assistant.<|eot_id|>";
  const std::string one = head + "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>";
  const std::string two = one +
                          "<|start_header_id|>assistant<|end_header_id|>\n\nHi there. How can I help?<|eot_id|>"
                          "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>";
  const std::string gen = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return {one + gen, one, two + gen, two};
}

const char* kTempTool = R"({
  "type": "function",
  "function": {
    "name": "get_current_temperature",
    "description": "Get the current temperature at a location.",
    "parameters": {
      "type": "object",
      "properties": {
        "location": {"type": "string", "description": "The location to get the temperature for, in the format \"City, Country\""}
      },
      "required": ["location"]
    },
    "return": {"type": "number", "description": "The current temperature at the specified location in the specified units, as a float."}
  }
})";

TEST(ChatTemplateFamilies, Llama31) {
  check_family(kLlama31, kOneTurn, kTwoTurn, "<|begin_of_text|>", "<|eot_id|>", llama31_expected("26 Jul 2024"));
  EXPECT_EQ(render(kLlama31, kOneTurnNoSys, true, "<|begin_of_text|>", "<|eot_id|>"),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateFamilies, Llama31ToolsInFirstUserMessage) {
  ChatRenderOptions opt;
  opt.extra_context["tools"] = nlohmann::ordered_json::array({nlohmann::ordered_json::parse(kTempTool)});
  std::vector<ChatMessage> msgs = {{"system", "You are a bot that responds to weather queries."},
                                   {"user", "Hey, what's the temperature in Paris right now?"}};
  EXPECT_EQ(render(kLlama31, msgs, true, "<|begin_of_text|>", "<|eot_id|>", opt),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
            "You are a bot that responds to weather queries.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
            "Given the following functions, please respond with a JSON for a function call with its proper "
            "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
            "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n"
            "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_current_temperature\",\n"
            "        \"description\": \"Get the current temperature at a location.\",\n        \"parameters\": {\n"
            "            \"type\": \"object\",\n            \"properties\": {\n                \"location\": {\n"
            "                    \"type\": \"string\",\n                    \"description\": \"The location to get "
            "the temperature for, in the format \\\"City, Country\\\"\"\n                }\n            },\n"
            "            \"required\": [\n                \"location\"\n            ]\n        },\n"
            "        \"return\": {\n            \"type\": \"number\",\n            \"description\": \"The current "
            "temperature at the specified location in the specified units, as a float.\"\n        }\n    }\n}\n\n"
            "Hey, what's the temperature in Paris right now?<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
            "\n\n");
}

TEST(ChatTemplateFamilies, Llama32UsesStrftimeNow) {
  ChatRenderOptions opt;
  opt.now = 1727352000;  // 2024-09-26 12:00:00 UTC
  check_family(kLlama32, kOneTurn, kTwoTurn, "<|begin_of_text|>", "<|eot_id|>", llama31_expected("26 Sep 2024"),
               opt);
  // A caller-provided date_string wins over the clock.
  opt.extra_context["date_string"] = "01 Jan 2025";
  EXPECT_EQ(render(kLlama32, kOneTurn, true, "<|begin_of_text|>", "<|eot_id|>", opt),
            llama31_expected("01 Jan 2025").one_gen);
}

TEST(ChatTemplateFamilies, Llama32ToolCallsAndToolResults) {
  auto t = ChatTemplate::parse(kLlama32);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  ChatRenderOptions opt;
  opt.now = 1727352000;
  opt.bos_token = "<|begin_of_text|>";
  auto msgs = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "Hey"},
    {"role": "assistant", "tool_calls": [{"type": "function", "function":
        {"name": "get_current_temperature", "arguments": {"location": "Paris, France"}}}]},
    {"role": "tool", "content": "22.0"}])");
  auto r = t->render_json(msgs, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  // A string tool result `is iterable`, so the template JSON-quotes it (as transformers does).
  EXPECT_EQ(r.value(),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Sep 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHey<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_current_temperature\", "
            "\"parameters\": {\"location\": \"Paris, France\"}}<|eot_id|>"
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"22.0\"<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Two tool calls in one message is refused by the template itself.
  msgs[1]["tool_calls"].push_back(msgs[1]["tool_calls"][0]);
  r = t->render_json(msgs, opt);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("only supports single tool-calls"), std::string::npos);
}

// ------------------------------------------------------------------ Granite 4
const char* kGraniteDefaultSystem =
    "<|start_of_role|>system<|end_of_role|>You are a helpful assistant. Please ensure responses are professional, "
    "accurate, and safe.<|end_of_text|>\n";

TEST(ChatTemplateFamilies, Granite4) {
  EXPECT_EQ(std::string(kGranite4).size(), 6418u);
  const std::string one =
      "<|start_of_role|>system<|end_of_role|>You are a helpful assistant.<|end_of_text|>\n"
      "<|start_of_role|>user<|end_of_role|>Hello!<|end_of_text|>\n";
  const std::string two = one +
                          "<|start_of_role|>assistant<|end_of_role|>Hi there. How can I help?<|end_of_text|>\n"
                          "<|start_of_role|>user<|end_of_role|>What is 2+2?<|end_of_text|>\n";
  const std::string gen = "<|start_of_role|>assistant<|end_of_role|>";
  check_family(kGranite4, kOneTurn, kTwoTurn, "<|end_of_text|>", "<|end_of_text|>",
               {one + gen, one, two + gen, two});
  EXPECT_EQ(render(kGranite4, kOneTurnNoSys, true, "", "<|end_of_text|>"),
            std::string(kGraniteDefaultSystem) + "<|start_of_role|>user<|end_of_role|>Hello!<|end_of_text|>\n" + gen);
  auto t = ChatTemplate::parse(kGranite4);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->family(), "granite");
}

TEST(ChatTemplateFamilies, Granite4Tools) {
  ChatRenderOptions opt;
  opt.extra_context["tools"] = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Get weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  EXPECT_EQ(
      render(kGranite4, kOneTurn, true, "", "<|end_of_text|>", opt),
      "<|start_of_role|>system<|end_of_role|>You are a helpful assistant.\n\nYou are a helpful assistant with access "
      "to the following tools. You may call one or more tools to assist with the user query.\n\nYou are provided "
      "with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": "
      "{\"name\": \"get_weather\", \"description\": \"Get weather\", \"parameters\": {\"type\": \"object\", "
      "\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each tool "
      "call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
      "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>. If a tool does "
      "not exist in the provided list of tools, notify the user that you do not have the ability to fulfill the "
      "request.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello!<|end_of_text|>\n"
      "<|start_of_role|>assistant<|end_of_role|>");
}

TEST(ChatTemplateFamilies, Granite4ToolCallsAndDocuments) {
  auto t = ChatTemplate::parse(kGranite4);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  ChatRenderOptions opt;
  auto msgs = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
        {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "sunny"}])");
  auto r = t->render_json(msgs, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(), std::string(kGraniteDefaultSystem) +
                           "<|start_of_role|>user<|end_of_role|>Weather in Paris?<|end_of_text|>\n"
                           "<|start_of_role|>assistant<|end_of_role|><tool_call>\n{\"name\": \"get_weather\", "
                           "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|end_of_text|>\n"
                           "<|start_of_role|>user<|end_of_role|>\n<tool_response>\nsunny\n</tool_response>"
                           "<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
  opt.add_generation_prompt = false;
  opt.extra_context["documents"] = nlohmann::ordered_json::parse(R"([{"doc_id": 1, "title": "T", "text": "X"}])");
  r = t->render(kOneTurnNoSys, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(),
            "<|start_of_role|>system<|end_of_role|>You are a helpful assistant with access to the following "
            "documents. You may use one or more documents to assist with the user query.\n\nYou are given a list of "
            "documents within <documents></documents> XML tags:\n<documents>\n{\"doc_id\": 1, \"title\": \"T\", "
            "\"text\": \"X\"}\n</documents>\n\nWrite the response to the user's input by strictly aligning with the "
            "facts in the provided documents. If the information needed to answer the question is not available in "
            "the documents, inform the user that the question cannot be answered based on the available "
            "data.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello!<|end_of_text|>\n");
}

}  // namespace
}  // namespace chimera::tokenizer
