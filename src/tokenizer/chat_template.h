// Chat templates: turns a conversation into the prompt text a model was
// trained on, by running the Jinja template stored in a GGUF file's
// `tokenizer.chat_template` (copied from HF tokenizer_config.json) the way
// transformers' apply_chat_template does: trim_blocks + lstrip_blocks, one
// trailing newline dropped, variables `messages`, `add_generation_prompt`,
// `bos_token`, `eos_token` (+ caller extras such as `tools`, `documents`,
// `enable_thinking`, `date_string`), globals `raise_exception` and
// `strftime_now`. Used by `chimera chat` and the OpenAI-compatible server.
//
// Supported Jinja subset (src/tokenizer/jinja/):
//   syntax      {{ }}, {% %}, {# #}, `-` whitespace control, {% raw %}
//   statements  if/elif/else; for (tuple unpacking, `for x in xs if cond`,
//               else branch, loop.index/index0/revindex/revindex0/first/last/
//               length/previtem/nextitem, break/continue); set (incl.
//               `set a, b = ...`, `set ns.attr = ...` on namespace(), block
//               set ... endset); macro (positional/keyword args, defaults);
//               generation ... endgeneration (rendered in place)
//   expressions literals (str with Python escapes, int, float, list, tuple,
//               dict, true/false/none, True/False/None), a.b, a[i], slices
//               [s:e:step], calls with keyword args, `x if c else y`,
//               and or not, in / not in, is / is not, == != < <= > >=,
//               + - * / // % ** ~, unary - +
//   filters     trim length count upper lower title capitalize replace join
//               default/d tojson(indent) string int float abs round first
//               last list reverse sort dictsort unique sum min max items
//               map(attribute=/filter) select reject selectattr rejectattr
//               safe escape/e indent wordcount format(%s/%d)
//   tests       defined undefined none boolean true false integer float
//               number string mapping iterable sequence callable lower upper
//               odd even divisibleby eq/equalto/== ne lt gt le ge in sameas
//   methods     str: strip lstrip rstrip split splitlines startswith endswith
//               upper lower title capitalize replace find count join format
//               isdigit isalpha isalnum isspace; dict: items keys values get
//   globals     range namespace dict raise_exception strftime_now
// Not supported (clear error): include/extends/import/block, call blocks,
// filter blocks, recursive loops, chained comparisons (a < b < c), list
// mutation methods (HF's sandbox forbids them too), format specs in
// str.format. Case mapping (upper/lower/title) is ASCII-only.
//
// Invariants: parse() and render() never abort on bad input: a malformed
// template, an unknown filter/test, raise_exception() or a runaway loop/
// recursion/output returns an error Status (render is bounded by
// jinja::Limits). A ChatTemplate is immutable, cheap to copy and safe to
// render from several threads at once.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/jinja/evaluator.h"

namespace chimera::tokenizer {

namespace jinja {
class Template;
}

struct ChatMessage {
  std::string role;
  std::string content;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  // Extra template variables; they override the ones above on name clashes.
  // e.g. {"tools": [...], "documents": [...], "enable_thinking": false,
  //       "date_string": "26 Jul 2024"}.
  nlohmann::ordered_json extra_context = nlohmann::ordered_json::object();
  // Clock used by strftime_now(); unset = the current time (local time zone).
  std::optional<std::time_t> now;
  jinja::Limits limits;
};

class ChatTemplate {
 public:
  // Parses a Jinja chat template; syntax errors name the line.
  static Result<ChatTemplate> parse(const std::string& source);

  // Used when a model has no chat template. Renders every message as
  // "<role>: <content>\n" and, with add_generation_prompt, ends with
  // "assistant:" (no trailing space or newline). It adds no BOS/EOS: the
  // tokenizer's add_special handles BOS. Example:
  //   "system: Be brief.\nuser: Hi\nassistant:"
  static ChatTemplate fallback();

  Result<std::string> render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                             const std::string& bos_token, const std::string& eos_token) const;
  Result<std::string> render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options) const;
  // Messages as OpenAI-style JSON objects (content may be a list of parts,
  // assistant messages may carry tool_calls, tool messages tool_call_id, ...).
  Result<std::string> render_json(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const;

  const std::string& source() const { return source_; }
  // Family recognised from the template's markers: "llama2", "llama3",
  // "chatml", "phi3", "phi4", "granite", "gemma", "mistral", "zephyr",
  // "fallback" or "unknown". Informational (logs, stop-string defaults).
  const std::string& family() const { return family_; }
  bool is_fallback() const { return family_ == "fallback"; }

 private:
  std::string source_;
  std::string family_;
  std::shared_ptr<const jinja::Template> tmpl_;
};

}  // namespace chimera::tokenizer
