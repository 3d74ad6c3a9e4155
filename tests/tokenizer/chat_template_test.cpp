// Real chat templates of the model families chimera serves, rendered for a
// 1-turn and a 2-turn conversation (with a system message where the template
// accepts one), with and without add_generation_prompt. Template texts are
// copied verbatim from the models' tokenizer_config.json (JSON escapes kept as
// C++ escapes for one-line templates; multi-line ones as raw strings). The
// expected strings were written by reading each template, not by running it.
#include <gtest/gtest.h>

#include <fstream>
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

std::string render_error(const std::string& src, const std::vector<ChatMessage>& msgs) {
  auto t = ChatTemplate::parse(src);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  if (!t.is_ok()) return "";
  auto r = t->render(msgs, true, "<s>", "</s>");
  EXPECT_FALSE(r.is_ok()) << "unexpectedly rendered: " << r.value();
  return r.is_ok() ? "" : r.status().message();
}

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

// ---------------------------------------------------------------- Llama-2 chat
// meta-llama/Llama-2-7b-chat-hf
const char* kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif "
    "%}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] "
    "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

TEST(ChatTemplateFamilies, Llama2) {
  const std::string one = "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello! [/INST]";
  const std::string two = one + " Hi there. How can I help? </s><s>[INST] What is 2+2? [/INST]";
  check_family(kLlama2, kOneTurn, kTwoTurn, "<s>", "</s>", {one, one, two, two});
  EXPECT_EQ(render(kLlama2, kOneTurnNoSys, true, "<s>", "</s>"), "<s>[INST] Hello! [/INST]");
  EXPECT_NE(render_error(kLlama2, {{"user", "a"}, {"user", "b"}}).find("Conversation roles must alternate"),
            std::string::npos);
  auto t = ChatTemplate::parse(kLlama2);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->family(), "llama2");
}

// ------------------------------------------------- Llama-3 instruct and LLaDA

Expected llama3_expected(const std::string& bos) {
  const std::string one = bos +
                          "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
                          "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>";
  const std::string two = one +
                          "<|start_header_id|>assistant<|end_header_id|>\n\nHi there. How can I help?<|eot_id|>"
                          "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>";
  const std::string gen = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return {one + gen, one, two + gen, two};
}

TEST(ChatTemplateFamilies, Llama3) {
  check_family(kLlama3, kOneTurn, kTwoTurn, "<|begin_of_text|>", "<|eot_id|>", llama3_expected("<|begin_of_text|>"));
  // `| trim` binds to message['content'] only, before the `+`.
  EXPECT_EQ(render(kLlama3, {{"user", "  padded \n"}}, false, "", ""),
            "<|start_header_id|>user<|end_header_id|>\n\npadded<|eot_id|>");
}

TEST(ChatTemplateFamilies, LLaDA) {
  check_family(kLlama3, kOneTurn, kTwoTurn, "<|startoftext|>", "<|eot_id|>", llama3_expected("<|startoftext|>"));
}

// ------------------------------------------------------ Phi-3 / Phi-3.5 / Phi-4
// microsoft/Phi-3.5-mini-instruct, Phi-3.5-MoE-instruct and Phi-tiny-MoE-instruct
const char* kPhi35 =
    "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + "
    "'<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + "
    "'<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ "
    "eos_token }}{% endif %}";

Expected phi3_expected() {
  const std::string one = "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello!<|end|>\n";
  const std::string two = one + "<|assistant|>\nHi there. How can I help?<|end|>\n<|user|>\nWhat is 2+2?<|end|>\n";
  return {one + "<|assistant|>\n", one + "<|endoftext|>", two + "<|assistant|>\n", two + "<|endoftext|>"};
}

