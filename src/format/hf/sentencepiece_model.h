// Reading a SentencePiece `tokenizer.model` (a serialized sentencepiece
// ModelProto, protocol-buffers wire format) without protobuf: only the vocabulary
// is extracted — ModelProto field 1, `pieces`, each a SentencePiece message
// {1: piece (string), 2: score (float), 3: type (enum)}. Every other field is
// skipped by its wire type. The parser takes outside bytes: every length and
// varint is bounds-checked, groups (wire types 3/4) and unknown wire types are
// errors, and nothing is allocated beyond the input's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace chimera::format::hf {

// sentencepiece's SentencePiece.Type values.
enum class SpmPieceType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct SpmPiece {
  std::string piece;
  float score = 0;
  SpmPieceType type = SpmPieceType::kNormal;
};

// The pieces in id order. Errors: malformed wire data, a piece without text,
// a type outside 1..6, no pieces at all.
Result<std::vector<SpmPiece>> parse_sentencepiece_model(const uint8_t* data, size_t size);

}  // namespace chimera::format::hf
