// The model-independent half of Tokenizer: vocabulary tables and attributes,
// special-token ids with llama.cpp's defaults and text-based auto-detection
// (EOT/EOM/FIM/EOG), the special-token partition of the input, BOS/EOS
// placement, decode with SentencePiece leading-space removal and clean-up.
// Invariants after init_common: tokens_/types_/attrs_ have n_vocab entries,
// every stored special id is -1 or in range, token texts are unique.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>

#include "tokenizer/tokenizer_impl.h"

namespace chimera::tokenizer {

namespace {

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

Status Tokenizer::init_common(const VocabSpec& spec, const std::string& model, TokenId def_bos, TokenId def_eos,
                              TokenId def_unk, TokenId def_sep, TokenId def_pad) {
  model_ = model;
  const size_t n = spec.tokens.size();
  if (n == 0) return invalid_argument("tokenizer.ggml.tokens is missing or empty");
  if (n > (size_t)INT32_MAX) return invalid_argument("tokenizer.ggml.tokens is too large");
  if (!spec.scores.empty() && spec.scores.size() != n)
    return invalid_argument("tokenizer.ggml.scores has " + std::to_string(spec.scores.size()) +
                            " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  if (!spec.token_types.empty() && spec.token_types.size() != n)
    return invalid_argument("tokenizer.ggml.token_type has " + std::to_string(spec.token_types.size()) +
                            " entries but tokenizer.ggml.tokens has " + std::to_string(n));

  tokens_.resize(n);
  types_.resize(n, TokenType::kNormal);
  attrs_.resize(n, kAttrNormal);
  token_to_id_.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    std::string text = spec.tokens[i];
    if (text.empty()) text = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp: keeps ids addressable
    auto [it, inserted] = token_to_id_.emplace(text, (TokenId)i);
    if (!inserted)
      return invalid_argument("duplicate token in tokenizer.ggml.tokens: ids " + std::to_string(it->second) +
                              " and " + std::to_string(i) + " have the same text");
    max_token_len_ = std::max(max_token_len_, text.size());
    tokens_[i] = std::move(text);
    if (!spec.token_types.empty()) {
      const int32_t t = spec.token_types[i];
      types_[i] = (t >= 0 && t <= 6) ? (TokenType)t : TokenType::kUndefined;
      switch (types_[i]) {
        case TokenType::kUnknown: attrs_[i] = kAttrUnknown; break;
        case TokenType::kUnused: attrs_[i] = kAttrUnused; break;
        case TokenType::kNormal: attrs_[i] = kAttrNormal; break;
        case TokenType::kControl: attrs_[i] = kAttrControl; break;
        case TokenType::kUserDefined: attrs_[i] = kAttrUserDefined; break;
        case TokenType::kByte: attrs_[i] = kAttrByte; break;
        default: attrs_[i] = 0; break;
      }
    }
  }

  // Special ids: the model type's default unless the file names a valid one.
  auto pick = [&](const std::optional<int64_t>& given, TokenId def) -> TokenId {
    if (def >= (TokenId)n) def = -1;
    if (given && *given >= 0 && *given < (int64_t)n) return (TokenId)*given;
    return def;
  };
  bos_ = pick(spec.bos, def_bos);
  eos_ = pick(spec.eos, def_eos);
  eot_ = pick(spec.eot, -1);
  eom_ = pick(spec.eom, -1);
  unk_ = pick(spec.unk, def_unk);
  sep_ = pick(spec.sep, def_sep);
  pad_ = pick(spec.pad, def_pad);
  TokenId fim_pre = pick(spec.fim_pre, -1), fim_suf = pick(spec.fim_suf, -1), fim_mid = pick(spec.fim_mid, -1);
  TokenId fim_pad = pick(spec.fim_pad, -1), fim_rep = pick(spec.fim_rep, -1), fim_sep = pick(spec.fim_sep, -1);
  if (spec.add_bos) add_bos_ = *spec.add_bos;
  if (spec.add_eos) add_eos_ = *spec.add_eos;
  if (spec.add_sep) add_sep_ = *spec.add_sep;
  if (add_bos_ && bos_ < 0) add_bos_ = false;  // nothing to add
  if (add_eos_ && eos_ < 0) add_eos_ = false;
  if (add_sep_ && sep_ < 0) add_sep_ = false;

  // Text-based detection (llama.cpp): tokens that look like end-of-turn or FIM
  // markers get their role and are promoted to control.
  auto detect = [&](TokenId& slot, std::initializer_list<const char*> names) {
    if (slot >= 0) return;
    for (const char* name : names) {
      TokenId id = lookup(name);
      if (id >= 0) {
        slot = id;
        attrs_[id] |= kAttrControl;
        return;
      }
    }
  };
  detect(eot_, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
                "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
                "<end_of_utterance>"});
  detect(eom_, {"<|eom_id|>"});
  detect(fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
                   "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"});
  detect(fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
                   "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"});
  detect(fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
                   "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"});
  detect(fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  detect(fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  detect(fim_sep, {"<|file_sep|>"});

  // End-of-generation set.
  eog_ids_.clear();
  auto add_eog = [&](TokenId id) {
    if (id >= 0 && std::find(eog_ids_.begin(), eog_ids_.end(), id) == eog_ids_.end()) eog_ids_.push_back(id);
  };
  for (TokenId id : {fim_pad, fim_rep, fim_sep}) add_eog(id);
  // llama.cpp's text list. A listed token becomes control (kept as text when
  // special parsing is off) even where the file types it user-defined, e.g.
  // "</s>" in the Phi-3 vocabulary.
  for (const char* name :
       {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
        "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
        "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~["}) {
    TokenId id = lookup(name);
    if (id >= 0) {
      add_eog(id);
      attrs_[id] |= kAttrControl;
    }
  }
  for (TokenId id : {eos_, eot_, eom_}) add_eog(id);
  // gpt-oss (harmony) and solar-open: "<|end|>" ends a message, not the
  // generation, when "<|return|>" and "<|call|>" (or "<|calls|>" and
  // "<|flush|>") exist; these markers are always rendered.
  {
    TokenId end = lookup("<|end|>"), ret = lookup("<|return|>"), call = lookup("<|call|>");
    TokenId calls = lookup("<|calls|>"), flush = lookup("<|flush|>");
    if (end >= 0 && ((ret >= 0 && call >= 0) || (calls >= 0 && flush >= 0))) {
      eog_ids_.erase(std::remove(eog_ids_.begin(), eog_ids_.end(), end), eog_ids_.end());
      attrs_[end] = kAttrUserDefined;
    }
    // Gemma 4 / PaddleOCR: "</s>" is ordinary text next to "<|tool_response>".
    if (TokenId s = lookup("</s>"); s >= 0 && lookup("<|tool_response>") >= 0) {
      eog_ids_.erase(std::remove(eog_ids_.begin(), eog_ids_.end(), s), eog_ids_.end());
      attrs_[s] = kAttrNormal;
    }
    for (const char* name : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
      TokenId id = lookup(name);
      if (id >= 0) attrs_[id] = kAttrUserDefined;
    }
  }
  std::sort(eog_ids_.begin(), eog_ids_.end());

  // Tokens matched in the text before model tokenization, longest first.
  special_cache_.clear();
  for (size_t i = 0; i < n; ++i) {
    if (attrs_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special_cache_.push_back((TokenId)i);
  }
  std::stable_sort(special_cache_.begin(), special_cache_.end(),
                   [&](TokenId a, TokenId b) { return tokens_[a].size() > tokens_[b].size(); });

  // Per-model attributes llama.cpp sets by name: Phi-3 special tokens eat the
  // whitespace that follows them.
  std::string name = spec.model_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return (char)std::tolower(c); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (TokenId id : special_cache_) attrs_[id] |= kAttrRstrip;
    if (TokenId id = lookup("</s>"); id >= 0) attrs_[id] |= kAttrRstrip;
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (TokenId id = lookup(t); id >= 0) attrs_[id] &= ~kAttrRstrip;
    }
  }
  if (spec.pre.find("jina-v2-") != std::string::npos) {
    if (TokenId id = lookup("<mask>"); id >= 0) attrs_[id] |= kAttrLstrip;
  }
  for (TokenId id : special_cache_) {
    const std::string& t = tokens_[id];
    if (attrs_[id] & kAttrRstrip) rstrip_last_byte_[(uint8_t)t.back()] = true;
    if (attrs_[id] & kAttrLstrip) lstrip_first_byte_[(uint8_t)t.front()] = true;
  }
  return Status::ok();
}