TEST(ChatTemplateFamilies, Phi3) {
  check_family(kPhi3, kOneTurn, kTwoTurn, "<s>", "<|endoftext|>", phi3_expected());
  EXPECT_EQ(render(kPhi3, {{"system", ""}, {"user", "Hi"}}, true, "<s>", "<|endoftext|>"),
            "<|system|>\n<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplateFamilies, Phi35MoEAndPhiTinyMoE) {
  check_family(kPhi35, kOneTurn, kTwoTurn, "<s>", "<|endoftext|>", phi3_expected());
  // An empty system message is dropped by `and message['content']`.
  EXPECT_EQ(render(kPhi35, {{"system", ""}, {"user", "Hi"}}, true, "<s>", "<|endoftext|>"),
            "<|user|>\nHi<|end|>\n<|assistant|>\n");
}


TEST(ChatTemplateFamilies, Phi4Mini) {
  const std::string one = "<|system|>You are a helpful assistant.<|end|><|user|>Hello!<|end|>";
  const std::string two = one + "<|assistant|>Hi there. How can I help?<|end|><|user|>What is 2+2?<|end|>";
  check_family(kPhi4Mini, kOneTurn, kTwoTurn, "<|endoftext|>", "<|endoftext|>",
               {one + "<|assistant|>", one + "<|endoftext|>", two + "<|assistant|>", two + "<|endoftext|>"});
  auto t = ChatTemplate::parse(kPhi4Mini);
  ASSERT_TRUE(t.is_ok());
  ChatRenderOptions opt;
  opt.eos_token = "<|endoftext|>";
  auto msgs = nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "Use tools.", "tools": "[{\"name\": \"f\"}]"},
          {"role": "user", "content": "Go"}])");
  auto r = t->render_json(msgs, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(), "<|system|>Use tools.<|tool|>[{\"name\": \"f\"}]<|/tool|><|end|><|user|>Go<|end|><|assistant|>");
  // `tools` present but null falls back to the plain branch.
  msgs[0]["tools"] = nullptr;
  r = t->render_json(msgs, opt);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(), "<|system|>Use tools.<|end|><|user|>Go<|end|><|assistant|>");
}

// microsoft/Phi-4-mini-flash-reasoning (also /work/shared/golden/hf/phi4flash-tiny-a).
const char* kPhi4Flash =
    "{{ '<|system|>Your name is Phi, an AI math expert developed by Microsoft.' }}{% for message in messages %}{% if "
    "message['role'] == 'system' %} {{ message['content'] }}{% if 'tools' in message and message['tools'] is not "
    "none %}{{ '<|tool|>' + message['tools'] + '<|/tool|>' }}{% endif %}{% endif %}{% endfor %}{{ '<|end|>' }}{% for "
    "message in messages %}{% if message['role'] != 'system' %}{{ '<|' + message['role'] + '|>' + "
    "message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% "
    "else %}{{ eos_token }}{% endif %}";

TEST(ChatTemplateFamilies, Phi4MiniFlashReasoning) {
  const std::string sys = "<|system|>Your name is Phi, an AI math expert developed by Microsoft.";
  const std::string one = sys + " You are a helpful assistant.<|end|><|user|>Hello!<|end|>";
  const std::string two = one + "<|assistant|>Hi there. How can I help?<|end|><|user|>What is 2+2?<|end|>";
  check_family(kPhi4Flash, kOneTurn, kTwoTurn, "<|endoftext|>", "<|endoftext|>",
               {one + "<|assistant|>", one + "<|endoftext|>", two + "<|assistant|>", two + "<|endoftext|>"});
  EXPECT_EQ(render(kPhi4Flash, kOneTurnNoSys, true, "", "<|endoftext|>"),
            sys + "<|end|><|user|>Hello!<|end|><|assistant|>");
}

TEST(ChatTemplateFamilies, Phi4FlashGoldenTemplateMatches) {
  std::string dir = test::shared_dir();
  if (dir.empty()) GTEST_SKIP() << "shared data not found";
  std::ifstream f(dir + "/golden/hf/phi4flash-tiny-a/tokenizer_config.json");
  if (!f) GTEST_SKIP() << "phi4flash golden tokenizer_config.json not found";
  auto cfg = nlohmann::json::parse(f);
  EXPECT_EQ(cfg.at("chat_template").get<std::string>(), kPhi4Flash);
  EXPECT_EQ(render(cfg.at("chat_template").get<std::string>(), kOneTurn, true, "", "<|endoftext|>"),
            "<|system|>Your name is Phi, an AI math expert developed by Microsoft. You are a helpful "
            "assistant.<|end|><|user|>Hello!<|end|><|assistant|>");
}

// -------------------------------------------------------------- ChatML / Qwen2
// Qwen/Qwen2-7B-Instruct; Dream-org/Dream-v0-Instruct-7B ships the same template.
const char* kQwen2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou "
    "are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' "
    "}}{% endif %}";

Expected chatml_expected() {
  const std::string one = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n";
  const std::string two = one +
                          "<|im_start|>assistant\nHi there. How can I help?<|im_end|>\n"
                          "<|im_start|>user\nWhat is 2+2?<|im_end|>\n";
  return {one + "<|im_start|>assistant\n", one, two + "<|im_start|>assistant\n", two};
}

TEST(ChatTemplateFamilies, ChatML) {
  check_family(kChatML, kOneTurn, kTwoTurn, "<s>", "<|im_end|>", chatml_expected());
}

