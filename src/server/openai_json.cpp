// OpenAI request validation and response bodies; see openai_json.h.
// Sampling defaults follow the OpenAI API (temperature 1, top_p 1, no top-k /
// min-p, no penalties); llama.cpp / vLLM extensions are accepted: top_k,
// min_p, repetition_penalty (alias repeat_penalty), repeat_last_n, seed,
// ignore_eos.
#include "server/openai_json.h"

#include <cmath>
#include <random>

#include "server/tool_request.h"

namespace chimera::server {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

bool fail(ApiError* err, std::string msg, std::string param, std::string code = "") {
  return bad_request(err, std::move(msg), std::move(param), std::move(code));
}

const char* type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// Optional number in [lo, hi]; absent / null keeps *out.
bool opt_number(const json& b, const char* key, double lo, double hi, float* out, ApiError* err) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return true;
  if (!it->is_number())
    return fail(err, std::string("'") + key + "' must be a number, not " + type_name(*it), key, "invalid_type");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return fail(err, std::string("'") + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump(), key,
                "invalid_value");
  *out = (float)v;
  return true;
}

// Optional integer in [lo, hi].
bool opt_int(const json& b, const char* key, int64_t lo, int64_t hi, int64_t* out, bool* given, ApiError* err) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return true;
  if (!it->is_number_integer())
    return fail(err, std::string("'") + key + "' must be an integer, not " + type_name(*it), key, "invalid_type");
  if (it->is_number_unsigned() && it->get<uint64_t>() > (uint64_t)INT64_MAX)
    return fail(err, std::string("'") + key + "' is too large", key, "invalid_value");
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    return fail(err, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                         " (got " + std::to_string(v) + ")",
                key, "invalid_value");
  *out = v;
  if (given) *given = true;
  return true;
}

bool opt_bool(const json& b, const char* key, bool* out, ApiError* err) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return true;
  if (!it->is_boolean())
    return fail(err, std::string("'") + key + "' must be a boolean, not " + type_name(*it), key, "invalid_type");
  *out = it->get<bool>();
  return true;
}

bool parse_stop(const json& b, std::vector<std::string>* out, ApiError* err) {
  auto it = b.find("stop");
  if (it == b.end() || it->is_null()) return true;
  std::vector<std::string> v;
  if (it->is_string()) {
    v.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    if (it->size() > 16) return fail(err, "'stop' accepts at most 16 strings", "stop", "invalid_value");
    for (const auto& s : *it) {
      if (!s.is_string()) return fail(err, "'stop' must be a string or an array of strings", "stop", "invalid_type");
      v.push_back(s.get<std::string>());
    }
  } else {
    return fail(err, "'stop' must be a string or an array of strings", "stop", "invalid_type");
  }
  for (const auto& s : v) {
    if (s.empty()) return fail(err, "stop strings must not be empty", "stop", "invalid_value");
    if (s.size() > 512) return fail(err, "stop strings are limited to 512 bytes", "stop", "invalid_value");
  }
  *out = std::move(v);
  return true;
}

bool parse_messages(const json& b, nlohmann::ordered_json* out, ApiError* err) {
  auto it = b.find("messages");
  if (it == b.end()) return fail(err, "'messages' is required", "messages", "missing_required_parameter");
  if (!it->is_array() || it->empty())
    return fail(err, "'messages' must be a non-empty array of message objects", "messages", "invalid_type");
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return fail(err, p + " must be an object", p, "invalid_type");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || role->get<std::string>().empty())
      return fail(err, p + ".role must be a non-empty string", p + ".role", "invalid_type");
    auto content = m.find("content");
    if (content != m.end() && !content->is_null() && !content->is_string()) {
      if (!content->is_array())
        return fail(err, p + ".content must be a string or an array of content parts", p + ".content", "invalid_type");
      for (const auto& part : *content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
          return fail(err, p + ".content: only {\"type\": \"text\", \"text\": ...} parts are supported",
                      p + ".content", "invalid_value");
      }
    }
    nlohmann::ordered_json om = nlohmann::ordered_json::parse(m.dump());
    // Text parts reach the template as one string (joined by newlines, as
    // vLLM does): text templates print message['content'] as is.
    if (content != m.end() && content->is_array()) {
      std::string text;
      for (size_t k = 0; k < content->size(); ++k) text += (k ? "\n" : "") + (*content)[k]["text"].get<std::string>();
      om["content"] = text;
    }
    msgs.push_back(std::move(om));
  }
  *out = std::move(msgs);
  return true;
}

