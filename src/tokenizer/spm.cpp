// SentencePiece-style BPE ("llama" vocabularies), as llama.cpp's SPM
// tokenizer: spaces become U+2581, a space is prepended to text that starts
// the input or follows a special token (add_space_prefix), then adjacent
// symbols (initially UTF-8 characters) merge greedily by the score of the
// merged token (highest first, leftmost on ties). A symbol that is not a token
// falls back to byte tokens <0xXX> (or the raw one-byte token), else <unk>.
// Merges only form ordinary tokens: control/unknown/byte/unused pieces are
// never produced from text (SentencePiece's rule). O(n log n) per fragment.
#include <queue>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace chimera::tokenizer::detail {

namespace {

const char kSpaceMark[] = "\xe2\x96\x81";  // U+2581

class SpmTokenizer final : public Tokenizer {
 public:
  Status init(const VocabSpec& spec) {
    add_bos_ = true;
    add_eos_ = false;
    add_space_prefix_ = true;
    CHIMERA_RETURN_IF_ERROR(init_common(spec, "llama", 1, 2, 0, -1, -1));
    if (spec.add_space_prefix) add_space_prefix_ = *spec.add_space_prefix;
    if (spec.remove_extra_whitespaces) remove_extra_whitespaces_ = *spec.remove_extra_whitespaces;
    clean_spaces_ = false;
    scores_ = spec.scores;
    if (scores_.empty()) scores_.assign(tokens_.size(), 0.0f);
    static const char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const char name[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
      TokenId id = lookup(name);
      if (id < 0) id = lookup(std::string(1, (char)b));
      byte_ids_[b] = id;
    }
    for (int b = 0; b < 256; ++b) byte_kept_[b] = unk_ >= 0 || byte_ids_[b] >= 0;
    // A space becomes U+2581 (bytes E2 96 81) before lookup.
    byte_kept_[' '] = unk_ >= 0 || lookup(kSpaceMark) >= 0 ||
                      (byte_ids_[0xE2] >= 0 && byte_ids_[0x96] >= 0 && byte_ids_[0x81] >= 0);
    return Status::ok();
  }

  std::string token_to_piece(TokenId id, bool render_special) const override {
    if (!valid_id(id)) return {};
    const uint32_t a = attrs_[id];
    const std::string& text = tokens_[id];
    if (a & (kAttrControl | kAttrUnknown)) return render_special ? text : std::string();
    if (a & kAttrUserDefined) return text;
    if (a & kAttrNormal) {
      std::string out;
      out.reserve(text.size());
      for (size_t i = 0; i < text.size();) {
        if (text.compare(i, 3, kSpaceMark) == 0) {
          out.push_back(' ');
          i += 3;
        } else {
          out.push_back(text[i++]);
        }
      }
      return out;
    }
    if (a & kAttrByte) {
      // "<0xAB>" -> the byte 0xAB.
      if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>') {
        auto hex = [](char c) -> int {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          if (c >= 'a' && c <= 'f') return c - 'a' + 10;
          return -1;
        };
        const int hi = hex(text[3]), lo = hex(text[4]);
        if (hi >= 0 && lo >= 0) return std::string(1, (char)(hi * 16 + lo));
      }
      return text;
    }
    return {};  // unused / undefined
  }

 protected:
  void encode_text(std::string_view raw, bool after_special, std::vector<TokenId>& out) const override {
    std::string text;
    text.reserve(raw.size() * 3 / 2 + 4);
    if (add_space_prefix_ && after_special) text += kSpaceMark;
    for (char c : raw) {
      if (c == ' ') {
        text += kSpaceMark;
      } else {
        text.push_back(c);
      }
    }
    tokenize(text, out);
  }

 private:
  struct Symbol {
    int prev, next;
    size_t begin, len;  // bytes of the text
  };
  struct Bigram {
    float score;
    int left, right;
    size_t len;
    bool operator<(const Bigram& o) const {  // max-heap: higher score, then lower left index
      return score < o.score || (score == o.score && left > o.left);
    }
  };

  bool mergeable(TokenId id) const {
    return (attrs_[id] & (kAttrControl | kAttrUnknown | kAttrByte | kAttrUnused)) == 0;
  }

  void tokenize(const std::string& text, std::vector<TokenId>& out) const {
    std::vector<Symbol> sym;
    sym.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      // UTF-8 characters by their lead byte, like llama.cpp (a stray byte is a symbol of its own).
      const uint8_t b = (uint8_t)text[pos];
      size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
      len = std::min(len, text.size() - pos);
      const int idx = (int)sym.size();
      sym.push_back({idx - 1, -1, pos, len});
      if (idx > 0) sym[idx - 1].next = idx;
      pos += len;
    }
    std::priority_queue<Bigram> queue;
    auto try_add = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      const size_t len = sym[l].len + sym[r].len;
      auto it = token_to_id_.find(std::string_view(text).substr(sym[l].begin, len));
      if (it == token_to_id_.end() || !mergeable(it->second)) return;
      queue.push({scores_[it->second], l, r, len});
    };
    for (int i = 1; i < (int)sym.size(); ++i) try_add(i - 1, i);
    while (!queue.empty()) {
      const Bigram bg = queue.top();
      queue.pop();
      Symbol& l = sym[bg.left];
      Symbol& r = sym[bg.right];
      // Stale entry: one side was merged away or grew since it was queued.
      if (l.len == 0 || r.len == 0 || l.next != bg.right || l.len + r.len != bg.len) continue;
      l.len += r.len;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = bg.left;
      try_add(l.prev, bg.left);
      try_add(bg.left, l.next);
    }
    for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
      const Symbol& s = sym[i];
      auto it = token_to_id_.find(std::string_view(text).substr(s.begin, s.len));
      if (it != token_to_id_.end()) {
        out.push_back(it->second);
        continue;
      }
      for (size_t k = 0; k < s.len; ++k) {
        const TokenId id = byte_ids_[(uint8_t)text[s.begin + k]];
        if (id >= 0) {
          out.push_back(id);
        } else if (unk_ >= 0) {
          out.push_back(unk_);
          break;  // one <unk> per unknown character
        }
      }
    }
  }

  std::vector<float> scores_;
  TokenId byte_ids_[256];
};

class NoneTokenizer final : public Tokenizer {
 public:
  Status init(const VocabSpec& spec) {
    model_ = "none";
    if (spec.tokens.empty()) return Status::ok();
    return init_common(spec, "none", -1, -1, -1, -1, -1);
  }
  std::string token_to_piece(TokenId id, bool) const override {
    return valid_id(id) ? tokens_[id] : std::string();
  }

 protected:
  void encode_text(std::string_view, bool, std::vector<TokenId>&) const override {}
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_spm(const VocabSpec& spec) {
  auto t = std::make_unique<SpmTokenizer>();
  CHIMERA_RETURN_IF_ERROR(t->init(spec));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

Result<std::unique_ptr<Tokenizer>> make_none(const VocabSpec& spec) {
  auto t = std::make_unique<NoneTokenizer>();
  CHIMERA_RETURN_IF_ERROR(t->init(spec));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace chimera::tokenizer::detail
