// Tool calling on /v1/chat/completions: validation of `tools`,
// `tool_choice`, `parallel_tool_calls` and of tool history in `messages`
// (assistant `tool_calls`, `tool` messages), the template inputs (the
// `tools` variable; history as HF templates expect, arguments as objects),
// the call format of a chat template, and the grammar that forces a call
// (`tool_choice` "required" or a named function) whose arguments satisfy the
// function's parameter schema.
//
// Templates that mention `tools` get them as the `tools` variable and their
// family's call syntax (tool_call_parser.h); any other template (and the
// fallback) gets the generic format: a system-prompt paragraph listing the
// functions and asking for `{"name": ..., "arguments": {...}}`, with history
// calls written in that format.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/grammar/grammar_constraint.h"
#include "server/openai_json.h"
#include "server/tool_call_parser.h"
#include "tokenizer/chat_template.h"

namespace chimera::server {

// Parses the tool fields of a request body (object). Chat only: on
// completions any of them is a 400. Also validates tool history in
// `messages`, and refuses `logprobs` together with active tools and a
// response_format / grammar together with a forced call. Errors name the field.
// (parse_generation_request calls it: ParsedRequest::tools.)
bool parse_tool_request(const nlohmann::json& body, bool chat, ToolRequest* out, ApiError* err);

// The call format a template is trained on (kGeneric when it has no tool support).
ToolFormat tool_format_for(const tokenizer::ChatTemplate& t);

// Messages and extra template variables for rendering `messages` with `tr`.
// Returns how many messages were inserted in front (1: the generic format's
// system paragraph, when the conversation has no system message; else 0).
int prepare_tool_render(const nlohmann::ordered_json& messages, const ToolRequest& tr, ToolFormat f,
                        nlohmann::ordered_json* out_messages, tokenizer::ChatRenderOptions* ro);

// Everything a request needs to handle tools after validation: the request's
// fields and the server's template's call format.
struct ToolSession {
  ToolRequest req;
  ToolFormat format = ToolFormat::kGeneric;
};

// Generation parameters for active tools: special tokens rendered (call
// tags), and for a forced choice the call grammar.
bool apply_tool_generation(const ToolSession& ts, GenerationParams* gp, ApiError* err);

// GBNF forcing one call (of the named function, or of any tool) in format f,
// its arguments matching the parameter schema. Errors (an unsupported schema
// keyword) name tools[i].function.parameters.
bool forced_call_grammar(const ToolRequest& tr, ToolFormat f, runtime::grammar::GrammarSource* out, ApiError* err);

}  // namespace chimera::server
