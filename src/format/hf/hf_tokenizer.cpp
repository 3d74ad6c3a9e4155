// HF tokenizer files -> tokenizer.ggml.*: a SentencePiece tokenizer.model
// (hf_spm_vocab.cpp, llama.cpp's "llama" model) when the folder has one, else
// tokenizer.json as byte-level BPE (llama.cpp's "gpt2" model), then the special
// ids and flags shared by both.
// tokens: the BPE vocabulary by id, then the added tokens at their ids; ids
// below the config's vocab_size that neither names become "[PAD<id>]" (type
// UNUSED), as llama.cpp's converter does for padded embedding tables. Types:
// NORMAL for BPE pieces, CONTROL for special added tokens, USER_DEFINED for the
// other added tokens. merges are copied in rank order ("a b"; the newer
// [a, b] array form is joined). The pre-tokenizer name is recognised from the
// Split regex (o200k / GPT-4o: "gpt-4o"; Llama 3: "llama-bpe"; Qwen2: "qwen2") or a ByteLevel
// step with its GPT-2 regex (GPT-NeoX: "olmo", GPT-2: "gpt-2"); an unknown
// pre-tokenizer is an error rather than a silently different tokenisation.
// Invariants: ids must be in [0, vocab_size) and unique; every string is
// type-checked; errors name the file.
#include <algorithm>
#include <filesystem>
#include <functional>

#include "core/mmap_file.h"
#include "format/hf/hf_convert.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5 };

// Recognises the pre-tokenizer from the regexes of tokenizer.json.
Result<std::string> pre_name(const json& tok) {
  std::string all;
  std::function<void(const json&)> walk = [&](const json& j) {
    if (j.is_object()) {
      auto p = j.find("pattern");
      if (p != j.end() && p->is_object()) {
        auto r = p->find("Regex");
        if (r != p->end() && r->is_string()) all += r->get<std::string>() + "\n";
      }
      auto s = j.find("pretokenizers");
      if (s != j.end() && s->is_array())
        for (const json& x : *s) walk(x);
    }
  };
  // A ByteLevel step that splits with its built-in GPT-2 regex.
  bool byte_level_regex = false;
  std::function<void(const json&)> walk_bl = [&](const json& j) {
    if (!j.is_object()) return;
    if (j.value("type", std::string()) == "ByteLevel" && j.value("use_regex", true)) byte_level_regex = true;
    if (auto s = j.find("pretokenizers"); s != j.end() && s->is_array())
      for (const json& x : *s) walk_bl(x);
  };
  auto it = tok.find("pre_tokenizer");
  if (it != tok.end()) {
    walk(*it);
    walk_bl(*it);
  }
  if (all.empty() && byte_level_regex) {
    // GPT-NeoX (NFC normaliser; llama.cpp's hash for it names "olmo", the
    // same split as "mpt") or GPT-2 itself: both use the GPT-2 regex.
    auto n = tok.find("normalizer");
    const bool nfc = n != tok.end() && n->is_object() && n->value("type", std::string()) == "NFC";
    return std::string(nfc ? "olmo" : "gpt-2");
  }
  if (all.find("[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+") != std::string::npos)
    return std::string("gpt-4o");
  if (all.find("(?i:'s|'t|'re|'ve|'m|'ll|'d)") != std::string::npos && all.find("\\p{N}{1,3}") != std::string::npos)
    return std::string("llama-bpe");
  // Qwen2 (Dream): the Llama 3 split with single digits.
  if (all.find("(?i:'s|'t|'re|'ve|'m|'ll|'d)") != std::string::npos && all.find("|\\p{N}|") != std::string::npos)
    return std::string("qwen2");
  return unsupported(
      "tokenizer.json: unknown pre-tokenizer (recognised: the o200k / GPT-4o, Llama 3 and Qwen2 splits, ByteLevel "
      "with the GPT-2 regex)");
}

Result<int64_t> token_id(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return int64_t(-1);
  if (it->is_array()) {
    if (it->empty() || !(*it)[0].is_number_integer()) return invalid_argument(std::string(key) + " is not an id");
    return (*it)[0].get<int64_t>();
  }
  if (!it->is_number_integer()) return invalid_argument(std::string(key) + " is not an integer id");
  return it->get<int64_t>();
}

}  // namespace