TEST(ChatTemplateFamilies, Qwen2AndDream) {
  check_family(kQwen2, kOneTurn, kTwoTurn, "", "<|im_end|>", chatml_expected());
  // Without a system message the default one is inserted.
  EXPECT_EQ(render(kQwen2, kOneTurnNoSys, true, "", "<|im_end|>"),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
            "<|im_start|>assistant\n");
  auto t = ChatTemplate::parse(kQwen2);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->family(), "chatml");
}

// ------------------------------------------------------------------- Mistral
// mistralai/Mistral-7B-Instruct-v0.1
const char* kMistral01 =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
    "'assistant' %}{{ message['content'] + eos_token + ' ' }}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}";
// mistralai/Mixtral-8x7B-Instruct-v0.1
const char* kMixtral =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
    "'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles "
    "are supported!') }}{% endif %}{% endfor %}";

TEST(ChatTemplateFamilies, Mistral) {
  // These templates reject a system message: that is the model's contract.
  EXPECT_NE(render_error(kMistral01, kOneTurn).find("Conversation roles must alternate"), std::string::npos);
  EXPECT_NE(render_error(kMixtral, kTwoTurn).find("Conversation roles must alternate"), std::string::npos);
  const std::string one = "<s>[INST] Hello! [/INST]";
  check_family(kMistral01, kOneTurnNoSys, kTwoTurnNoSys, "<s>", "</s>",
               {one, one, one + "Hi there. How can I help?</s> [INST] What is 2+2? [/INST]",
                one + "Hi there. How can I help?</s> [INST] What is 2+2? [/INST]"});
  const std::string two = one + "Hi there. How can I help?</s>[INST] What is 2+2? [/INST]";
  check_family(kMixtral, kOneTurnNoSys, kTwoTurnNoSys, "<s>", "</s>", {one, one, two, two});
  EXPECT_NE(render_error(kMixtral, {{"user", "a"}, {"tool", "b"}}).find("Only user and assistant roles"),
            std::string::npos);
}

// ---------------------------------------------------------------------- Gemma
// google/gemma-7b-it and google/gemma-2-2b-it
const char* kGemma =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% "
    "endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "(message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif "
    "%}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if "
    "add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";

TEST(ChatTemplateFamilies, Gemma) {
  EXPECT_NE(render_error(kGemma, kOneTurn).find("System role not supported"), std::string::npos);
  const std::string one = "<bos><start_of_turn>user\nHello!<end_of_turn>\n";
  const std::string two = one +
                          "<start_of_turn>model\nHi there. How can I help?<end_of_turn>\n"
                          "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n";
  const std::string gen = "<start_of_turn>model\n";
  check_family(kGemma, kOneTurnNoSys, kTwoTurnNoSys, "<bos>", "<eos>", {one + gen, one, two + gen, two});
}

// ------------------------------------------------------------ TinyLlama/Zephyr
// HuggingFaceH4/zephyr-7b-beta and TinyLlama/TinyLlama-1.1B-Chat-v1.0
const char* kZephyr =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + "
    "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% "
    "elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif "
    "%}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";

TEST(ChatTemplateFamilies, TinyLlamaZephyr) {
  const std::string one = "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello!</s>\n";
  const std::string two = one + "<|assistant|>\nHi there. How can I help?</s>\n<|user|>\nWhat is 2+2?</s>\n";
  check_family(kZephyr, kOneTurn, kTwoTurn, "<s>", "</s>",
               {one + "<|assistant|>\n", one, two + "<|assistant|>\n", two});
  auto t = ChatTemplate::parse(kZephyr);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->family(), "zephyr");
}

// google/gemma-3-1b-it (system prompt folded into the first user turn).
const char* kGemma3 = R"JINJA({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)JINJA";

// mistralai/Mistral-Nemo-Instruct-2407
const char* kMistralNemo = R"JINJA({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{%- for message in loop_messages | rejectattr("role", "equalto", "tool") | rejectattr("role", "equalto", "tool_results") | selectattr("tool_calls", "undefined") %}
    {%- if (message["role"] == "user") != (loop.index0 % 2 == 0) %}
        {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS][" }}
            {%- for tool in tools %}
        {%- set tool = tool.function %}
        {{- '{"type": "function", "function": {' }}
        {%- for key, val in tool.items() if key != "return" %}
            {%- if val is string %}
            {{- '"' + key + '": "' + val + '"' }}
            {%- else %}
            {{- '"' + key + '": ' + val|tojson }}
            {%- endif %}
            {%- if not loop.last %}
            {{- ", " }}
            {%- endif %}
        {%- endfor %}
        {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST]" + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST]" + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "tool_calls" or message.tool_calls is defined %}
        {%- if message.tool_calls is defined %}
            {%- set tool_calls = message.tool_calls %}
        {%- else %}
            {%- set tool_calls = message.content %}
        {%- endif %}
        {{- "[TOOL_CALLS][" }}
        {%- for tool_call in tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- message["content"] + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS]{"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
)JINJA";

