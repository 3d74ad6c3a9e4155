// OpenAI API JSON: validation of /v1/completions and /v1/chat/completions
// request bodies into typed requests, and the response / stream-chunk / error
// bodies (shapes of the OpenAI API reference: text_completion,
// chat.completion, chat.completion.chunk, usage, {"error": {message, type,
// param, code}}).
// Invariants: parsing never throws and never aborts — any malformed body,
// wrong type or out-of-range value gives an ApiError with a 4xx status that
// names the offending parameter. Builders always produce valid JSON (invalid
// UTF-8 in generated text is replaced, never thrown on).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/diffusion_options.h"
#include "runtime/sampler.h"
#include "server/engine.h"
#include "tokenizer/tokenizer.h"

namespace chimera::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};
std::string error_body(const ApiError& e);
// Fills *err as a 400 invalid_request_error and returns false (validation helpers' "return fail").
bool bad_request(ApiError* err, std::string message, std::string param, std::string code);

// Chat tool fields ("tools", "tool_choice", "parallel_tool_calls"),
// validated by parse_tool_request (tool_request.h).
struct ToolRequest {
  enum class Choice { kAuto, kNone, kRequired, kNamed };
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // validated, OpenAI shape
  Choice choice = Choice::kAuto;
  std::string named;             // kNamed: the function
  bool parallel = true;          // parallel_tool_calls
  // Tools are offered to the model and its output parsed for calls.
  bool active() const { return !tools.empty() && choice != Choice::kNone; }
  bool forced() const { return active() && (choice == Choice::kRequired || choice == Choice::kNamed); }
};

struct ParsedRequest {
  bool chat = false;
  std::string model;                       // "" when absent
  bool stream = false;
  bool include_usage = false;              // stream_options.include_usage
  std::optional<std::string> prompt_text;  // completions: text prompt
  std::vector<int32_t> prompt_ids;         // completions: token-id prompt
  nlohmann::ordered_json messages;         // chat: validated message list
  int64_t max_tokens = -1;                 // -1: not given
  std::vector<std::string> stop;
  runtime::SamplingParams sampling;
  bool ignore_eos = false;
  int top_logprobs = -1;                   // -1: no logprobs; chat: logprobs=true + top_logprobs N; completions: logprobs N
  // Diffusion LMs: the server defaults, overridden per request by "steps",
  // "block_length", "remasking", "threshold", "cfg_scale", "prefix_cache",
  // "dual_cache", "cache_refresh" (ignored by autoregressive models).
  runtime::DiffusionOptions diffusion;
  // response_format {"type": "json_object"} / {"type": "json_schema", "json_schema": {"schema": ...}}
  // or the "grammar" extension (GBNF text); "text" or absent: none.
  std::optional<runtime::grammar::GrammarSource> grammar;
  // "parse_special": text that spells a control token becomes that token.
  // Unset: completions prompts yes (like llama.cpp and vLLM), chat message
  // contents no (only the chat template's own markers are control tokens).
  std::optional<bool> parse_special;
  // "cache_salt": requests share prefix-cache entries only with the same salt
  // (and the same API key unless the server shares the cache across keys).
  std::string cache_salt;
  ToolRequest tools;  // chat: tool calling (tool_request.h)
  int n = 1;          // choices (1 .. kMaxChoices; the server bounds it further: Engine::max_choices)
};

// "n" is refused above this whatever the server's slots (OpenAI's own limit).
inline constexpr int64_t kMaxChoices = 128;

// Limits the request is validated against.
struct RequestLimits {
  int64_t n_ctx = 4096;
  int64_t n_vocab = 0;
  runtime::DiffusionOptions diffusion;  // server defaults (chimera serve --steps ...)
};

// Parses a request body; on failure returns false with *err filled.
bool parse_generation_request(std::string_view body, bool chat, const RequestLimits& lim, ParsedRequest* out,
                              ApiError* err);

// Diffusion LMs: the generation length is the canvas size, so a request
// without max_tokens gets the default canvas (DiffusionOptions::
// default_gen_length, clipped to `room` free positions) rather than the rest of
// the context; the length is then checked against the block length and steps.
// *max_tokens is the length chosen so far (updated); false with a 400 in *err
// when the combination is invalid.
bool resolve_diffusion_length(const ParsedRequest& pr, int64_t room, int64_t* max_tokens, ApiError* err);

// Deepest array/object nesting of JSON text, found by one non-recursive scan
// of the bytes (brackets inside strings do not count); stops early and returns
// a value > stop_above once the depth passes stop_above. Malformed text gets a
// number too (the parser rejects it afterwards).
int64_t json_nesting_depth(std::string_view text, int64_t stop_above);
// Request bodies nest at most this deep (OpenAI requests need about 10 levels).
inline constexpr int64_t kMaxJsonDepth = 64;

// Parses JSON, turning a syntax error, nesting deeper than kMaxJsonDepth (a
// 400, checked before parsing: nothing recursive ever sees a deeper value) or
// a non-object body into an ApiError.
bool parse_json_object(std::string_view body, nlohmann::json* out, ApiError* err);

struct ResponseMeta {
  std::string id;      // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;
  std::string model;
  bool chat = false;
};

// A whole non-streamed response.
// lp: the per-token logprobs (when the request asked; null otherwise).
std::string completion_body(const ResponseMeta& m, const std::string& text, FinishReason fr, const Usage& u,
                            const std::vector<TokenLogprob>* lp = nullptr,
                            const tokenizer::Tokenizer* tok = nullptr);
// One streamed chunk (the JSON after "data: "). finish = kNone -> null.
// role_delta: the chat stream's first chunk, {"role": "assistant", "content": ""}.
// lp: this chunk's tokens' logprobs (streams of requests that asked; chat
// {content: [...]}, completions the legacy shape with text_offset counted from
// *text_offset, which is advanced).
std::string chunk_body(const ResponseMeta& m, const std::string& text, FinishReason finish, bool role_delta = false,
                       const std::vector<TokenLogprob>* lp = nullptr, const tokenizer::Tokenizer* tok = nullptr,
                       int64_t* text_offset = nullptr);
// The final usage chunk (stream_options.include_usage): empty choices + usage.
std::string usage_chunk_body(const ResponseMeta& m, const Usage& u);
std::string models_body(const std::string& id, int64_t created, int64_t max_model_len, int64_t vocab_size);
// "stop" / "length" as OpenAI reports them (cancelled/error map to "stop"/null).
const char* openai_finish_reason(FinishReason r);

}  // namespace chimera::server
