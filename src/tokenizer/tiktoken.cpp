// Tokenizer::from_tiktoken: a byte-level BPE from a tiktoken rank file
// (one "base64(token bytes) rank" per line; rank = token id). Token texts are
// stored in GPT-2's byte-level alphabet like "gpt2" GGUF vocabularies, ids with
// no rank and no special token become unique "<|unused_N|>" placeholders, and
// special tokens are control tokens. Malformed lines give an error naming the line.
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace chimera::tokenizer {

namespace {

bool base64_decode(std::string_view in, std::string* out) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t i = 0;
  for (; i < in.size() && in[i] != '='; ++i) {
    const int v = val(in[i]);
    if (v < 0) return false;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back((char)((acc >> bits) & 0xFF));
    }
  }
  for (; i < in.size(); ++i) {
    if (in[i] != '=') return false;
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_tiktoken_text(std::string_view text, const TiktokenOptions& opts) {
  std::vector<std::pair<int64_t, std::string>> ranked;
  size_t line_no = 0, pos = 0;
  int64_t max_id = -1;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos)
      return invalid_argument("tiktoken line " + std::to_string(line_no) + ": expected 'base64 rank'");
    std::string bytes;
    if (!base64_decode(line.substr(0, sp), &bytes) || bytes.empty())
      return invalid_argument("tiktoken line " + std::to_string(line_no) + ": bad base64 token");
    int64_t rank = 0;
    std::string_view r = line.substr(sp + 1);
    if (r.empty() || r.size() > 9) return invalid_argument("tiktoken line " + std::to_string(line_no) + ": bad rank");
    for (char c : r) {
      if (c < '0' || c > '9') return invalid_argument("tiktoken line " + std::to_string(line_no) + ": bad rank");
      rank = rank * 10 + (c - '0');
    }
    max_id = std::max(max_id, rank);
    ranked.emplace_back(rank, std::move(bytes));
  }
  if (ranked.empty()) return invalid_argument("tiktoken file has no tokens");
  for (const auto& [t, id] : opts.special_tokens) {
    if (id < 0 || id > 100000000) return invalid_argument("special token '" + t + "' has a bad id");
    max_id = std::max<int64_t>(max_id, id);
  }

  VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = opts.pre;
  spec.tokens.assign((size_t)max_id + 1, std::string());
  spec.token_types.assign((size_t)max_id + 1, (int32_t)TokenType::kUnused);
  for (auto& [rank, bytes] : ranked) {
    if (!spec.tokens[rank].empty()) return invalid_argument("tiktoken rank " + std::to_string(rank) + " appears twice");
    spec.tokens[rank] = bytelevel_encode(bytes);
    spec.token_types[rank] = (int32_t)TokenType::kNormal;
  }
  for (const auto& [t, id] : opts.special_tokens) {
    if (t.empty()) return invalid_argument("empty special token text");
    if (!spec.tokens[id].empty())
      return invalid_argument("special token '" + t + "' id " + std::to_string(id) + " is already used");
    spec.tokens[id] = t;
    spec.token_types[id] = (int32_t)TokenType::kControl;
  }
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    if (spec.tokens[i].empty()) spec.tokens[i] = "<|unused_" + std::to_string(i) + "|>";
  }
  if (opts.bos) spec.bos = *opts.bos;
  if (opts.eos) spec.eos = *opts.eos;
  spec.add_bos = opts.add_bos;
  auto r = detail::make_bpe_by_rank(spec);
  if (!r) return r.status().with_context("tiktoken");
  return r;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_tiktoken(const std::string& path, const TiktokenOptions& opts) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot read tiktoken file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return from_tiktoken_text(ss.str(), opts);
}

}  // namespace chimera::tokenizer
