// Text <-> token ids, built from a GGUF file's `tokenizer.*` metadata the way
// llama.cpp reads it: `tokenizer.ggml.model` = "llama" (SentencePiece-style
// BPE over scores with byte fallback), "gpt2" (byte-level BPE with merges and
// the pre-tokenizer named by `tokenizer.ggml.pre`), "bert" (WordPiece), "none".
// Special / control / user-defined tokens are matched in the text first when
// parse_special is set (user-defined ones always, as llama.cpp and Hugging Face
// do). A Tokenizer is immutable after construction: encode/decode may be called
// from many threads. Bad input never aborts: unknown ids decode to "", invalid
// UTF-8 is replaced, inconsistent metadata gives a Status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "format/gguf/gguf.h"

namespace chimera::tokenizer {

using TokenId = int32_t;

// llama.cpp token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

// Everything the `tokenizer.ggml.*` keys say, before any defaults are applied.
// from_gguf() reads one from a file; a converter can fill one in and call
// Tokenizer::from_spec() to check it (or write the keys with the same names).
struct VocabSpec {
  std::string model;                 // tokenizer.ggml.model: "llama", "gpt2", "bert", "none"
  std::string pre;                   // tokenizer.ggml.pre ("" = default)
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens
  std::vector<float> scores;         // tokenizer.ggml.scores: empty or one per token
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type: empty or one per token
  std::vector<std::string> merges;   // tokenizer.ggml.merges ("left right"), gpt2 only
  // Special token ids; nullopt = the model type's llama.cpp default.
  std::optional<int64_t> bos, eos, eot, eom, unk, sep, pad, mask;
  std::optional<int64_t> fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
  std::optional<bool> add_bos, add_eos, add_sep, add_space_prefix, remove_extra_whitespaces;
  std::string model_name;            // general.name (a few per-model token attributes depend on it)
};

// Reads the tokenizer keys of a GGUF file (vocab-only files work). Errors name
// the key whose type is wrong.
Result<VocabSpec> read_vocab_spec(const format::GgufFile& gguf);

// Options for a tokenizer built from a tiktoken rank file.
struct TiktokenOptions {
  std::string pre = "llama3";  // pre-tokenizer name, as tokenizer.ggml.pre ("llama3", "gpt-4o", ...)
  // Special tokens (text, id), ids usually right after the ranks.
  std::vector<std::pair<std::string, TokenId>> special_tokens;
  std::optional<TokenId> bos, eos;
  bool add_bos = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Builds the tokenizer described by the GGUF metadata; clear error when the
  // metadata is missing, inconsistent, or names an unsupported model/pre-tokenizer.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const format::GgufFile& gguf);
  static Result<std::unique_ptr<Tokenizer>> from_spec(const VocabSpec& spec);
  // Byte-level BPE from a tiktoken rank file ("base64(token) rank" per line):
  // ids are the ranks, a pair merges when its concatenation is a token, lowest
  // rank first (tiktoken's rule; no merge list needed).
  static Result<std::unique_ptr<Tokenizer>> from_tiktoken(const std::string& path, const TiktokenOptions& opts);
  static Result<std::unique_ptr<Tokenizer>> from_tiktoken_text(std::string_view ranks, const TiktokenOptions& opts);

  // add_special: add BOS (and EOS) when the vocabulary asks for it
  // (tokenizer.ggml.add_bos_token / add_eos_token, with llama.cpp's defaults;
  // WordPiece adds [CLS] ... [SEP]).
  // parse_special: text that spells a special/control token becomes that token.
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const;

  // encode(text, add_special, parse_special=true), except that the byte ranges
  // `literal` (sorted, non-overlapping, inside text) are plain text: nothing in
  // them becomes a control token, and no control token is matched across
  // their edges. Everything else is tokenized exactly as encode() does (raw
  // text on both sides of an edge is one fragment, a marker's lstrip/rstrip
  // reaches across), so without control-token text in the literal ranges the
  // ids equal encode(text, add_special, true). Used for chat prompts: template
  // text may hold control markers, message contents may not.
  struct Span {
    size_t begin = 0, end = 0;
  };
  std::vector<TokenId> encode_spans(std::string_view text, const std::vector<Span>& literal, bool add_special) const;

  // True when `text` contains the text of a control or unknown token (what
  // parse_special=true would turn into a control token).
  bool contains_control_text(std::string_view text) const;

  // A lower bound on the ids encode(text, ...) gives (BOS/EOS not counted),
  // from one pass over the bytes, without tokenizing: with SentencePiece and
  // byte-level BPE every input byte ends up in a token (byte fallback or one
  // <unk> per character), and a token covers at most as many input bytes as
  // its own text is long (longest: max_token_bytes()). ASCII whitespace next
  // to a byte that can end (start) a marker with rstrip (lstrip) may be
  // dropped, so it is not counted; nor is a byte the vocabulary can drop (no
  // byte token and no <unk>, e.g. some control bytes in Falcon's). 0 for
  // WordPiece and "none" vocabularies.
  // Lets a server reject a prompt that cannot fit the context before paying
  // for its tokenization.
  int64_t min_tokens(std::string_view text) const;
  size_t max_token_bytes() const { return max_token_len_; }