// Qwen/Qwen2.5-7B-Instruct
const char* kQwen25 = R"JINJA({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)JINJA";

// -------------------------------------------------------- Gemma 3, Nemo, Qwen2.5
TEST(ChatTemplateFamilies, Gemma3) {
  const std::string one = "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello!<end_of_turn>\n";
  const std::string two = one +
                          "<start_of_turn>model\nHi there. How can I help?<end_of_turn>\n"
                          "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n";
  const std::string gen = "<start_of_turn>model\n";
  check_family(kGemma3, kOneTurn, kTwoTurn, "<bos>", "<eos>", {one + gen, one, two + gen, two});
  EXPECT_EQ(render(kGemma3, kOneTurnNoSys, true, "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplateFamilies, MistralNemo) {
  const std::string one = "<s>[INST]You are a helpful assistant.\n\nHello![/INST]";
  const std::string two =
      "<s>[INST]Hello![/INST]Hi there. How can I help?</s>[INST]You are a helpful assistant.\n\nWhat is 2+2?[/INST]";
  check_family(kMistralNemo, kOneTurn, kTwoTurn, "<s>", "</s>", {one, one, two, two});
  EXPECT_NE(render_error(kMistralNemo, {{"user", "a"}, {"user", "b"}}).find("roles must alternate"),
            std::string::npos);
}

TEST(ChatTemplateFamilies, Qwen25) {
  check_family(kQwen25, kOneTurn, kTwoTurn, "", "<|im_end|>", chatml_expected());
  ChatRenderOptions opt;
  opt.extra_context["tools"] = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}])");
  EXPECT_EQ(render(kQwen25, kOneTurnNoSys, true, "", "<|im_end|>", opt),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
            "You may call one or more functions to assist with the user query.\n\nYou are provided with function "
            "signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
            "\"f\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n</tools>\n\nFor each function call, "
            "return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
            "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
}

// ------------------------------------------------------------------- fallback
TEST(ChatTemplateFallback, Format) {
  ChatTemplate t = ChatTemplate::fallback();
  EXPECT_TRUE(t.is_fallback());
  EXPECT_EQ(t.family(), "fallback");
  auto r = t.render(kTwoTurn, true, "<s>", "</s>");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(),
            "system: You are a helpful assistant.\nuser: Hello!\nassistant: Hi there. How can I help?\n"
            "user: What is 2+2?\nassistant:");
  r = t.render(kOneTurnNoSys, false, "<s>", "</s>");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r.value(), "user: Hello!\n");
  r = t.render({}, true, "", "");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r.value(), "assistant:");
}

TEST(ChatTemplateApi, ExtraContextVariables) {
  // Qwen3-style thinking switch and a caller-provided variable overriding a default one.
  const char* src =
      "{{- messages[-1].content }}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- if "
      "enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}"
      "{%- endif %}|{{ bos_token }}";
  auto t = ChatTemplate::parse(src);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  ChatRenderOptions opt;
  opt.bos_token = "<s>";
  EXPECT_EQ(t->render(kOneTurnNoSys, opt).value(), "Hello!<|im_start|>assistant\n|<s>");
  opt.extra_context["enable_thinking"] = false;
  opt.extra_context["bos_token"] = "[BOS]";
  EXPECT_EQ(t->render(kOneTurnNoSys, opt).value(), "Hello!<|im_start|>assistant\n<think>\n\n</think>\n\n|[BOS]");
}

TEST(ChatTemplateApi, ErrorsAreStatuses) {
  auto bad = ChatTemplate::parse("{% for m in messages %}{{ m.content }}");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("endfor"), std::string::npos) << bad.status().message();
  auto t = ChatTemplate::parse("{{ messages[0].content }}");
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->family(), "unknown");
  ChatRenderOptions opt;
  EXPECT_FALSE(t->render_json(nlohmann::ordered_json::object(), opt).is_ok());  // messages must be an array
  opt.extra_context = nlohmann::ordered_json::array();
  EXPECT_FALSE(t->render(kOneTurn, opt).is_ok());  // extra context must be an object
  // Rendering can be repeated and the template copied.
  ChatTemplate copy = t.value();
  EXPECT_EQ(copy.render(kOneTurn, true, "", "").value(), "You are a helpful assistant.");
  EXPECT_EQ(copy.render(kTwoTurn, true, "", "").value(), "You are a helpful assistant.");
}

}  // namespace
}  // namespace chimera::tokenizer
