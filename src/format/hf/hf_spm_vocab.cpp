// tokenizer.model (SentencePiece) -> tokenizer.ggml.* the way llama.cpp's
// converter writes it (_create_vocab_sentencepiece):
//  * ids [0, vocab_size): vocab_size from config.json, else the piece count;
//    pieces beyond vocab_size are dropped with a warning;
//  * piece types: unknown -> UNKNOWN, control -> CONTROL, unused -> UNUSED,
//    byte -> BYTE, everything else (normal and user-defined pieces) -> NORMAL;
//  * ids without a piece: "[PAD<id>]", score -10000, UNUSED;
//  * added_tokens.json {text: id}: USER_DEFINED, score -1000;
//  * tokenizer_config.json added_tokens_decoder {id: {content, special}}:
//    CONTROL when special or shaped like one ("<|...|>", "<pad>", "<mask>"),
//    else USER_DEFINED with "▁" rendered as a space; score -1000.
// Written as model "llama", pre "default", with tokens, scores, token_type.
#include <cstdio>
#include <filesystem>
#include <string_view>

#include "core/mmap_file.h"
#include "format/hf/hf_convert.h"
#include "format/hf/sentencepiece_model.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

int32_t gguf_type(SpmPieceType t) {
  switch (t) {
    case SpmPieceType::kUnknown: return kUnknown;
    case SpmPieceType::kControl: return kControl;
    case SpmPieceType::kUnused: return kUnused;
    case SpmPieceType::kByte: return kByte;
    default: return kNormal;
  }
}

bool looks_special(const std::string& t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  return t.size() >= 4 && t.compare(0, 2, "<|") == 0 && t.compare(t.size() - 2, 2, "|>") == 0;
}

std::string spaces_for_word_marks(const std::string& s) {
  const std::string_view mark = "\xE2\x96\x81";  // U+2581
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, mark.size(), mark) == 0) {
      out.push_back(' ');
      i += mark.size();
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

}  // namespace

Result<int64_t> write_spm_vocab(const std::string& hf_dir, const json& config, GgufWriter& w) {
  const std::string path = (fs::path(hf_dir) / "tokenizer.model").string();
  auto m = MappedFile::open(path);
  if (!m) return not_found("cannot read '" + path + "'");
  auto parsed = parse_sentencepiece_model((const uint8_t*)(*m)->data(), (*m)->size());
  if (!parsed) return Status(parsed.status().code(), "'" + path + "': " + parsed.status().message());
  const std::vector<SpmPiece>& pieces = *parsed;

  int64_t n_vocab = (int64_t)pieces.size();
  if (auto v = config.find("vocab_size"); v != config.end() && v->is_number_integer()) n_vocab = v->get<int64_t>();
  if (n_vocab <= 0 || n_vocab > (1 << 24))
    return invalid_argument("config.json: vocab_size " + std::to_string(n_vocab) + " is out of range");
  if ((int64_t)pieces.size() > n_vocab)
    std::fprintf(stderr, "warning: tokenizer.model has %zu pieces, more than vocab_size %lld; the rest are dropped\n",
                 pieces.size(), (long long)n_vocab);

  std::vector<std::string> tokens((size_t)n_vocab);
  std::vector<float> scores((size_t)n_vocab, -10000.f);
  std::vector<int32_t> types((size_t)n_vocab, kUnused);
  for (int64_t i = 0; i < n_vocab; ++i) tokens[(size_t)i] = "[PAD" + std::to_string(i) + "]";
  for (size_t i = 0; i < pieces.size() && (int64_t)i < n_vocab; ++i) {
    tokens[i] = pieces[i].piece;
    scores[i] = pieces[i].score;
    types[i] = gguf_type(pieces[i].type);
  }
  auto id_in_range = [&](const json& id, const std::string& where) -> Result<int64_t> {
    if (!id.is_number_integer()) return invalid_argument(where + ": token id is not an integer");
    const int64_t v = id.get<int64_t>();
    if (v < 0 || v >= n_vocab)
      return invalid_argument(where + ": token id " + std::to_string(v) + " is outside the vocabulary");
    return v;
  };
  auto added = read_json((fs::path(hf_dir) / "added_tokens.json").string());
  if (added.is_ok()) {
    if (!added->is_object()) return invalid_argument("added_tokens.json must be an object");
    for (auto it = added->begin(); it != added->end(); ++it) {
      CHIMERA_ASSIGN_OR_RETURN(int64_t id, id_in_range(*it, "added_tokens.json['" + it.key() + "']"));
      tokens[(size_t)id] = it.key();
      scores[(size_t)id] = -1000.f;
      types[(size_t)id] = kUserDefined;
    }
  } else if (added.status().code() != StatusCode::kNotFound) {
    return added.status();
  }
  auto tc = read_json((fs::path(hf_dir) / "tokenizer_config.json").string());
  if (tc.is_ok() && tc->is_object()) {
    if (auto dec = tc->find("added_tokens_decoder"); dec != tc->end()) {
      if (!dec->is_object()) return invalid_argument("tokenizer_config.json: added_tokens_decoder must be an object");
      for (auto it = dec->begin(); it != dec->end(); ++it) {
        const std::string where = "tokenizer_config.json added_tokens_decoder['" + it.key() + "']";
        char* end = nullptr;
        const long long id = std::strtoll(it.key().c_str(), &end, 10);
        if (it.key().empty() || *end != '\0') return invalid_argument(where + ": the key is not a token id");
        CHIMERA_ASSIGN_OR_RETURN(int64_t in_range, id_in_range(json(id), where));
        if (!it->is_object() || !it->contains("content") || !(*it)["content"].is_string())
          return invalid_argument(where + ": no string 'content'");
        const std::string content = (*it)["content"].get<std::string>();
        const bool special = (*it).value("special", false) || looks_special(content);
        tokens[(size_t)in_range] = special ? content : spaces_for_word_marks(content);
        types[(size_t)in_range] = special ? kControl : kUserDefined;
        scores[(size_t)in_range] = -1000.f;
      }
    }
  }

  w.set("tokenizer.ggml.model", GgufValue::from_string("llama"));
  w.set("tokenizer.ggml.pre", GgufValue::from_string("default"));
  w.set("tokenizer.ggml.tokens", GgufValue::from_strings(tokens));
  w.set("tokenizer.ggml.scores", GgufValue::from_f32s(scores));
  w.set("tokenizer.ggml.token_type", GgufValue::from_i32s(types));
  return n_vocab;
}

}  // namespace chimera::format::hf
