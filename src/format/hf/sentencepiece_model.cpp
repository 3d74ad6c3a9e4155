// Protocol-buffers wire format, as much as a ModelProto's vocabulary needs.
// A field is a varint key (field number << 3 | wire type) followed by its value:
// 0 varint, 1 eight bytes, 2 varint length + bytes, 5 four bytes.
#include "format/hf/sentencepiece_model.h"

#include <cstring>

namespace chimera::format::hf {
namespace {

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  bool done() const { return p_ == end_; }

  bool varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const uint8_t b = *p_++;
      *v |= (uint64_t)(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;  // more than 10 bytes
  }
  bool bytes(size_t n, const uint8_t** out) {
    if ((size_t)(end_ - p_) < n) return false;
    *out = p_;
    p_ += n;
    return true;
  }
  // Skips one value of `wire` type; false on malformed data or a group.
  bool skip(uint32_t wire) {
    uint64_t v;
    const uint8_t* ignored;
    switch (wire) {
      case 0: return varint(&v);
      case 1: return bytes(8, &ignored);
      case 2: return varint(&v) && v <= (uint64_t)(end_ - p_) && bytes((size_t)v, &ignored);
      case 5: return bytes(4, &ignored);
      default: return false;  // 3/4: deprecated groups; 6/7: undefined
    }
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

Status malformed(const std::string& what) {
  return invalid_argument("tokenizer.model: malformed SentencePiece model (" + what + ")");
}

Result<SpmPiece> parse_piece(const uint8_t* p, size_t n, size_t index) {
  Reader r(p, n);
  SpmPiece out;
  bool has_text = false;
  const std::string where = "piece " + std::to_string(index);
  while (!r.done()) {
    uint64_t key;
    if (!r.varint(&key)) return malformed(where + ": bad field key");
    const uint64_t field = key >> 3;
    const uint32_t wire = (uint32_t)(key & 7);
    if (field == 1 && wire == 2) {
      uint64_t len;
      const uint8_t* s;
      if (!r.varint(&len) || len > n || !r.bytes((size_t)len, &s)) return malformed(where + ": bad text length");
      out.piece.assign((const char*)s, (size_t)len);
      has_text = true;
    } else if (field == 2 && wire == 5) {
      const uint8_t* s;
      if (!r.bytes(4, &s)) return malformed(where + ": truncated score");
      uint32_t bits = (uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16 | (uint32_t)s[3] << 24;
      std::memcpy(&out.score, &bits, 4);
    } else if (field == 3 && wire == 0) {
      uint64_t t;
      if (!r.varint(&t)) return malformed(where + ": bad type");
      if (t < 1 || t > 6) return malformed(where + ": unknown piece type " + std::to_string(t));
      out.type = (SpmPieceType)t;
    } else if (!r.skip(wire)) {
      return malformed(where + ": bad field " + std::to_string(field));
    }
  }
  if (!has_text) return malformed(where + " has no text");
  return out;
}

}  // namespace

Result<std::vector<SpmPiece>> parse_sentencepiece_model(const uint8_t* data, size_t size) {
  Reader r(data, size);
  std::vector<SpmPiece> pieces;
  while (!r.done()) {
    uint64_t key;
    if (!r.varint(&key)) return malformed("bad field key");
    const uint64_t field = key >> 3;
    const uint32_t wire = (uint32_t)(key & 7);
    if (field == 1 && wire == 2) {
      uint64_t len;
      const uint8_t* p;
      if (!r.varint(&len) || len > size || !r.bytes((size_t)len, &p)) return malformed("bad piece length");
      CHIMERA_ASSIGN_OR_RETURN(SpmPiece piece, parse_piece(p, (size_t)len, pieces.size()));
      pieces.push_back(std::move(piece));
    } else if (!r.skip(wire)) {
      return malformed("bad field " + std::to_string(field));
    }
  }
  if (pieces.empty()) return invalid_argument("tokenizer.model: no vocabulary pieces");
  return pieces;
}

}  // namespace chimera::format::hf
