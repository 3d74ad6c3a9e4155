// From a validated OpenAI request to the engine's GenerationParams: chat
// template rendering, tokenization under the special-token policy, the
// context-length checks and the prefix-cache scope.
//
// Special tokens: chat message contents are plain text (tokenizer/
// chat_prompt.h), only the template's markers are control tokens, unless the
// request sets "parse_special": true; completions prompts parse special-token
// text unless the request sets "parse_special": false.
// Context: a prompt that cannot fit is refused with 400
// context_length_exceeded before it is tokenized when its byte length already
// proves it (Tokenizer::min_tokens), so a multi-megabyte prompt costs one scan
// of its bytes, not its tokenization.
// Tools (chat): the request's tools go to the template as the `tools`
// variable (or, for templates without tool support, into a system paragraph:
// plain text like any content), tool history is rewritten as templates expect
// (tool_request.h: prepare_tool_render); assistant tool-call arguments and the
// `tools` definitions are template input, refused when they hold
// special-token text (unless parse_special); active tools render special
// tokens in the reply and a forced call sets the call grammar.
// Cache scope: requests share prefix-cache entries only within one scope =
// the caller's identity (the API key, unless the server shares the cache) +
// the request's cache_salt.
#pragma once

#include <memory>
#include <string>

#include "server/engine.h"
#include "server/openai_json.h"
#include "server/tool_call_parser.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace chimera::server {

struct PromptContext {
  const tokenizer::Tokenizer* tok = nullptr;
  std::shared_ptr<const tokenizer::ChatTemplate> tmpl;  // outlives requests still in the engine
  std::string bos, eos;                                  // token texts for the template ("" when none)
  int64_t n_ctx = 0;
  bool is_diffusion = false;
  ToolFormat tool_format = ToolFormat::kGeneric;  // the template's call format (tool_format_for)
};

// identity: who is asking, for the cache scope ("" = everyone alike).
bool build_generation(const PromptContext& ctx, const ParsedRequest& pr, const std::string& identity,
                      GenerationParams* gp, ApiError* err);

// The prefix-cache scope of a request (identity and salt, unambiguously joined).
std::string cache_scope(const std::string& identity, const std::string& salt);

}  // namespace chimera::server