  // Text of one token. render_special=false gives "" for control tokens.
  // The bytes of a byte-fallback token (<0x0A>) are returned raw, so a piece
  // may be a partial UTF-8 sequence; use StreamDecoder for display.
  // Out-of-range ids give "".
  virtual std::string token_to_piece(TokenId id, bool render_special) const = 0;

  // Concatenated pieces. SentencePiece (add_space_prefix): the leading space of
  // the first non-empty piece is removed. Vocabularies with clean_spaces
  // (llama.cpp's clean_up_tokenization_spaces: GPT-2, BERT, ...) also get
  // " ." -> "." style clean-up. Bytes are returned as they are (may be invalid UTF-8).
  virtual std::string decode(const std::vector<TokenId>& ids, bool render_special) const;

  int32_t n_vocab() const { return (int32_t)tokens_.size(); }
  // Precondition for token_text/token_type: 0 <= id < n_vocab().
  const std::string& token_text(TokenId id) const { return tokens_[id]; }
  TokenType token_type(TokenId id) const { return types_[id]; }
  bool valid_id(TokenId id) const { return id >= 0 && id < n_vocab(); }
  TokenId bos() const { return bos_; }   // -1 when none
  TokenId eos() const { return eos_; }   // -1 when none
  TokenId eot() const { return eot_; }   // -1 when none
  TokenId eom() const { return eom_; }   // -1 when none
  TokenId unk() const { return unk_; }   // -1 when none
  TokenId sep() const { return sep_; }   // -1 when none
  TokenId pad() const { return pad_; }   // -1 when none
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  const std::string& model() const { return model_; }  // "llama", "gpt2", "bert", "none"
  const std::string& pre() const { return pre_; }      // pre-tokenizer name ("" for non-BPE)
  // Control-like (rendered only with render_special): control, unknown and
  // EOG/FIM tokens llama.cpp promotes to control.
  bool is_control(TokenId id) const;
  // End-of-generation: EOS, EOT, EOM and similar control tokens.
  bool is_eog(TokenId id) const;
  const std::vector<TokenId>& eog_ids() const { return eog_ids_; }
  // Finds a token by its exact text (e.g. "<|im_end|>"); -1 when absent.
  TokenId find_token(std::string_view text) const;

 protected:
  // Token attributes (llama.cpp's llama_token_attr bits).
  enum Attr : uint32_t {
    kAttrUnknown = 1u << 1, kAttrUnused = 1u << 2, kAttrNormal = 1u << 3, kAttrControl = 1u << 4,
    kAttrUserDefined = 1u << 5, kAttrByte = 1u << 6, kAttrLstrip = 1u << 8, kAttrRstrip = 1u << 9,
  };
  struct Fragment {
    TokenId token = -1;       // >= 0: a special token
    std::string_view text;    // otherwise raw text (points into the input)
  };
  // Model-specific tokenization of one raw-text fragment. after_special is true
  // for the first fragment and for one that follows a special token.
  virtual void encode_text(std::string_view text, bool after_special, std::vector<TokenId>& out) const = 0;
  // Fills the shared tables from a spec (tokens, types, attributes, special
  // ids with defaults, EOG set, special-token cache).
  Status init_common(const VocabSpec& spec, const std::string& model, TokenId def_bos, TokenId def_eos,
                     TokenId def_unk, TokenId def_sep, TokenId def_pad);
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  std::vector<TokenId> encode_fragments(const std::vector<Fragment>& frags, bool add_special) const;
  TokenId lookup(std::string_view text) const;
  uint32_t attr(TokenId id) const { return attrs_[id]; }

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::vector<uint32_t> attrs_;
  std::vector<TokenId> eog_ids_;
  std::vector<TokenId> special_cache_;  // control/user-defined/unknown ids, longest text first
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Heterogeneous lookup: find(std::string_view) does not allocate.
  std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>> token_to_id_;
  std::string model_, pre_;
  TokenId bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1, sep_ = -1, pad_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_sep_ = false;
  bool add_space_prefix_ = false, clean_spaces_ = false, remove_extra_whitespaces_ = false;
  size_t max_token_len_ = 0;
  // Input bytes that always reach the output (as a byte token, <unk>, or
  // inside a longer token): set by the SentencePiece and BPE tokenizers;
  // min_tokens counts only these.
  bool byte_kept_[256] = {};
  // Bytes that end an rstrip marker / start an lstrip marker (min_tokens).
  bool rstrip_last_byte_[256] = {};
  bool lstrip_first_byte_[256] = {};
};

// Incremental detokenizer for streaming: push() returns only complete UTF-8;
// bytes of an incomplete sequence are held back until the next token completes
// them; bytes that can never become valid are replaced by U+FFFD at once.
// flush() returns what remains (an incomplete tail becomes U+FFFD).
// strip_leading_space: drop the leading space of the first non-empty piece on
// SentencePiece vocabularies (as decode() does); leave it false when the
// stream continues text already shown (a prompt).
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tok, bool render_special, bool strip_leading_space = false)
      : tok_(tok), render_special_(render_special), first_(strip_leading_space && tok.add_space_prefix()) {}
  std::string push(TokenId id);
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool render_special_;
  std::string pending_;
  bool first_ = true;
};

}  // namespace chimera::tokenizer
