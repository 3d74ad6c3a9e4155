// Reads the `tokenizer.ggml.*` keys of a GGUF file into a VocabSpec, and
// dispatches a spec to the tokenizer of its model type. Only types are checked
// here (each wrong type names its key); lengths, ids and merges are checked
// when the tokenizer is built, so specs from converters get the same checks.
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace chimera::tokenizer {

namespace {

using format::GgufType;
using format::GgufValue;

Status read_string_array(const format::GgufFile& g, const char* key, std::vector<std::string>* out) {
  const GgufValue* v = g.find(key);
  if (!v) return Status::ok();
  if (v->type != GgufType::ARRAY || v->elem_type != GgufType::STRING)
    return invalid_argument(std::string(key) + " must be an array of strings");
  out->reserve(v->arr.size());
  for (const auto& e : v->arr) out->push_back(e.s);
  return Status::ok();
}

Status read_opt_int(const format::GgufFile& g, const char* key, std::optional<int64_t>* out) {
  const GgufValue* v = g.find(key);
  if (!v) return Status::ok();
  auto i = v->as_int();
  if (!i) return invalid_argument(std::string(key) + " must be an integer");
  *out = *i;
  return Status::ok();
}

Status read_opt_bool(const format::GgufFile& g, const char* key, std::optional<bool>* out) {
  const GgufValue* v = g.find(key);
  if (!v) return Status::ok();
  auto b = g.get_bool(key);
  if (!b) return invalid_argument(std::string(key) + " must be a bool");
  *out = *b;
  return Status::ok();
}

}  // namespace

Result<VocabSpec> read_vocab_spec(const format::GgufFile& g) {
  VocabSpec s;
  const GgufValue* model = g.find("tokenizer.ggml.model");
  if (!model) return not_found("the file has no tokenizer (missing tokenizer.ggml.model)");
  if (model->type != GgufType::STRING) return invalid_argument("tokenizer.ggml.model must be a string");
  s.model = model->s;
  if (const GgufValue* pre = g.find("tokenizer.ggml.pre")) {
    if (pre->type != GgufType::STRING) return invalid_argument("tokenizer.ggml.pre must be a string");
    s.pre = pre->s;
  }
  CHIMERA_RETURN_IF_ERROR(read_string_array(g, "tokenizer.ggml.tokens", &s.tokens));
  CHIMERA_RETURN_IF_ERROR(read_string_array(g, "tokenizer.ggml.merges", &s.merges));
  if (const GgufValue* v = g.find("tokenizer.ggml.scores")) {
    if (v->type != GgufType::ARRAY || !(v->elem_type == GgufType::FLOAT32 || v->elem_type == GgufType::INT32 ||
                                        v->elem_type == GgufType::FLOAT64))
      return invalid_argument("tokenizer.ggml.scores must be an array of float32");
    s.scores.reserve(v->arr.size());
    for (const auto& e : v->arr) s.scores.push_back((float)e.as_double().value_or(0.0));
  }
  if (const GgufValue* v = g.find("tokenizer.ggml.token_type")) {
    if (v->type != GgufType::ARRAY) return invalid_argument("tokenizer.ggml.token_type must be an array of int32");
    s.token_types.reserve(v->arr.size());
    for (const auto& e : v->arr) {
      auto i = e.as_int();
      if (!i) return invalid_argument("tokenizer.ggml.token_type must be an array of int32");
      s.token_types.push_back((int32_t)*i);
    }
  }
  const std::pair<const char*, std::optional<int64_t>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &s.bos},        {"tokenizer.ggml.eos_token_id", &s.eos},
      {"tokenizer.ggml.eot_token_id", &s.eot},        {"tokenizer.ggml.eom_token_id", &s.eom},
      {"tokenizer.ggml.unknown_token_id", &s.unk},    {"tokenizer.ggml.seperator_token_id", &s.sep},
      {"tokenizer.ggml.padding_token_id", &s.pad},    {"tokenizer.ggml.mask_token_id", &s.mask},
      {"tokenizer.ggml.fim_pre_token_id", &s.fim_pre}, {"tokenizer.ggml.fim_suf_token_id", &s.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &s.fim_mid}, {"tokenizer.ggml.fim_pad_token_id", &s.fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &s.fim_rep}, {"tokenizer.ggml.fim_sep_token_id", &s.fim_sep},
      // deprecated spellings of the FIM ids
      {"tokenizer.ggml.prefix_token_id", &s.fim_pre}, {"tokenizer.ggml.suffix_token_id", &s.fim_suf},
      {"tokenizer.ggml.middle_token_id", &s.fim_mid},
  };
  for (const auto& [key, dst] : ids) {
    if (dst->has_value()) continue;  // the current key wins over the deprecated one
    CHIMERA_RETURN_IF_ERROR(read_opt_int(g, key, dst));
  }
  CHIMERA_RETURN_IF_ERROR(read_opt_bool(g, "tokenizer.ggml.add_bos_token", &s.add_bos));
  CHIMERA_RETURN_IF_ERROR(read_opt_bool(g, "tokenizer.ggml.add_eos_token", &s.add_eos));
  CHIMERA_RETURN_IF_ERROR(read_opt_bool(g, "tokenizer.ggml.add_sep_token", &s.add_sep));
  CHIMERA_RETURN_IF_ERROR(read_opt_bool(g, "tokenizer.ggml.add_space_prefix", &s.add_space_prefix));
  CHIMERA_RETURN_IF_ERROR(read_opt_bool(g, "tokenizer.ggml.remove_extra_whitespaces", &s.remove_extra_whitespaces));
  if (auto name = g.get_string("general.name")) s.model_name = *name;
  return s;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const format::GgufFile& gguf) {
  CHIMERA_ASSIGN_OR_RETURN(VocabSpec spec, read_vocab_spec(gguf));
  return from_spec(spec);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_spec(const VocabSpec& spec) {
  auto build = [&]() -> Result<std::unique_ptr<Tokenizer>> {
    if (spec.model == "llama") return detail::make_spm(spec);
    if (spec.model == "gpt2") return detail::make_bpe(spec);
    if (spec.model == "bert") return detail::make_wpm(spec);
    if (spec.model == "none" || spec.model == "no_vocab") return detail::make_none(spec);
    return unsupported("unsupported tokenizer model '" + spec.model +
                       "' (tokenizer.ggml.model; supported: llama, gpt2, bert, none)");
  };
  auto r = build();
  if (!r) return r.status().with_context("tokenizer");
  return r;
}

}  // namespace chimera::tokenizer