Result<json> read_json(const std::string& path) {
  auto m = MappedFile::open(path);
  if (!m) return not_found("cannot read '" + path + "'");
  const char* p = (const char*)(*m)->data();
  json j = json::parse(p, p + (*m)->size(), nullptr, false);
  if (j.is_discarded()) return invalid_argument("'" + path + "' is not valid JSON");
  return j;
}

namespace {

// tokenizer.json (byte-level BPE) -> the vocabulary keys; returns n_vocab.
Result<int64_t> write_bpe_vocab(const std::string& hf_dir, const json& config, GgufWriter& w) {
  const std::string tpath = (fs::path(hf_dir) / "tokenizer.json").string();
  CHIMERA_ASSIGN_OR_RETURN(json tok, read_json(tpath));
  const std::string where = "'" + tpath + "'";
  if (!tok.is_object()) return invalid_argument(where + " is not an object");
  auto model = tok.find("model");
  if (model == tok.end() || !model->is_object()) return invalid_argument(where + " has no 'model'");
  auto type = model->find("type");
  if (type == model->end() || !type->is_string() || type->get<std::string>() != "BPE")
    return unsupported(where + ": only BPE tokenizers are supported");
  auto vocab = model->find("vocab");
  auto merges = model->find("merges");
  if (vocab == model->end() || !vocab->is_object()) return invalid_argument(where + ": model.vocab must be an object");
  if (merges == model->end() || !merges->is_array()) return invalid_argument(where + ": model.merges must be an array");

  int64_t n_vocab = 0;
  if (auto v = config.find("vocab_size"); v != config.end() && v->is_number_integer()) n_vocab = v->get<int64_t>();
  int64_t max_id = -1;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it->is_number_integer()) return invalid_argument(where + ": vocab['" + it.key() + "'] is not an id");
    max_id = std::max(max_id, it->get<int64_t>());
  }
  auto added = tok.find("added_tokens");
  if (added != tok.end() && !added->is_array()) return invalid_argument(where + ": added_tokens must be an array");
  if (added != tok.end())
    for (const json& a : *added) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        return invalid_argument(where + ": malformed added_tokens entry");
      max_id = std::max(max_id, a["id"].get<int64_t>());
    }
  if (n_vocab <= 0) n_vocab = max_id + 1;
  if (max_id >= n_vocab)
    return invalid_argument(where + ": token id " + std::to_string(max_id) + " >= vocab_size " + std::to_string(n_vocab));
  if (n_vocab > (1 << 24)) return invalid_argument(where + ": vocabulary too large");

  std::vector<std::string> tokens((size_t)n_vocab);
  std::vector<int32_t> types((size_t)n_vocab, 0);
  auto place = [&](int64_t id, const std::string& s, int32_t t) -> Status {
    if (id < 0) return invalid_argument(where + ": negative token id for '" + s + "'");
    if (types[(size_t)id] != 0 && tokens[(size_t)id] != s)
      return invalid_argument(where + ": id " + std::to_string(id) + " names both '" + tokens[(size_t)id] + "' and '" + s + "'");
    tokens[(size_t)id] = s;
    types[(size_t)id] = t;
    return Status::ok();
  };
  for (auto it = vocab->begin(); it != vocab->end(); ++it)
    CHIMERA_RETURN_IF_ERROR(place(it->get<int64_t>(), it.key(), kNormal));
  if (added != tok.end())
    for (const json& a : *added) {
      const bool special = a.value("special", false);
      // An added token that is also a BPE piece keeps its id; it becomes control/user-defined.
      const int64_t id = a["id"].get<int64_t>();
      types[(size_t)id] = 0;
      CHIMERA_RETURN_IF_ERROR(place(id, a["content"].get<std::string>(), special ? kControl : kUserDefined));
    }
  for (int64_t i = 0; i < n_vocab; ++i)
    if (types[(size_t)i] == 0) {
      tokens[(size_t)i] = "[PAD" + std::to_string(i) + "]";
      types[(size_t)i] = kUnused;
    }

  std::vector<std::string> merge_list;
  merge_list.reserve(merges->size());
  for (const json& m : *merges) {
    if (m.is_string()) {
      merge_list.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merge_list.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      return invalid_argument(where + ": malformed merge entry");
    }
  }
  CHIMERA_ASSIGN_OR_RETURN(std::string pre, pre_name(tok));

  w.set("tokenizer.ggml.model", GgufValue::from_string("gpt2"));
  w.set("tokenizer.ggml.pre", GgufValue::from_string(pre));
  w.set("tokenizer.ggml.tokens", GgufValue::from_strings(tokens));
  w.set("tokenizer.ggml.token_type", GgufValue::from_i32s(types));
  w.set("tokenizer.ggml.merges", GgufValue::from_strings(merge_list));
  return n_vocab;
}

}  // namespace

