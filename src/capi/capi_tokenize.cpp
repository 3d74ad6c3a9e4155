// Tokenizer and chat template calls (thread-safe: the tokenizer and the
// parsed template are immutable).
#include <cstring>

#include "capi/capi_internal.h"
#include "tokenizer/chat_prompt.h"

using namespace chimera;
using namespace chimera::capi;

namespace {

chimera_status copy_ids(ErrorSlot* slot, const std::vector<int32_t>& ids, int32_t* tokens, size_t capacity,
                        size_t* n_tokens) {
  if (chimera_status s = check_capacity(slot, tokens, capacity, ids.size(), n_tokens, "token ids")) return s;
  if (!ids.empty()) std::memcpy(tokens, ids.data(), ids.size() * sizeof(int32_t));
  return CHIMERA_OK;
}

chimera_status copy_text(ErrorSlot* slot, const std::string& s, char* text, size_t capacity, size_t* n_bytes) {
  if (chimera_status st = check_capacity(slot, text, capacity, s.size() + 1, n_bytes, "text (bytes + NUL)")) {
    if (n_bytes) *n_bytes = s.size();
    return st;
  }
  std::memcpy(text, s.c_str(), s.size() + 1);
  *n_bytes = s.size();
  return CHIMERA_OK;
}

// The messages as the JSON the template renderer takes.
chimera_status messages_json(ErrorSlot* slot, const chimera_chat_message* msgs, size_t n,
                             nlohmann::ordered_json* out) {
  if (n > 0 && !msgs) return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT, "messages is NULL");
  *out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < n; ++i) {
    if (!msgs[i].role || !msgs[i].content)
      return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT,
                  "messages[" + std::to_string(i) + "]." + (msgs[i].role ? "content" : "role") + " is NULL");
    out->push_back({{"role", msgs[i].role}, {"content", msgs[i].content}});
  }
  return CHIMERA_OK;
}

tokenizer::ChatRenderOptions render_options(const chimera_model* m, bool add_generation_prompt) {
  const tokenizer::Tokenizer& tok = m->tok();
  tokenizer::ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  o.bos_token = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
  o.eos_token = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
  return o;
}

chimera_status usable_template(chimera_model* m) {
  if (!m->tmpl) return fail(&m->err, m->template_error);
  return CHIMERA_OK;
}

}  // namespace

extern "C" {

chimera_status chimera_tokenize(chimera_model* m, const char* text, size_t text_len, int add_special,
                                int parse_special, int32_t* tokens, size_t capacity, size_t* n_tokens) {
  if (!m) return null_handle("model");
  return guarded(&m->err, [&]() -> chimera_status {
    if (!text && text_len > 0) return fail(&m->err, CHIMERA_ERR_INVALID_ARGUMENT, "text is NULL");
    const std::vector<int32_t> ids =
        m->tok().encode(std::string_view(text ? text : "", text_len), add_special != 0, parse_special != 0);
    return copy_ids(&m->err, ids, tokens, capacity, n_tokens);
  });
}

chimera_status chimera_detokenize(chimera_model* m, const int32_t* tokens, size_t n_tokens, int render_special,
                                  char* text, size_t capacity, size_t* n_bytes) {
  if (!m) return null_handle("model");
  return guarded(&m->err, [&]() -> chimera_status {
    if (!tokens && n_tokens > 0) return fail(&m->err, CHIMERA_ERR_INVALID_ARGUMENT, "tokens is NULL");
    std::vector<int32_t> ids(tokens, tokens + n_tokens);
    for (size_t i = 0; i < ids.size(); ++i)
      if (!m->tok().valid_id(ids[i]))
        return fail(&m->err, CHIMERA_ERR_INVALID_ARGUMENT,
                    "tokens[" + std::to_string(i) + "] = " + std::to_string(ids[i]) + " is outside the vocabulary [0, " +
                        std::to_string(m->n_vocab()) + ")");
    return copy_text(&m->err, m->tok().decode(ids, render_special != 0), text, capacity, n_bytes);
  });
}

chimera_status chimera_token_is_eog(chimera_model* m, int32_t token, int* out) {
  if (!m) return null_handle("model");
  return guarded(&m->err, [&]() -> chimera_status {
    if (!out) return fail(&m->err, CHIMERA_ERR_INVALID_ARGUMENT, "out is NULL");
    if (!m->tok().valid_id(token))
      return fail(&m->err, CHIMERA_ERR_INVALID_ARGUMENT,
                  "token " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(m->n_vocab()) +
                      ")");
    *out = m->tok().is_eog(token) ? 1 : 0;
    return CHIMERA_OK;
  });
}

chimera_status chimera_chat_render(chimera_model* m, const chimera_chat_message* messages, size_t n_messages,
                                   int add_generation_prompt, char* text, size_t capacity, size_t* n_bytes) {
  if (!m) return null_handle("model");
  return guarded(&m->err, [&]() -> chimera_status {
    if (chimera_status s = usable_template(m)) return s;
    nlohmann::ordered_json msgs;
    if (chimera_status s = messages_json(&m->err, messages, n_messages, &msgs)) return s;
    auto r = m->tmpl->render_json(msgs, render_options(m, add_generation_prompt != 0));
    if (!r) return fail(&m->err, r.status().with_context("chat template"));
    return copy_text(&m->err, *r, text, capacity, n_bytes);
  });
}

chimera_status chimera_chat_tokenize(chimera_model* m, const chimera_chat_message* messages, size_t n_messages,
                                     int add_generation_prompt, int32_t* tokens, size_t capacity, size_t* n_tokens) {
  if (!m) return null_handle("model");
  return guarded(&m->err, [&]() -> chimera_status {
    if (chimera_status s = usable_template(m)) return s;
    nlohmann::ordered_json msgs;
    if (chimera_status s = messages_json(&m->err, messages, n_messages, &msgs)) return s;
    auto p = tokenizer::render_chat_prompt(*m->tmpl, m->tok(), msgs, render_options(m, add_generation_prompt != 0));
    if (!p) return fail(&m->err, p.status().with_context("chat template"));
    return copy_ids(&m->err, tokenizer::encode_chat_prompt(m->tok(), *p), tokens, capacity, n_tokens);
  });
}

}  // extern "C"
