// `chimera tokenize` and `chimera detokenize`: text <-> ids with a model's
// tokenizer. Only the GGUF metadata is needed, so vocab-only files work and no
// weights are loaded. User mistakes (no text, bad ids, unreadable file) are
// reported as "error: ..." with exit code 1.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "format/gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace chimera::cli {

namespace {

Result<std::unique_ptr<tokenizer::Tokenizer>> load_tokenizer(const std::string& path) {
  auto g = format::GgufFile::open(path);
  if (!g) return g.status();
  auto t = tokenizer::Tokenizer::from_gguf(**g);
  if (!t) return t.status().with_context(path);
  return t;
}

// A piece shown on one line: printable UTF-8 as is, control bytes and bytes
// of broken UTF-8 escaped.
std::string escape_piece(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = (unsigned char)s[i];
    if (c == '\n') { out += "\\n"; ++i; continue; }
    if (c == '\t') { out += "\\t"; ++i; continue; }
    if (c == '\r') { out += "\\r"; ++i; continue; }
    if (c == '\\') { out += "\\\\"; ++i; continue; }
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
      ++i;
      continue;
    }
    if (c < 0x80) { out.push_back((char)c); ++i; continue; }
    // Multi-byte: copy when the whole sequence is present and valid.
    size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
      ++i;
    }
  }
  return out;
}

struct TokenizeOptions {
  std::string model, prompt, file;
  bool no_bos = false, no_special = false, pieces = false;
};

int run_tokenize(const TokenizeOptions& o) {
  if (o.prompt.empty() == o.file.empty()) return report_error("give exactly one of -p TEXT or -f FILE");
  std::string text = o.prompt;
  if (!o.file.empty()) {
    auto r = read_text_file(o.file);
    if (!r) return report_error(r.status());
    text = *r;
  }
  auto t = load_tokenizer(o.model);
  if (!t) return report_error(t.status());
  const tokenizer::Tokenizer& tok = **t;
  const std::vector<int32_t> ids = tok.encode(text, /*add_special=*/!o.no_bos, /*parse_special=*/!o.no_special);
  if (o.pieces) {
    for (int32_t id : ids) std::printf("%d\t%s\n", id, escape_piece(tok.token_to_piece(id, true)).c_str());
  } else {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
  }
  std::fflush(stdout);
  return 0;
}

struct DetokenizeOptions {
  std::string model, ids;
  bool no_special = false;
};

int run_detokenize(const DetokenizeOptions& o) {
  auto ids = parse_id_list(o.ids);
  if (!ids) return report_error(ids.status());
  auto t = load_tokenizer(o.model);
  if (!t) return report_error(t.status());
  const tokenizer::Tokenizer& tok = **t;
  for (int32_t id : *ids) {
    if (!tok.valid_id(id))
      return report_error("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(tok.n_vocab()) +
                          ")");
  }
  const std::string text = tok.decode(*ids, /*render_special=*/!o.no_special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::printf("\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace

void add_tokenize_commands(CLI::App& app) {
  auto topt = std::make_shared<TokenizeOptions>();
  CLI::App* tc = app.add_subcommand("tokenize", "Print the token ids of a text (vocab-only GGUF files work)");
  tc->add_option("-m,--model", topt->model, "GGUF file")->required();
  tc->add_option("-p,--prompt", topt->prompt, "Text to tokenize");
  tc->add_option("-f,--file", topt->file, "Read the text from a file");
  tc->add_flag("--no-bos", topt->no_bos, "Do not add BOS/EOS even when the vocabulary asks for them");
  tc->add_flag("--no-special", topt->no_special, "Tokenize special-token text (e.g. <|im_end|>) as plain text");
  tc->add_flag("--pieces", topt->pieces, "Print one 'id<TAB>piece' line per token");
  tc->callback([topt] { set_exit_code(run_tokenize(*topt)); });

  auto dopt = std::make_shared<DetokenizeOptions>();
  CLI::App* dc = app.add_subcommand("detokenize", "Print the text of token ids");
  dc->add_option("-m,--model", dopt->model, "GGUF file")->required();
  dc->add_option("-t,--tokens", dopt->ids, "Token ids: \"1,2,3\" or \"1 2 3\"")->required();
  dc->add_flag("--no-special", dopt->no_special, "Do not render control tokens (BOS, EOS, ...)");
  dc->callback([dopt] { set_exit_code(run_detokenize(*dopt)); });
}

}  // namespace chimera::cli
