// Text <-> token ids, built from a GGUF file's `tokenizer.*` metadata the way
// llama.cpp reads it: `tokenizer.ggml.model` = "llama" (SentencePiece-style
// BPE over scores with byte fallback), "gpt2" (byte-level BPE with merges and
// the pre-tokenizer named by `tokenizer.ggml.pre`), "bert" (WordPiece), "none".
// Special / control / user-defined tokens are matched in the text first when
// parse_special is set.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "format/gguf/gguf.h"

namespace chimera::tokenizer {

using TokenId = int32_t;

// llama.cpp token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Builds the tokenizer described by the GGUF metadata; clear error when the
  // metadata is missing, inconsistent, or names an unsupported model/pre-tokenizer.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const format::GgufFile& gguf);

  // add_special: add BOS (and EOS) when the vocabulary asks for it
  // (tokenizer.ggml.add_bos_token / add_eos_token, with llama.cpp's defaults).
  // parse_special: text that spells a special/control token becomes that token.
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const = 0;

  // Text of one token. render_special=false gives "" for control tokens.
  // The bytes of a byte-fallback token (<0x0A>) are returned raw, so a piece
  // may be a partial UTF-8 sequence; use StreamDecoder for display.
  virtual std::string token_to_piece(TokenId id, bool render_special) const = 0;

  // Concatenated pieces (SentencePiece: the leading space of the first token is
  // removed when remove_leading_space).
  virtual std::string decode(const std::vector<TokenId>& ids, bool render_special) const;

  int32_t n_vocab() const { return (int32_t)tokens_.size(); }
  const std::string& token_text(TokenId id) const { return tokens_[id]; }
  TokenType token_type(TokenId id) const { return types_[id]; }
  TokenId bos() const { return bos_; }   // -1 when none
  TokenId eos() const { return eos_; }   // -1 when none
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  // End-of-generation: EOS, EOT, EOM and similar control tokens.
  bool is_eog(TokenId id) const;
  // Finds a token by its exact text (e.g. "<|im_end|>"); -1 when absent.
  TokenId find_token(std::string_view text) const;

 protected:
  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::vector<TokenId> eog_ids_;
  TokenId bos_ = -1, eos_ = -1;
  bool add_bos_ = false, add_eos_ = false;
};

// Incremental detokenizer for streaming: push() returns only complete UTF-8;
// bytes of an incomplete sequence are held back until the next token completes
// them. flush() returns what remains (invalid bytes become U+FFFD).
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tok, bool render_special) : tok_(tok), render_special_(render_special) {}
  std::string push(TokenId id);
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool render_special_;
  std::string pending_;
  bool first_ = true;
};

}  // namespace chimera::tokenizer
