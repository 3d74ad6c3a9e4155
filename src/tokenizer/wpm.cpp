// WordPiece ("bert" vocabularies as converted by llama.cpp: word-initial
// pieces carry a U+2581 prefix instead of continuation pieces carrying "##").
// Normalization follows BERT's BasicTokenizer (uncased): drop NUL, U+FFFD and
// control characters, whitespace separates words, accents are stripped (NFD
// base letter, combining marks dropped), lowercase, and punctuation, ASCII
// symbols and CJK ideographs become one-character words. Each word is matched
// greedily longest-first from the left; a word with an unmatchable position or
// longer than 100 characters becomes [UNK].
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace chimera::tokenizer::detail {

namespace {

const char kSpaceMark[] = "\xe2\x96\x81";  // U+2581
constexpr size_t kMaxWordChars = 100;      // BERT's max_input_chars_per_word

bool is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

class WpmTokenizer final : public Tokenizer {
 public:
  Status init(const VocabSpec& spec) {
    add_bos_ = true;
    add_eos_ = false;
    add_sep_ = true;
    CHIMERA_RETURN_IF_ERROR(init_common(spec, "bert", 101, -1, 100, 102, 0));
    clean_spaces_ = true;
    return Status::ok();
  }

  std::string token_to_piece(TokenId id, bool render_special) const override {
    if (!valid_id(id)) return {};
    const uint32_t a = attrs_[id];
    const std::string& text = tokens_[id];
    if (a & (kAttrControl | kAttrUnknown)) return render_special ? text : std::string();
    if (a & kAttrUserDefined) return text;
    if (a & kAttrNormal) {
      if (text.compare(0, 3, kSpaceMark) == 0) {
        std::string piece = " ";  // (not " " + substr: GCC 12 warns falsely on that)
        piece.append(text, 3);
        return piece;
      }
      return text;
    }
    return {};
  }

  std::string decode(const std::vector<TokenId>& ids, bool render_special) const override {
    // Word-initial pieces start with a space; drop the first one.
    std::string out;
    for (TokenId id : ids) out += token_to_piece(id, render_special);
    if (!out.empty() && out[0] == ' ') out.erase(0, 1);
    return clean_up_spaces(out);
  }

 protected:
  void encode_text(std::string_view text, bool, std::vector<TokenId>& out) const override {
    for (const std::string& word : split_words(text)) encode_word(word, out);
  }

 private:
  static std::vector<std::string> split_words(std::string_view text) {
    std::vector<std::string> words(1);
    for (uint32_t cp : utf8_to_cpts(text)) {
      if (is_whitespace(cp)) {
        if (!words.back().empty()) words.emplace_back();
        continue;
      }
      if (cp == 0 || cp == kReplacementChar || is_other(cp)) continue;
      cp = nfd_base(cp);
      if (unicode_category(cp) == UnicodeCategory::Mn) continue;  // stripped accent
      cp = to_lower(cp);
      if (is_punctuation(cp) || (cp < 0x7F && is_symbol(cp)) || is_cjk(cp)) {
        if (!words.back().empty()) words.emplace_back();
        utf8_append(words.back(), cp);
        words.emplace_back();
      } else {
        utf8_append(words.back(), cp);
      }
    }
    if (words.back().empty()) words.pop_back();
    return words;
  }

  void encode_word(const std::string& word, std::vector<TokenId>& out) const {
    size_t n_chars = 0;
    for (unsigned char c : word) n_chars += (c & 0xC0) != 0x80;
    if (n_chars > kMaxWordChars) {
      if (unk_ >= 0) out.push_back(unk_);
      return;
    }
    const std::string w = kSpaceMark + word;
    const size_t start_size = out.size();
    for (size_t i = 0; i < w.size();) {
      bool found = false;
      for (size_t j = std::min(w.size(), i + max_token_len_); j > i; --j) {
        // Only cut at character boundaries.
        if (j < w.size() && ((unsigned char)w[j] & 0xC0) == 0x80) continue;
        auto it = token_to_id_.find(std::string_view(w).substr(i, j - i));
        if (it != token_to_id_.end()) {
          out.push_back(it->second);
          i = j;
          found = true;
          break;
        }
      }
      if (!found) {
        out.resize(start_size);
        if (unk_ >= 0) out.push_back(unk_);
        return;
      }
    }
  }
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_wpm(const VocabSpec& spec) {
  auto t = std::make_unique<WpmTokenizer>();
  CHIMERA_RETURN_IF_ERROR(t->init(spec));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace chimera::tokenizer::detail
