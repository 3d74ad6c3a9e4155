// Code points -> UTF-8 byte sequences, so a character class over code points
// (GBNF `[^"\\]`, `.`, `[α-ω]`) can be matched one byte at a time.
// A set of code point ranges becomes a list of byte-range sequences whose
// union is exactly the UTF-8 encodings of those code points (surrogates
// D800-DFFF are never encoded: they are not characters). The split is the
// classic one (as in RE2 and Rust's regex-syntax): first by encoded length,
// then so that every continuation byte spans a whole aligned block.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace chimera::runtime::grammar {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct ByteRange {
  uint8_t lo = 0, hi = 0;
};
using ByteRangeSeq = std::vector<ByteRange>;  // 1 to 4 ranges, one per encoded byte

// Sorted, merged, surrogate-free copy of the ranges (inclusive; hi <= 0x10FFFF).
std::vector<std::pair<uint32_t, uint32_t>> normalize_ranges(std::vector<std::pair<uint32_t, uint32_t>> ranges);
// All code points not in `ranges` (ranges need not be normalized).
std::vector<std::pair<uint32_t, uint32_t>> complement_ranges(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);
// UTF-8 byte-range sequences covering exactly the code points in `ranges`.
std::vector<ByteRangeSeq> utf8_sequences(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);
// Appends the UTF-8 encoding of cp (cp <= 0x10FFFF).
void append_utf8(std::string& out, uint32_t cp);

}  // namespace chimera::runtime::grammar
