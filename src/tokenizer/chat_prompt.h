// A chat prompt rendered so that only the template can write control tokens:
// message contents are user text, so "<|im_start|>", "</s>" or "<|end|>"
// typed into a message must stay text, while the same markers written by the
// chat template are real control tokens.
//
// render_chat_prompt renders the conversation twice: once as it is, once with
// every non-empty content string replaced by a random sentinel (an empty one
// has nothing to protect, and templates test it, e.g. an assistant turn that
// only holds tool calls). Splitting the sentinel
// rendering at the sentinels gives the template's own text between the
// contents; matching those pieces against the real rendering (each content
// verbatim, or whitespace-trimmed for templates that `| trim` it, like Llama 3)
// gives the exact byte ranges of the contents. Tokenizer::encode_spans then
// tokenizes those ranges as plain text and the rest with special parsing.
// A template that rewrites content in other ways (e.g. cuts reasoning out of
// assistant messages) cannot be matched; the prompt is then accepted only when
// no content holds control-token text (so any control token can only come from
// the template), else refused with an error.
// Other string fields of a message (role, name, ids, ...) are used by
// templates for their logic; they must not contain control-token text.
//
// Invariants: with no control-token text in the messages, the ids equal
// tokenizing the rendered prompt with special parsing (what earlier versions
// did), so prefix caches and reference outputs are unchanged.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace chimera::tokenizer {

struct ChatPrompt {
  std::string text;                     // the rendered prompt
  std::vector<Tokenizer::Span> literal;  // message contents inside text (plain text)
  bool add_special = true;              // add BOS by the vocabulary's rule (the template did not write it)
  int64_t min_tokens = 0;               // Tokenizer::min_tokens(text), + 1 for a BOS the tokenizer adds
};

// messages: OpenAI-style message objects (content a string or text parts).
// Errors (kInvalidArgument) name the message field.
// stop_at_tokens > 0: when the rendered text alone proves at least that many
// tokens (min_tokens), the prompt is returned at once, without locating the
// contents (literal empty): the caller refuses it, and a huge prompt costs no
// more than its rendering.
Result<ChatPrompt> render_chat_prompt(const ChatTemplate& tmpl, const Tokenizer& tok,
                                      const nlohmann::ordered_json& messages, const ChatRenderOptions& options,
                                      int64_t stop_at_tokens = 0);

// Template input outside the messages (e.g. the `tools` variable) is template
// text: an error (kInvalidArgument naming `path`, e.g. "tools[0].function.
// description") when any string or key in it contains control-token text.
Status check_template_input(const Tokenizer& tok, const nlohmann::ordered_json& value, const std::string& path);

// The prompt's ids: contents as plain text, template text with special parsing.
std::vector<TokenId> encode_chat_prompt(const Tokenizer& tok, const ChatPrompt& p);

}  // namespace chimera::tokenizer