TokenId Tokenizer::lookup(std::string_view text) const {
  auto it = token_to_id_.find(text);
  return it == token_to_id_.end() ? -1 : it->second;
}

TokenId Tokenizer::find_token(std::string_view text) const { return lookup(text); }

bool Tokenizer::is_control(TokenId id) const {
  return valid_id(id) && (attrs_[id] & (kAttrControl | kAttrUnknown)) != 0;
}

bool Tokenizer::is_eog(TokenId id) const {
  return id >= 0 && std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

// llama.cpp's tokenizer_st_partition: for each special token (longest first),
// split every remaining raw-text fragment at its occurrences.
std::vector<Tokenizer::Fragment> Tokenizer::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, text});
  std::vector<Fragment> next;
  for (TokenId id : special_cache_) {
    const uint32_t a = attrs_[id];
    if (!parse_special && (a & (kAttrControl | kAttrUnknown))) continue;
    const std::string& st = tokens_[id];
    bool any = false;
    for (const auto& f : frags) {
      if (f.token < 0 && f.text.find(st) != std::string_view::npos) {
        any = true;
        break;
      }
    }
    if (!any) continue;
    next.clear();
    for (const auto& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      while (!rest.empty()) {
        const size_t m = rest.find(st);
        if (m == std::string_view::npos) {
          next.push_back({-1, rest});
          break;
        }
        std::string_view left = rest.substr(0, m);
        if (a & kAttrLstrip) {
          while (!left.empty() && is_ascii_space(left.back())) left.remove_suffix(1);
        }
        if (!left.empty()) next.push_back({-1, left});
        next.push_back({id, {}});
        rest = rest.substr(m + st.size());
        if (a & kAttrRstrip) {
          while (!rest.empty() && is_ascii_space(rest.front())) rest.remove_prefix(1);
        }
      }
    }
    frags.swap(next);
  }
  return frags;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  return encode_fragments(partition(text, parse_special), add_special);
}

