// Byte-level BPE ("gpt2" vocabularies and tiktoken rank files). The text is
// split by the pre-tokenizer regexes; each piece's bytes start as one symbol
// each (the token of the byte's GPT-2 alphabet character), then the adjacent
// pair with the lowest rank merges, leftmost first on ties, until none is left.
// Pair ranks come from the merge list (GGUF) or, for tiktoken, are the id of
// the concatenated token. Symbols and merges are token ids, so the merge loop
// does no string work; merges whose parts or result are not tokens can never
// apply to ids and are skipped. O(n log n) per piece.
#include <algorithm>
#include <queue>
#include <unordered_map>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace chimera::tokenizer::detail {

namespace {

class BpeTokenizer final : public Tokenizer {
 public:
  // by_rank: tiktoken rule (rank of a pair = id of its concatenation).
  Status init(const VocabSpec& spec, bool by_rank) {
    by_rank_ = by_rank;
    CHIMERA_ASSIGN_OR_RETURN(PreTokenizerSpec pre, pre_tokenizer_spec(spec.pre));
    add_bos_ = pre.add_bos;
    add_eos_ = false;
    add_space_prefix_ = false;
    clean_spaces_ = pre.clean_spaces && !by_rank;  // tiktoken decodes byte-exact
    // tiktoken looks a whole piece up before merging, whatever the pattern.
    ignore_merges_ = pre.ignore_merges || by_rank;
    // llama.cpp's BPE default BOS/EOS id is 11; a rank file has no such default.
    const TokenId def_bos = (pre.no_bos || by_rank) ? -1 : 11, def_eos = by_rank ? -1 : 11;
    CHIMERA_RETURN_IF_ERROR(init_common(spec, "gpt2", def_bos, def_eos, -1, -1, -1));
    pre_ = pre.name;
    if (spec.add_space_prefix) add_space_prefix_ = *spec.add_space_prefix;
    CHIMERA_ASSIGN_OR_RETURN(splitter_, RegexSplitter::create(pre.regexes));

    for (int b = 0; b < 256; ++b) byte_ids_[b] = lookup(byte_to_bytelevel((uint8_t)b));
    for (int b = 0; b < 256; ++b) byte_kept_[b] = unk_ >= 0 || byte_ids_[b] >= 0;

    if (!by_rank_) {
      if (spec.merges.empty()) return invalid_argument("tokenizer.ggml.merges is missing or empty (gpt2 model)");
      merges_.reserve(spec.merges.size() * 2);
      for (size_t i = 0; i < spec.merges.size(); ++i) {
        const std::string& m = spec.merges[i];
        const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
        if (sp == std::string::npos || sp + 1 >= m.size())
          return invalid_argument("tokenizer.ggml.merges[" + std::to_string(i) + "] = '" + m +
                                  "' is not two tokens separated by a space");
        const TokenId l = lookup(std::string_view(m).substr(0, sp));
        const TokenId r = lookup(std::string_view(m).substr(sp + 1));
        if (l < 0 || r < 0) continue;
        const TokenId res = lookup(m.substr(0, sp) + m.substr(sp + 1));
        if (res < 0) continue;
        merges_.emplace(pair_key(l, r), Merge{(int32_t)i, res});  // first (best) rank wins
      }
    }
    return Status::ok();
  }

  std::string token_to_piece(TokenId id, bool render_special) const override {
    if (!valid_id(id)) return {};
    const uint32_t a = attrs_[id];
    if (a & (kAttrControl | kAttrUnknown)) return render_special ? tokens_[id] : std::string();
    if (a & kAttrUserDefined) return tokens_[id];
    if (a & (kAttrNormal | kAttrByte)) return bytelevel_decode(tokens_[id]);
    return {};
  }

 protected:
  void encode_text(std::string_view text, bool, std::vector<TokenId>& out) const override {
    for (const std::string& word : splitter_.split(text)) encode_word(word, out);
  }

 private:
  struct Merge {
    int32_t rank;
    TokenId result;
  };
  static uint64_t pair_key(TokenId l, TokenId r) { return ((uint64_t)(uint32_t)l << 32) | (uint32_t)r; }

  // Rank and result of merging tokens l and r; rank < 0 when they do not merge.
  Merge find_merge(TokenId l, TokenId r) const {
    if (!by_rank_) {
      auto it = merges_.find(pair_key(l, r));
      return it == merges_.end() ? Merge{-1, -1} : it->second;
    }
    auto it = token_to_id_.find(tokens_[l] + tokens_[r]);
    if (it == token_to_id_.end() || !(attrs_[it->second] & (kAttrNormal | kAttrByte))) return {-1, -1};
    return {it->second, it->second};
  }

  struct Symbol {
    TokenId id;
    int prev, next;
  };
  struct Candidate {
    int32_t rank;
    int left, right;
    TokenId lid, rid, result;
    bool operator<(const Candidate& o) const {  // max-heap order: lower rank, then lower left first
      return rank > o.rank || (rank == o.rank && left > o.left);
    }
  };

  void encode_word(const std::string& word, std::vector<TokenId>& out) const {
    if (ignore_merges_) {
      auto it = token_to_id_.find(bytelevel_encode(word));
      if (it != token_to_id_.end()) {
        out.push_back(it->second);
        return;
      }
    }
    std::vector<Symbol> sym;
    sym.reserve(word.size());
    for (size_t i = 0; i < word.size(); ++i) {
      sym.push_back({byte_ids_[(uint8_t)word[i]], (int)i - 1, i + 1 < word.size() ? (int)i + 1 : -1});
    }
    std::priority_queue<Candidate> queue;
    auto try_add = [&](int l, int r) {
      if (l < 0 || r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
      const Merge m = find_merge(sym[l].id, sym[r].id);
      if (m.rank >= 0) queue.push({m.rank, l, r, sym[l].id, sym[r].id, m.result});
    };
    for (int i = 1; i < (int)sym.size(); ++i) try_add(i - 1, i);
    while (!queue.empty()) {
      const Candidate c = queue.top();
      queue.pop();
      Symbol& l = sym[c.left];
      Symbol& r = sym[c.right];
      if (l.id != c.lid || r.id != c.rid || l.next != c.right) continue;  // stale
      l.id = c.result;
      r.id = -2;  // merged away
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = c.left;
      try_add(l.prev, c.left);
      try_add(c.left, l.next);
    }
    for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
      if (sym[i].id >= 0) {
        out.push_back(sym[i].id);
      } else if (unk_ >= 0) {
        out.push_back(unk_);  // a byte with no token (malformed vocabulary)
      }
    }
  }

  bool by_rank_ = false;
  bool ignore_merges_ = false;
  RegexSplitter splitter_;
  std::unordered_map<uint64_t, Merge> merges_;
  TokenId byte_ids_[256];
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_bpe(const VocabSpec& spec) {
  auto t = std::make_unique<BpeTokenizer>();
  CHIMERA_RETURN_IF_ERROR(t->init(spec, /*by_rank=*/false));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

Result<std::unique_ptr<Tokenizer>> make_bpe_by_rank(const VocabSpec& spec) {
  auto t = std::make_unique<BpeTokenizer>();
  CHIMERA_RETURN_IF_ERROR(t->init(spec, /*by_rank=*/true));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace chimera::tokenizer::detail