bool parse_prompt(const json& b, const RequestLimits& lim, ParsedRequest* out, ApiError* err) {
  auto it = b.find("prompt");
  if (it == b.end()) return fail(err, "'prompt' is required", "prompt", "missing_required_parameter");
  const json* p = &*it;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    out->prompt_text = p->get<std::string>();
    if (out->prompt_text->empty()) return fail(err, "'prompt' must not be empty", "prompt", "invalid_value");
    return true;
  }
  if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    for (const auto& t : *p) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= lim.n_vocab)
        return fail(err, "'prompt' token ids must be integers in [0, " + std::to_string(lim.n_vocab) + ")", "prompt",
                    "invalid_value");
      out->prompt_ids.push_back((int32_t)t.get<int64_t>());
    }
    return true;
  }
  if (p->is_array() && p->size() > 1)
    return fail(err, "batched prompts are not supported; send one prompt per request", "prompt", "invalid_value");
  return fail(err, "'prompt' must be a string or an array of token ids", "prompt", "invalid_type");
}

// Diffusion extensions (see ParsedRequest::diffusion); the defaults in *d are
// kept for absent keys. Whether the block length divides max_tokens is checked
// where max_tokens is final (HttpServer::build_prompt).
bool parse_diffusion(const json& b, const RequestLimits& lim, runtime::DiffusionOptions* d, ApiError* err) {
  if (!opt_int(b, "steps", 1, lim.n_ctx, &d->steps, nullptr, err)) return false;
  if (!opt_int(b, "block_length", 1, lim.n_ctx, &d->block_length, nullptr, err)) return false;
  if (!opt_int(b, "cache_refresh", 0, lim.n_ctx, &d->cache_refresh, nullptr, err)) return false;
  if (!opt_bool(b, "prefix_cache", &d->prefix_cache, err)) return false;
  if (!opt_bool(b, "dual_cache", &d->dual_cache, err)) return false;
  // Real-valued keys, validated by opt_number and kept in double precision.
  auto real = [&](const char* key, double lo, double hi, double* out) {
    float f = 0;
    if (!opt_number(b, key, lo, hi, &f, err)) return false;
    if (auto it = b.find(key); it != b.end() && !it->is_null()) *out = it->get<double>();
    return true;
  };
  if (!real("threshold", 0, 1, &d->threshold)) return false;
  if (!(d->threshold < 1)) return fail(err, "'threshold' must be in [0, 1)", "threshold", "invalid_value");
  if (!real("cfg_scale", 0, 100, &d->cfg_scale)) return false;
  if (auto it = b.find("remasking"); it != b.end() && !it->is_null()) {
    if (!it->is_string() || !runtime::parse_remasking(it->get<std::string>(), &d->remasking))
      return fail(err, "'remasking' must be one of \"low_confidence\", \"random\", \"margin\", \"entropy\"",
                  "remasking", "invalid_value");
  }
  return true;
}

// Top-level request fields: every one is either implemented (parsed below or
// by the tool-calling / diffusion parsers) or refused with 400
// unsupported_parameter naming it — nothing is silently ignored
// (docs/SERVER.md lists both sets).
constexpr std::string_view kCommonFields[] = {
    "model", "max_tokens", "stream", "stream_options", "stop", "temperature", "top_p", "min_p", "top_k",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "repeat_penalty", "repeat_last_n", "seed",
    "ignore_eos", "n", "best_of", "logprobs", "response_format", "grammar", "parse_special", "cache_salt", "user",
    // diffusion models (ignored by autoregressive ones, as documented)
    "steps", "block_length", "remasking", "threshold", "cfg_scale", "prefix_cache", "dual_cache", "cache_refresh"};
constexpr std::string_view kChatFields[] = {"messages",    "max_completion_tokens", "top_logprobs",
                                            "tools",       "tool_choice",           "parallel_tool_calls"};
constexpr std::string_view kCompletionFields[] = {"prompt", "echo"};

bool check_fields(const json& b, bool chat, ApiError* err) {
  for (auto it = b.begin(); it != b.end(); ++it) {
    const std::string& k = it.key();
    auto in = [&k](const auto& list) {
      for (std::string_view f : list)
        if (k == f) return true;
      return false;
    };
    if (in(kCommonFields) || (chat ? in(kChatFields) : in(kCompletionFields))) continue;
    if (chat ? in(kCompletionFields) : in(kChatFields))
      return fail(err, "'" + k + "' is only supported on " + (chat ? "/v1/completions" : "/v1/chat/completions"), k,
                  "unsupported_parameter");
    std::string shown = k.size() > 64 ? k.substr(0, 64) + "..." : k;
    return fail(err, "'" + shown + "' is not supported by this server", shown, "unsupported_parameter");
  }
  return true;
}

}  // namespace