std::vector<TokenId> Tokenizer::encode_spans(std::string_view text, const std::vector<Span>& literal,
                                             bool add_special) const {
  // Partition each region with its own rule, then join the pieces as one
  // partition of the whole text would have left them.
  std::vector<Fragment> frags;
  bool eat_leading_space = false;  // the last marker has rstrip
  auto append = [&](const std::vector<Fragment>& part) {
    for (Fragment f : part) {
      if (f.token >= 0) {
        if (attrs_[f.token] & kAttrLstrip) {
          while (!frags.empty() && frags.back().token < 0) {
            std::string_view& t = frags.back().text;
            while (!t.empty() && is_ascii_space(t.back())) t.remove_suffix(1);
            if (!t.empty()) break;
            frags.pop_back();
          }
        }
        frags.push_back(f);
        eat_leading_space = (attrs_[f.token] & kAttrRstrip) != 0;
        continue;
      }
      if (eat_leading_space) {
        while (!f.text.empty() && is_ascii_space(f.text.front())) f.text.remove_prefix(1);
        if (f.text.empty()) continue;
        eat_leading_space = false;
      }
      if (!frags.empty() && frags.back().token < 0 &&
          frags.back().text.data() + frags.back().text.size() == f.text.data()) {
        frags.back().text = std::string_view(frags.back().text.data(), frags.back().text.size() + f.text.size());
      } else {
        frags.push_back(f);
      }
    }
  };
  size_t pos = 0;
  for (const Span& s : literal) {
    const size_t b = std::min(std::max(s.begin, pos), text.size()), e = std::min(std::max(s.end, b), text.size());
    if (b > pos) append(partition(text.substr(pos, b - pos), /*parse_special=*/true));
    if (e > b) append(partition(text.substr(b, e - b), /*parse_special=*/false));
    pos = e;
  }
  if (pos < text.size()) append(partition(text.substr(pos), /*parse_special=*/true));
  return encode_fragments(frags, add_special);
}

