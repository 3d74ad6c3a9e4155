// Byte-level BPE pre-tokenization: the regex list and flags for each
// `tokenizer.ggml.pre` name (as llama.cpp maps them), and a PCRE2 (UTF + UCP)
// splitter that applies the regexes in sequence the way llama.cpp does: each
// regex splits every current piece into its matches and the gaps between them,
// and both are kept, so the pieces always concatenate back to the input.
// Invariants: split() never fails or throws; invalid UTF-8 is replaced by
// U+FFFD first (llama.cpp does the same); a PCRE2 error (resource limit) leaves
// the rest of that piece unsplit rather than losing text. Compiled patterns are
// shared and immutable, so one splitter may be used from many threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace chimera::tokenizer {

struct PreTokenizerSpec {
  std::string name;                   // canonical name, e.g. "llama3"
  std::vector<std::string> regexes;   // applied in order
  bool ignore_merges = false;         // a piece that is already a token is emitted whole
  bool clean_spaces = true;           // decode() applies clean_up_tokenization_spaces
  bool add_bos = false;               // default add_bos for this pre-tokenizer
  bool no_bos = false;                // BOS id defaults to none (chatglm)
};

// The spec for a `tokenizer.ggml.pre` value ("" and "default" = llama.cpp's
// default). Unknown names give kUnsupported naming the value.
Result<PreTokenizerSpec> pre_tokenizer_spec(std::string_view pre);

// Names accepted by pre_tokenizer_spec (for messages and tests).
std::vector<std::string> known_pre_tokenizers();

class RegexSplitter {
 public:
  RegexSplitter();
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // Compiles the patterns (PCRE2, UTF + UCP, `$` = end of piece only).
  static Result<RegexSplitter> create(const std::vector<std::string>& patterns);

  // Splits text into pieces (raw UTF-8; never empty strings).
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace chimera::tokenizer
