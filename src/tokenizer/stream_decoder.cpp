// StreamDecoder: turns a stream of token pieces into valid UTF-8 text.
// Invariant: everything push()/flush() return is valid UTF-8; pending_ only
// ever holds an incomplete-but-valid prefix of a multi-byte sequence (<= 3 bytes).
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace chimera::tokenizer {

std::string StreamDecoder::push(TokenId id) {
  std::string piece = tok_.token_to_piece(id, render_special_);
  if (first_ && !piece.empty()) {
    if (piece[0] == ' ') piece.erase(0, 1);
    first_ = false;
  }
  pending_ += piece;
  const size_t tail = utf8_incomplete_tail(pending_);
  std::string out = utf8_sanitize(std::string_view(pending_).substr(0, pending_.size() - tail));
  pending_.erase(0, pending_.size() - tail);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8_sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace chimera::tokenizer
