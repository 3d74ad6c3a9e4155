// Vocabulary tables, per-state token masks and the per-sequence matcher (see
// grammar_constraint.h). The mask walk is the hot path: one transition-table
// lookup per trie node reached, a skip over every subtree whose prefix the
// grammar rejects.
#include "runtime/grammar/grammar_constraint.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "runtime/grammar/gbnf_parser.h"
#include "runtime/grammar/json_schema.h"

namespace chimera::runtime::grammar {

namespace {

size_t words_for(int32_t n) { return ((size_t)std::max(n, 0) + 63) / 64; }

// Sets the bit of every trie token whose bytes the grammar accepts from state
// s0; returns how many. states has room for trie.max_depth() + 1 entries.
size_t walk(const TokenTrie& trie, StateSpace& space, int32_t s0, uint64_t* bits, int32_t* states) {
  const TokenTrie::Node* nodes = trie.nodes().data();
  const size_t n = trie.n_nodes();
  const int32_t* toks = trie.tokens().data();
  const int32_t* table = space.table();
  size_t count = 0;
  states[0] = s0;
  for (size_t i = 0; i < n;) {
    const TokenTrie::Node nd = nodes[i];
    const int32_t from = states[nd.depth - 1];
    int32_t s = table[(size_t)from * 256 + nd.byte];
    if (s == StateSpace::kUnknown) {
      s = space.step(from, nd.byte);
      table = space.table();  // may have grown
    }
    if (s < 0) {
      i = nd.skip;
      continue;
    }
    states[nd.depth] = s;
    const uint32_t end = nodes[i + 1].tok_begin;
    for (uint32_t k = nd.tok_begin; k < end; ++k) {
      const auto id = (uint32_t)toks[k];
      bits[id >> 6] |= uint64_t{1} << (id & 63);
      ++count;
    }
    ++i;
  }
  return count;
}

}  // namespace

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const tokenizer::Tokenizer& tok) {
  std::vector<std::string> bytes((size_t)tok.n_vocab());
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (!tok.is_eog(id) && !tok.is_control(id)) bytes[(size_t)id] = tok.token_to_piece(id, /*render_special=*/false);
  }
  return from_bytes(std::move(bytes), tok.eog_ids());
}

std::shared_ptr<const TokenVocab> TokenVocab::from_bytes(std::vector<std::string> bytes, std::vector<int32_t> eog_ids) {
  auto v = std::shared_ptr<TokenVocab>(new TokenVocab());
  std::sort(eog_ids.begin(), eog_ids.end());
  eog_ids.erase(std::unique(eog_ids.begin(), eog_ids.end()), eog_ids.end());
  std::vector<int32_t> eog;
  for (int32_t id : eog_ids) {
    if (id >= 0 && (size_t)id < bytes.size()) {
      eog.push_back(id);
      bytes[(size_t)id].clear();  // only allowed through the end-of-generation rule
    }
  }
  v->eog_ = std::move(eog);
  v->trie_ = TokenTrie(bytes);
  v->bytes_ = std::move(bytes);
  return v;
}