bool bad_request(ApiError* err, std::string message, std::string param, std::string code) {
  err->status = 400;
  err->type = "invalid_request_error";
  err->message = std::move(message);
  err->param = std::move(param);
  err->code = std::move(code);
  return false;
}

std::string error_body(const ApiError& e) {
  json j = {{"error",
             {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
  return dump(j);
}

int64_t json_nesting_depth(std::string_view text, int64_t stop_above) {
  // One pass, no recursion: brackets inside strings (with \" escapes) do not count.
  int64_t depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        max_depth = depth;
        if (max_depth > stop_above) return max_depth;
      }
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    }
  }
  return max_depth;
}

bool parse_json_object(std::string_view body, json* out, ApiError* err) {
  // Checked on the raw bytes before anything recursive (nlohmann's dump, the
  // template engine's conversion) can see the value.
  if (json_nesting_depth(body, kMaxJsonDepth) > kMaxJsonDepth)
    return fail(err, "the request body nests arrays/objects deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                "", "invalid_json");
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return fail(err, "the request body is not valid JSON", "", "invalid_json");
  if (!j.is_object()) return fail(err, "the request body must be a JSON object", "", "invalid_json");
  *out = std::move(j);
  return true;
}

// response_format (json_object; json_schema with "schema", strict or not;
// text) and the "grammar" extension (GBNF text) -> r->grammar. The schema is
// compiled later (the engine reports its errors as 400s too).
static bool parse_response_format(const json& b, ParsedRequest* r, ApiError* err) {
  using runtime::grammar::GrammarSource;
  if (auto it = b.find("response_format"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return fail(err, "'response_format' must be an object", "response_format", "invalid_type");
    auto t = it->find("type");
    if (t == it->end() || !t->is_string())
      return fail(err, "'response_format.type' must be a string", "response_format", "invalid_type");
    const std::string type = t->get<std::string>();
    if (type == "json_object") {
      r->grammar = GrammarSource{GrammarSource::Kind::kJsonObject, ""};
    } else if (type == "json_schema") {
      auto js = it->find("json_schema");
      if (js == it->end() || !js->is_object())
        return fail(err, "'response_format.json_schema' must be an object", "response_format", "invalid_type");
      auto sc = js->find("schema");
      if (sc == js->end() || !(sc->is_object() || sc->is_boolean()))
        return fail(err, "'response_format.json_schema.schema' must be a JSON Schema object", "response_format",
                    "invalid_type");
      if (auto st = js->find("strict"); st != js->end() && !st->is_null() && !st->is_boolean())
        return fail(err, "'response_format.json_schema.strict' must be a boolean", "response_format", "invalid_type");
      r->grammar = GrammarSource{GrammarSource::Kind::kJsonSchema, sc->dump()};
    } else if (type != "text") {
      return fail(err, "unknown response_format type '" + type + "' (expected text, json_object or json_schema)",
                  "response_format", "invalid_value");
    }
  }
  if (auto it = b.find("grammar"); it != b.end() && !it->is_null()) {
    if (!it->is_string()) return fail(err, "'grammar' must be a string (GBNF)", "grammar", "invalid_type");
    if (r->grammar) return fail(err, "give either 'grammar' or a JSON 'response_format', not both", "grammar", "invalid_value");
    r->grammar = GrammarSource{GrammarSource::Kind::kGbnf, it->get<std::string>()};
  }
  return true;
}

bool parse_generation_request(std::string_view body, bool chat, const RequestLimits& lim, ParsedRequest* out,
                              ApiError* err) {
  json b;
  if (!parse_json_object(body, &b, err)) return false;
  if (!check_fields(b, chat, err)) return false;
  ParsedRequest r;
  r.chat = chat;
  // OpenAI defaults.
  r.sampling.temperature = 1.0f;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0.0f;
  r.sampling.repeat_penalty = 1.0f;
  r.sampling.seed = std::random_device{}() ^ ((uint64_t)std::random_device{}() << 32);
  if (auto it = b.find("model"); it != b.end() && !it->is_null()) {
    if (!it->is_string()) return fail(err, "'model' must be a string", "model", "invalid_type");
    r.model = it->get<std::string>();
  }
  if (chat) {
    if (!parse_messages(b, &r.messages, err)) return false;
  } else {
    if (!parse_prompt(b, lim, &r, err)) return false;
  }
  const char* len_key = chat && b.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (!opt_int(b, len_key, 1, lim.n_ctx, &r.max_tokens, nullptr, err)) return false;
  if (!opt_bool(b, "stream", &r.stream, err)) return false;
  if (auto it = b.find("stream_options"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return fail(err, "'stream_options' must be an object", "stream_options", "invalid_type");
    if (!opt_bool(*it, "include_usage", &r.include_usage, err)) return false;
  }
  if (!parse_stop(b, &r.stop, err)) return false;
  if (!opt_number(b, "temperature", 0, 2, &r.sampling.temperature, err)) return false;
  if (!opt_number(b, "top_p", 0, 1, &r.sampling.top_p, err)) return false;
  if (!opt_number(b, "min_p", 0, 1, &r.sampling.min_p, err)) return false;
  if (!opt_number(b, "presence_penalty", -2, 2, &r.sampling.presence_penalty, err)) return false;
  if (!opt_number(b, "frequency_penalty", -2, 2, &r.sampling.frequency_penalty, err)) return false;
  const char* rp = b.contains("repetition_penalty") ? "repetition_penalty" : "repeat_penalty";
  if (!opt_number(b, rp, 0.0, 10, &r.sampling.repeat_penalty, err)) return false;
  if (b.contains(rp) && !(r.sampling.repeat_penalty > 0))
    return fail(err, std::string("'") + rp + "' must be positive", rp, "invalid_value");
  int64_t v = 0;
  bool given = false;
  if (!opt_int(b, "top_k", -1, 1 << 30, &v, &given, err)) return false;
  if (given) r.sampling.top_k = (int32_t)std::max<int64_t>(v, 0);
  given = false;
  if (!opt_int(b, "repeat_last_n", -1, 1 << 30, &v, &given, err)) return false;
  if (given) r.sampling.penalty_last_n = (int32_t)v;
  if (auto it = b.find("seed"); it != b.end() && !it->is_null()) {
    if (!it->is_number_integer()) return fail(err, "'seed' must be an integer", "seed", "invalid_type");
    r.sampling.seed = it->is_number_unsigned() ? it->get<uint64_t>() : (uint64_t)it->get<int64_t>();
  }
  if (!opt_bool(b, "ignore_eos", &r.ignore_eos, err)) return false;
  int64_t n_choices = 1;
  if (!opt_int(b, "n", 1, kMaxChoices, &n_choices, nullptr, err)) return false;
  r.n = (int)n_choices;
  if (auto it = b.find("best_of"); it != b.end() && !it->is_null() && !(it->is_number_integer() && it->get<int64_t>() == 1))
    return fail(err, "'best_of' is not supported (only 1)", "best_of", "unsupported_parameter");
  if (auto it = b.find("echo"); it != b.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()))
    return fail(err, "'echo' is not supported", "echo", "unsupported_parameter");
  if (!parse_response_format(b, &r, err)) return false;
  if (auto it = b.find("logprobs"); it != b.end() && !it->is_null()) {
    if (chat) {
      if (!it->is_boolean()) return fail(err, "'logprobs' must be a boolean", "logprobs", "invalid_type");
      if (it->get<bool>()) r.top_logprobs = 0;
    } else {
      int64_t n = 0;
      if (!opt_int(b, "logprobs", 0, 20, &n, nullptr, err)) return false;
      r.top_logprobs = (int)n;
    }
  }
  if (chat) {
    int64_t n = 0;
    bool given = false;
    if (!opt_int(b, "top_logprobs", 0, 20, &n, &given, err)) return false;
    if (given && r.top_logprobs < 0 && n > 0)
      return fail(err, "'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
    if (given && r.top_logprobs >= 0) r.top_logprobs = (int)n;
  }
  if (auto it = b.find("parse_special"); it != b.end() && !it->is_null()) {
    if (!it->is_boolean()) return fail(err, "'parse_special' must be a boolean", "parse_special", "invalid_type");
    r.parse_special = it->get<bool>();
  }
  if (auto it = b.find("cache_salt"); it != b.end() && !it->is_null()) {
    if (!it->is_string() || it->get_ref<const std::string&>().empty() || it->get_ref<const std::string&>().size() > 1024)
      return fail(err, "'cache_salt' must be a non-empty string of at most 1024 bytes", "cache_salt", "invalid_value");
    r.cache_salt = it->get<std::string>();
  }
  r.diffusion = lim.diffusion;
  if (!parse_diffusion(b, lim, &r.diffusion, err)) return false;
  if (!parse_tool_request(b, chat, &r.tools, err)) return false;
  *out = std::move(r);
  return true;
}

bool resolve_diffusion_length(const ParsedRequest& pr, int64_t room, int64_t* max_tokens, ApiError* err) {
  if (pr.max_tokens <= 0) {
    *max_tokens = runtime::diffusion_default_length(pr.diffusion, room);
    if (*max_tokens <= 0) {
      fail(err, "no room left in the context for a diffusion canvas of one block", pr.chat ? "messages" : "prompt",
           "context_length_exceeded");
      return false;
    }
  }
  auto sched = runtime::diffusion_schedule(pr.diffusion, *max_tokens);
  if (!sched) {
    const std::string& m = sched.status().message();
    return fail(err, m, m.rfind("--steps", 0) == 0 ? "steps" : "block_length", "invalid_value");
  }
  return true;
}

const char* openai_finish_reason(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kCancelled: return "stop";
    default: return nullptr;
  }
}

namespace {
json finish_json(FinishReason r) {
  const char* s = openai_finish_reason(r);
  return s ? json(s) : json(nullptr);
}
json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}
json envelope(const ResponseMeta& m, const char* object) {
  return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}
}  // namespace

namespace {
json bytes_json(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back((int)c);
  return a;
}
// OpenAI shapes: chat {"content": [{token, logprob, bytes, top_logprobs: [...]}]};
// completions (legacy) {tokens, token_logprobs, top_logprobs: [{token: lp}], text_offset}.
// text_offset: the legacy offsets start there and it is advanced past these tokens (streams).
json logprobs_json(bool chat, const std::vector<TokenLogprob>& lp, const tokenizer::Tokenizer& tok,
                   int64_t* text_offset = nullptr) {
  auto piece = [&](int32_t id) { return tok.decode({id}, /*render_special=*/false); };
  if (chat) {
    json content = json::array();
    for (const auto& t : lp) {
      const std::string p = piece(t.id);
      json top = json::array();
      for (const auto& [id, l] : t.top) {
        const std::string q = piece(id);
        top.push_back({{"token", q}, {"logprob", l}, {"bytes", bytes_json(q)}});
      }
      content.push_back({{"token", p}, {"logprob", t.logprob}, {"bytes", bytes_json(p)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  int64_t off = text_offset ? *text_offset : 0;
  for (const auto& t : lp) {
    const std::string p = piece(t.id);
    tokens.push_back(p);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, l] : t.top) top[piece(id)] = l;
    tops.push_back(top);
    offs.push_back(off);
    off += (int64_t)p.size();
  }
  if (text_offset) *text_offset = off;
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}
}  // namespace

std::string completion_body(const ResponseMeta& m, const std::string& text, FinishReason fr, const Usage& u,
                            const std::vector<TokenLogprob>* lp, const tokenizer::Tokenizer* tok) {
  json j = envelope(m, m.chat ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", finish_json(fr)}, {"logprobs", nullptr}};
  if (lp && tok) choice["logprobs"] = logprobs_json(m.chat, *lp, *tok);
  if (m.chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(u);
  return dump(j);
}

std::string chunk_body(const ResponseMeta& m, const std::string& text, FinishReason finish, bool role_delta,
                       const std::vector<TokenLogprob>* lp, const tokenizer::Tokenizer* tok, int64_t* text_offset) {
  json j = envelope(m, m.chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", finish_json(finish)}, {"logprobs", nullptr}};
  if (lp && tok && !lp->empty()) choice["logprobs"] = logprobs_json(m.chat, *lp, *tok, text_offset);
  if (m.chat) {
    json delta = json::object();
    if (role_delta) delta["role"] = "assistant";
    if (role_delta || !text.empty()) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  j["choices"] = json::array({choice});
  return dump(j);
}

std::string usage_chunk_body(const ResponseMeta& m, const Usage& u) {
  json j = envelope(m, m.chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(u);
  return dump(j);
}

std::string models_body(const std::string& id, int64_t created, int64_t max_model_len, int64_t vocab_size) {
  json j = {{"object", "list"},
            {"data", json::array({{{"id", id},
                                   {"object", "model"},
                                   {"created", created},
                                   {"owned_by", "chimera"},
                                   {"max_model_len", max_model_len},
                                   {"vocab_size", vocab_size}}})}};
  return dump(j);
}

}  // namespace chimera::server
