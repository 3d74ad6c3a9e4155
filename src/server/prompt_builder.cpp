// Request -> GenerationParams; see prompt_builder.h.
#include "server/prompt_builder.h"

#include <cstdlib>

#include "server/tool_request.h"
#include "tokenizer/chat_prompt.h"

namespace chimera::server {
namespace {

ApiError make_error(std::string message, std::string param, std::string code) {
  ApiError e;
  e.status = 400;
  e.type = "invalid_request_error";
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

ApiError context_error(int64_t n_ctx, int64_t n_prompt, bool at_least, bool chat) {
  return make_error("This model's maximum context length is " + std::to_string(n_ctx) + " tokens, but the prompt has " +
                        (at_least ? "at least " : "") + std::to_string(n_prompt) + " tokens",
                    chat ? "messages" : "prompt", "context_length_exceeded");
}

// True (with *err) when at_least (a lower bound on the prompt's tokens) proves it cannot fit.
bool too_long_by_size(const PromptContext& c, int64_t at_least, bool chat, ApiError* err) {
  if (at_least < c.n_ctx) return false;
  *err = context_error(c.n_ctx, at_least, true, chat);
  return true;
}

tokenizer::ChatRenderOptions render_options(const PromptContext& c, const nlohmann::ordered_json& extra,
                                            bool generation_prompt) {
  tokenizer::ChatRenderOptions ro;
  ro.add_generation_prompt = generation_prompt;
  ro.bos_token = c.bos;
  ro.eos_token = c.eos;
  ro.extra_context = extra;
  return ro;
}

// The rendered conversation (extra: template variables besides messages);
// with parse_special every part is parsed. Stops early (literal ranges not
// located) once the text proves n_ctx tokens.
Result<tokenizer::ChatPrompt> render(const PromptContext& c, const nlohmann::ordered_json& msgs,
                                     const nlohmann::ordered_json& extra, bool generation_prompt, bool parse_special) {
  const auto ro = render_options(c, extra, generation_prompt);
  if (!parse_special) return tokenizer::render_chat_prompt(*c.tmpl, *c.tok, msgs, ro, c.n_ctx);
  tokenizer::ChatPrompt p;
  CHIMERA_ASSIGN_OR_RETURN(p.text, c.tmpl->render_json(msgs, ro));
  p.add_special = !(!c.bos.empty() && p.text.compare(0, c.bos.size(), c.bos) == 0);
  p.min_tokens = c.tok->min_tokens(p.text) + (p.add_special && c.tok->add_bos() ? 1 : 0);
  return p;
}

// Errors of render_chat_prompt name messages[i] of the rendered list; with a
// system message inserted in front (generic tool format) that is the
// request's messages[i - 1], and messages[0] is the paragraph made from tools.
std::string request_paths(const std::string& msg, int inserted) {
  const std::string key = "messages[";
  if (inserted == 0 || msg.rfind(key, 0) != 0) return msg;
  const size_t close = msg.find(']', key.size());
  if (close == std::string::npos) return msg;
  const long i = std::strtol(msg.c_str() + key.size(), nullptr, 10);
  if (i < inserted) return "tools (as the system paragraph listing them)" + msg.substr(close + 1);
  return key + std::to_string(i - inserted) + msg.substr(close);
}

}  // namespace

std::string cache_scope(const std::string& identity, const std::string& salt) {
  return std::to_string(identity.size()) + ":" + identity + salt;
}

bool build_generation(const PromptContext& c, const ParsedRequest& pr, const std::string& identity,
                      GenerationParams* gp, ApiError* err) {
  const tokenizer::Tokenizer& tok = *c.tok;
  if (pr.chat) {
    const bool parse_special = pr.parse_special.value_or(false);
    nlohmann::ordered_json msgs;
    tokenizer::ChatRenderOptions tool_ro;  // only its extra_context (the `tools` variable) is used
    const int inserted = prepare_tool_render(pr.messages, pr.tools, c.tool_format, &msgs, &tool_ro);
    const nlohmann::ordered_json& extra = tool_ro.extra_context;
    if (!parse_special) {
      for (auto it = extra.begin(); it != extra.end(); ++it) {
        if (Status s = tokenizer::check_template_input(tok, it.value(), it.key()); !s) {
          *err = make_error(s.message(), it.key(), "invalid_value");
          return false;
        }
      }
    }
    auto prompt = render(c, msgs, extra, true, parse_special);
    if (!prompt) {
      *err = make_error("cannot apply the chat template: " + request_paths(prompt.status().message(), inserted),
                        "messages", "invalid_value");
      return false;
    }
    if (too_long_by_size(c, prompt->min_tokens, true, err)) return false;
    gp->prompt = tokenizer::encode_chat_prompt(tok, *prompt);
    // The next turn's prompt starts with this conversation + the reply as the
    // template renders it: the engine snapshots the state there (engine.h).
    gp->turn_tokens = [c, msgs = std::move(msgs), extra,
                       parse_special](const std::string& reply) -> std::vector<int32_t> {
      nlohmann::ordered_json m = msgs;
      m.push_back({{"role", "assistant"}, {"content", reply}});
      auto p = render(c, m, extra, false, parse_special);
      if (!p || p->min_tokens >= c.n_ctx) return {};  // cannot be a next prompt
      return tokenizer::encode_chat_prompt(*c.tok, *p);
    };
  } else if (pr.prompt_text) {
    if (too_long_by_size(c, tok.min_tokens(*pr.prompt_text) + (tok.add_bos() ? 1 : 0), false, err)) return false;
    gp->prompt = tok.encode(*pr.prompt_text, /*add_special=*/true, pr.parse_special.value_or(true));
  } else {
    gp->prompt = pr.prompt_ids;
  }
  const int64_t n_prompt = (int64_t)gp->prompt.size();
  const int64_t n_ctx = c.n_ctx;
  if (n_prompt == 0) {
    *err = make_error("the prompt is empty after tokenization", "prompt", "invalid_value");
    return false;
  }
  if (n_prompt >= n_ctx) {
    *err = context_error(n_ctx, n_prompt, false, pr.chat);
    return false;
  }
  if (pr.max_tokens > 0 && n_prompt + pr.max_tokens > n_ctx) {
    *err = make_error("This model's maximum context length is " + std::to_string(n_ctx) + " tokens; you requested " +
                          std::to_string(n_prompt + pr.max_tokens) + " tokens (" + std::to_string(n_prompt) +
                          " in the prompt, " + std::to_string(pr.max_tokens) + " for the completion)",
                      "max_tokens", "context_length_exceeded");
    return false;
  }
  gp->max_tokens = pr.max_tokens > 0 ? pr.max_tokens
                   : pr.chat         ? n_ctx - n_prompt
                                     : std::min<int64_t>(16, n_ctx - n_prompt);
  if (c.is_diffusion && !resolve_diffusion_length(pr, n_ctx - n_prompt, &gp->max_tokens, err)) return false;
  gp->sampling = pr.sampling;
  gp->stop = pr.stop;
  gp->ignore_eos = pr.ignore_eos;
  gp->top_logprobs = pr.top_logprobs;
  gp->diffusion = pr.diffusion;
  gp->grammar = pr.grammar;
  gp->cache_scope = cache_scope(identity, pr.cache_salt);
  // After pr.grammar: a forced call sets its own (the two never come together).
  return apply_tool_generation(ToolSession{pr.tools, c.tool_format}, gp, err);
}

}  // namespace chimera::server