bool TokenVocab::is_eog(int32_t id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

CompiledGrammar::CompiledGrammar(std::string gbnf, Grammar g, std::shared_ptr<const TokenVocab> vocab,
                                 const GrammarOptions& opts)
    : gbnf_(std::move(gbnf)), vocab_(std::move(vocab)), space_(std::move(g), opts.limits) {
  const size_t mask_bytes = std::max<size_t>(words_for(vocab_->n_vocab()) * 8, 1);
  cache_limit_ = std::max<size_t>(opts.mask_cache_bytes / mask_bytes, 1);
  walk_states_.resize(vocab_->trie().max_depth() + 1);
}

Result<std::shared_ptr<CompiledGrammar>> CompiledGrammar::compile(const GrammarSource& src,
                                                                  std::shared_ptr<const TokenVocab> vocab,
                                                                  const GrammarOptions& opts) {
  if (!vocab) return invalid_argument("grammar: no vocabulary");
  std::string text;
  switch (src.kind) {
    case GrammarSource::Kind::kGbnf: text = src.text; break;
    case GrammarSource::Kind::kJsonObject: text = json_object_gbnf(); break;
    case GrammarSource::Kind::kJsonSchema: {
      CHIMERA_ASSIGN_OR_RETURN(text, json_schema_to_gbnf(src.text));
      break;
    }
  }
  CHIMERA_ASSIGN_OR_RETURN(Grammar g, parse_gbnf(text));
  auto cg = std::shared_ptr<CompiledGrammar>(new CompiledGrammar(std::move(text), std::move(g), std::move(vocab), opts));
  if (!cg->space_.error().is_ok()) return cg->space_.error();
  return cg;
}

void CompiledGrammar::clear_mask_cache() {
  cache_.clear();
  cache_order_.clear();
}

Result<const uint64_t*> CompiledGrammar::token_mask(int32_t state, size_t* count) {
  if (state < 0) return invalid_argument("grammar: no state (the matcher failed earlier)");
  if (auto it = cache_.find(state); it != cache_.end()) {
    ++hits_;
    *count = it->second.count;
    return (const uint64_t*)it->second.bits.data();
  }
  ++misses_;
  Mask m;
  m.bits.assign(words_for(vocab_->n_vocab()), 0);
  m.count = walk(vocab_->trie(), space_, state, m.bits.data(), walk_states_.data());
  if (!space_.error().is_ok()) return space_.error();
  while (cache_.size() >= cache_limit_ && !cache_order_.empty()) {
    cache_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
  cache_order_.push_back(state);
  auto& slot = cache_[state] = std::move(m);
  *count = slot.count;
  return (const uint64_t*)slot.bits.data();
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<CompiledGrammar> g) : g_(std::move(g)), state_(g_->space().start()) {}

void GrammarMatcher::reset() {
  state_ = g_->space().start();
  finished_ = false;
}

Result<size_t> GrammarMatcher::fill_mask(std::vector<uint64_t>& bits, int32_t n_vocab) {
  const size_t nw = words_for(n_vocab);
  bits.assign(nw, 0);
  if (finished_) return size_t{0};
  size_t count = 0;
  CHIMERA_ASSIGN_OR_RETURN(const uint64_t* m, g_->token_mask(state_, &count));
  const TokenVocab& v = g_->vocab();
  const size_t vw = words_for(v.n_vocab());
  std::copy(m, m + std::min(nw, vw), bits.begin());
  if (n_vocab < v.n_vocab()) {  // a model with fewer logits than tokens: drop the rest
    if (n_vocab % 64) bits[nw - 1] &= (uint64_t{1} << (n_vocab % 64)) - 1;
    count = 0;
    for (uint64_t w : bits) count += (size_t)std::popcount(w);
  }
  if (is_complete()) {
    for (int32_t id : v.eog_ids()) {
      if (id < n_vocab) {
        bits[(size_t)id >> 6] |= uint64_t{1} << (id & 63);
        ++count;
      }
    }
  }
  return count;
}

Status GrammarMatcher::mask_logits(float* logits, int32_t n_vocab) {
  std::vector<uint64_t> bits;
  CHIMERA_ASSIGN_OR_RETURN(size_t count, fill_mask(bits, n_vocab));
  (void)count;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (!((bits[(size_t)i >> 6] >> (i & 63)) & 1)) logits[i] = kNegInf;
  }
  return Status::ok();
}

Status GrammarMatcher::accept(int32_t token) {
  const TokenVocab& v = g_->vocab();
  if (finished_) return invalid_argument("grammar: token " + std::to_string(token) + " after the end of generation");
  if (token < 0 || token >= v.n_vocab()) return invalid_argument("grammar: token " + std::to_string(token) + " is out of range");
  if (v.is_eog(token)) {
    if (!is_complete()) return invalid_argument("grammar: end of generation before the grammar is complete");
    finished_ = true;
    return Status::ok();
  }
  const std::string& b = v.bytes(token);
  if (b.empty() || !accept_bytes(b)) {
    if (!g_->space().error().is_ok()) return g_->space().error();
    return invalid_argument("grammar: token " + std::to_string(token) + " is not allowed here");
  }
  return Status::ok();
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (finished_) return bytes.empty();
  int32_t s = state_;
  for (char c : bytes) {
    if (s < 0) break;
    s = g_->space().step(s, (uint8_t)c);
  }
  if (s < 0) return false;
  state_ = s;
  return true;
}

}  // namespace chimera::runtime::grammar