bool Tokenizer::contains_control_text(std::string_view text) const {
  for (TokenId id : special_cache_) {
    if ((attrs_[id] & (kAttrControl | kAttrUnknown)) && text.find(tokens_[id]) != std::string_view::npos) return true;
  }
  return false;
}

int64_t Tokenizer::min_tokens(std::string_view text) const {
  if ((model_ != "llama" && model_ != "gpt2") || max_token_len_ == 0) return 0;
  uint64_t counted = 0;
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    if (!is_ascii_space(text[i])) {
      counted += byte_kept_[(uint8_t)text[i]];
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && is_ascii_space(text[j])) ++j;
    const bool may_drop = (i > 0 && rstrip_last_byte_[(uint8_t)text[i - 1]]) ||
                          (j < n && lstrip_first_byte_[(uint8_t)text[j]]);
    if (!may_drop) {
      for (size_t k = i; k < j; ++k) counted += byte_kept_[(uint8_t)text[k]];
    }
    i = j;
  }
  return (int64_t)(counted / max_token_len_);
}

std::vector<TokenId> Tokenizer::encode_fragments(const std::vector<Fragment>& frags, bool add_special) const {
  std::vector<TokenId> out;
  size_t bytes = 0;
  for (const auto& f : frags) bytes += f.text.size();
  out.reserve(bytes / 3 + frags.size() + 4);
  if (add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);
  bool after_special = true;
  for (const auto& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_text(f.text, after_special, out);
      after_special = false;
    }
  }
  if (add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
  if (add_special && add_sep_ && sep_ >= 0) out.push_back(sep_);
  return out;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool render_special) const {
  std::string out;
  bool strip = add_space_prefix_;
  for (TokenId id : ids) {
    std::string piece = token_to_piece(id, render_special);
    if (strip && !piece.empty()) {
      if (piece[0] == ' ') piece.erase(0, 1);
      strip = false;
    }
    out += piece;
  }
  if (clean_spaces_) return detail::clean_up_spaces(out);
  return out;
}

namespace detail {

std::string clean_up_spaces(std::string_view text) {
  // Pass 1: " ?", " !", " .", " ," lose the space.
  std::string a;
  a.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!a.empty() && i > 0 && text[i - 1] == ' ' && (c == '?' || c == '!' || c == '.' || c == ',')) a.pop_back();
    a.push_back(c);
  }
  // Pass 2: " ' " between spaces becomes "'".
  std::string b;
  b.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const char c = a[i];
    if (c == '\'' && i > 0 && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      if (!b.empty()) b.pop_back();
      b.push_back(c);
      ++i;  // drop the following space
      continue;
    }
    b.push_back(c);
  }
  // Pass 3: contractions " 's", " 'm", " 're", " 've" lose the space.
  std::string c3;
  c3.reserve(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    const char c = b[i];
    if (c == '\'' && i > 0 && b[i - 1] == ' ' && i + 1 < b.size() && !c3.empty()) {
      const char x1 = b[i + 1];
      const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
      if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) c3.pop_back();
    }
    c3.push_back(c);
  }
  return c3;
}

}  // namespace detail

}  // namespace chimera::tokenizer
