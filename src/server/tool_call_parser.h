// Tool calls in model output: the call syntaxes our model families are
// trained on, parsed into OpenAI `tool_calls` (name + arguments as a JSON
// string), for whole replies and for streams.
//
//   kTagged   Granite 4.0, Hermes / Qwen (ChatML templates):
//             `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one
//             block per call, text allowed before, between and after them.
//   kPhi4     Phi-4-mini: `<|tool_call|>[{"name": ..., "arguments": {...}}, ...]<|/tool_call|>`
//             (also `functools[...]`); a list item may be the OpenAI shape
//             {"type": "function", "function": {...}}.
//   kLlama3   Llama 3.x: the reply is `{"name": ..., "parameters": {...}}`
//             (optionally after `<|python_tag|>`; several separated by `;`).
//   kGeneric  templates without tool support: the reply is
//             `{"name": ..., "arguments": {...}}` (several separated by `;`
//             or whitespace).
// kLlama3 / kGeneric calls are recognised only at the start of the reply
// (after whitespace), as those formats prescribe. Any malformed call (bad
// JSON, missing name, arguments not an object) makes the whole reply plain
// content: a reply is never half calls, half garbage.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace chimera::server {

enum class ToolFormat { kTagged, kPhi4, kLlama3, kGeneric };
const char* tool_format_name(ToolFormat f);

struct ToolCall {
  std::string id;         // "call_..."
  std::string name;
  std::string arguments;  // a JSON object as text
};

struct ToolParse {
  std::string content;          // the text outside the calls (whole reply when no calls)
  std::vector<ToolCall> calls;  // empty: no (valid) calls
};

// Parses a whole reply. Call ids are fresh random "call_" + 24 alphanumerics.
ToolParse parse_tool_calls(const std::string& text, ToolFormat f);

// Streams: text that is, or may become, a call is held back; the rest passes
// through at once. finish() parses what was held.
class ToolStreamFilter {
 public:
  explicit ToolStreamFilter(ToolFormat f) : format_(f) {}
  // Returns the content that can be sent now.
  std::string feed(const std::string& piece);
  // At the end of generation: the remaining content and the calls.
  ToolParse finish();

 private:
  ToolFormat format_;
  std::string pending_;       // not yet classified
  bool holding_ = false;      // a call has started: everything is held
  bool started_ = false;      // some non-blank text was seen (kLlama3 / kGeneric)
};

// OpenAI JSON for calls: message.tool_calls entries, and the stream's
// delta.tool_calls entries (index, id, type, function{name, arguments}).
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls);

}  // namespace chimera::server
