// Grammar-constrained sampling: the API the CLI and the server use.
//
//   auto vocab = TokenVocab::from_tokenizer(model.tokenizer());   // once per model
//   auto g = CompiledGrammar::compile({GrammarSource::Kind::kJsonSchema, schema_text}, vocab);  // once per request
//   GrammarMatcher m(*g);                                          // one per sequence (copyable: fork for n > 1)
//   loop: m.fill_mask(bits, n_vocab) -> sampler.sample(logits, n_vocab, bits.data()) -> m.accept(token)
//         (fill_mask returns 0 allowed tokens once the grammar is complete and
//          nothing may follow and the vocabulary has no end-of-generation token)
//   m.is_complete(): the text so far is a whole match (end-of-generation tokens are allowed).
//
// Masking: the vocabulary's token bytes form a trie (token_trie.h) walked
// against the matcher state, pruning every token below a rejected prefix;
// the mask of each state is cached (states recur: inside a string, a number,
// between values), so a repeated state costs a copy of n_vocab/8 bytes.
// Tokens are matched on their bytes as the tokenizer produces them
// (SentencePiece "▁" = space, byte-fallback tokens = their byte, byte-level
// BPE and tiktoken = their bytes). Control tokens are never allowed;
// end-of-generation tokens only when the grammar is complete.
//
// Thread-safety: TokenVocab is immutable and may be shared by threads. A
// CompiledGrammar and its matchers hold lazily filled caches and must be used
// from one thread at a time (the server's engine thread).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "runtime/grammar/stack_states.h"
#include "runtime/grammar/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace chimera::runtime::grammar {

class TokenVocab {
 public:
  static std::shared_ptr<const TokenVocab> from_tokenizer(const tokenizer::Tokenizer& tok);
  // bytes[id] = the token's bytes ("" = never allowed); eog_ids: end-of-generation tokens.
  static std::shared_ptr<const TokenVocab> from_bytes(std::vector<std::string> bytes, std::vector<int32_t> eog_ids);

  int32_t n_vocab() const { return (int32_t)bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_[(size_t)id]; }
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  const TokenTrie& trie() const { return trie_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> eog_;  // sorted
  TokenTrie trie_;
};

struct GrammarSource {
  enum class Kind { kGbnf, kJsonSchema, kJsonObject };
  Kind kind = Kind::kGbnf;
  std::string text;  // GBNF text, or a JSON Schema as JSON text; unused for kJsonObject
};

struct GrammarOptions {
  StateLimits limits;
  size_t mask_cache_bytes = 64u << 20;  // cached per-state token masks
};

class CompiledGrammar {
 public:
  // Errors: GBNF parse errors (line, column), unsupported schema keywords
  // (named), grammars that are left-recursive or can never finish.
  static Result<std::shared_ptr<CompiledGrammar>> compile(const GrammarSource& src,
                                                          std::shared_ptr<const TokenVocab> vocab,
                                                          const GrammarOptions& opts = {});
  const std::string& gbnf() const { return gbnf_; }  // the GBNF text compiled (schemas: generated)
  const TokenVocab& vocab() const { return *vocab_; }
  StateSpace& space() { return space_; }
  // The allowed-token bits of a state (vocab n_vocab bits, EOG excluded);
  // the pointer is valid until the next call. *count = tokens allowed.
  Result<const uint64_t*> token_mask(int32_t state, size_t* count);
  void clear_mask_cache();
  size_t mask_cache_hits() const { return hits_; }
  size_t mask_cache_misses() const { return misses_; }

 private:
  CompiledGrammar(std::string gbnf, Grammar g, std::shared_ptr<const TokenVocab> vocab, const GrammarOptions& opts);
  struct Mask {
    std::vector<uint64_t> bits;
    size_t count = 0;
  };
  std::string gbnf_;
  std::shared_ptr<const TokenVocab> vocab_;
  StateSpace space_;
  size_t cache_limit_;  // entries
  std::unordered_map<int32_t, Mask> cache_;
  std::deque<int32_t> cache_order_;  // insertion order, for eviction
  Mask scratch_;
  std::vector<int32_t> walk_states_;
  size_t hits_ = 0, misses_ = 0;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<CompiledGrammar> g);
  // bits gets ceil(n_vocab / 64) words; bit id is set when token id may come
  // next (ids the vocabulary does not have stay clear). Returns how many.
  Result<size_t> fill_mask(std::vector<uint64_t>& bits, int32_t n_vocab);
  // Sets the logit of every token that may not come next to -inf.
  Status mask_logits(float* logits, int32_t n_vocab);
  // Advances over a sampled token; an error (and no change) when the grammar
  // does not allow it. An end-of-generation token finishes the matcher.
  Status accept(int32_t token);
  // Byte-level matching (tests, tools): false and no change when rejected.
  bool accept_bytes(std::string_view bytes);
  bool is_complete() const { return g_->space().accepting(state_); }
  bool can_continue() const { return !finished_ && g_->space().can_continue(state_); }
  bool finished() const { return finished_; }
  int32_t vocab_size() const { return g_->vocab().n_vocab(); }
  void reset();

 private:
  std::shared_ptr<CompiledGrammar> g_;
  int32_t state_;
  bool finished_ = false;
};

}  // namespace chimera::runtime::grammar