Status write_tokenizer(const std::string& hf_dir, const json& config, GgufWriter& w) {
  // A SentencePiece tokenizer.model wins over tokenizer.json, as in llama.cpp's
  // converter (Llama 2 / Phi-3 folders carry both; their tokenizer.json is the
  // byte-fallback BPE rendering of the same SentencePiece model).
  int64_t n_vocab = 0;
  if (fs::exists(fs::path(hf_dir) / "tokenizer.model")) {
    CHIMERA_ASSIGN_OR_RETURN(n_vocab, write_spm_vocab(hf_dir, config, w));
  } else {
    CHIMERA_ASSIGN_OR_RETURN(n_vocab, write_bpe_vocab(hf_dir, config, w));
  }

  // Special ids: config.json first, generation_config.json for extra end ids.
  auto gen = read_json((fs::path(hf_dir) / "generation_config.json").string());
  const json genj = gen.is_ok() && gen->is_object() ? gen.value() : json::object();
  struct IdKey { const char* hf; const char* gguf; };
  for (IdKey k : {IdKey{"bos_token_id", "tokenizer.ggml.bos_token_id"}, IdKey{"eos_token_id", "tokenizer.ggml.eos_token_id"},
                  IdKey{"pad_token_id", "tokenizer.ggml.padding_token_id"},
                  IdKey{"mask_token_id", "tokenizer.ggml.mask_token_id"}}) {
    CHIMERA_ASSIGN_OR_RETURN(int64_t id, token_id(config, k.hf));
    if (id < 0) {
      CHIMERA_ASSIGN_OR_RETURN(id, token_id(genj, k.hf));
    }
    if (id < 0) continue;
    if (id >= n_vocab) return invalid_argument(std::string(k.hf) + " " + std::to_string(id) + " is out of the vocabulary");
    w.set(k.gguf, GgufValue::from_u32((uint32_t)id));
  }
  // generation_config may list several end ids (Phi-4: <|end|>, <|endoftext|>):
  // the first one that is not the eos becomes the end-of-turn token.
  CHIMERA_ASSIGN_OR_RETURN(int64_t eos, token_id(config, "eos_token_id"));
  if (auto e = genj.find("eos_token_id"); e != genj.end() && e->is_array()) {
    for (const json& x : *e)
      if (x.is_number_integer() && x.get<int64_t>() != eos && x.get<int64_t>() >= 0 && x.get<int64_t>() < n_vocab) {
        w.set("tokenizer.ggml.eot_token_id", GgufValue::from_u32((uint32_t)x.get<int64_t>()));
        break;
      }
  }
  auto tc = read_json((fs::path(hf_dir) / "tokenizer_config.json").string());
  if (tc.is_ok() && tc->is_object()) {
    const json& t = tc.value();
    if (auto v = t.find("add_bos_token"); v != t.end() && v->is_boolean())
      w.set("tokenizer.ggml.add_bos_token", GgufValue::from_bool(v->get<bool>()));
    if (auto v = t.find("add_eos_token"); v != t.end() && v->is_boolean())
      w.set("tokenizer.ggml.add_eos_token", GgufValue::from_bool(v->get<bool>()));
    if (auto v = t.find("chat_template"); v != t.end() && v->is_string())
      w.set("tokenizer.chat_template", GgufValue::from_string(v->get<std::string>()));
  } else if (!tc.is_ok() && tc.status().code() != StatusCode::kNotFound) {
    return tc.status();
  }
  return Status::ok();
}

}  // namespace chimera::format::hf
