// Unicode helpers for the tokenizers: strict UTF-8 decoding/encoding, general
// categories, whitespace, the NFD base letter and simple lowercase, and GPT-2's
// byte-level alphabet (every byte <-> one printable code point).
// Invariants: nothing here throws or reads out of bounds on malformed input;
// invalid UTF-8 is reported (utf8_next returns false) or replaced by U+FFFD,
// never passed through. Tables come from unicode_tables_*.cpp (generated).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chimera::tokenizer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Unicode general categories, in the order of the generated table.
enum class UnicodeCategory : uint8_t {
  Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps,
  Pe, Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co,
};

UnicodeCategory unicode_category(uint32_t cp);
bool is_letter(uint32_t cp);       // L*
bool is_number(uint32_t cp);       // N*
bool is_punctuation(uint32_t cp);  // P*
bool is_symbol(uint32_t cp);       // S*
bool is_mark(uint32_t cp);         // M*
bool is_other(uint32_t cp);        // C* (control, format, unassigned, private use, surrogate)
bool is_whitespace(uint32_t cp);   // the White_Space property
// First code point of the canonical decomposition when the rest are combining
// marks (é -> e); the code point itself otherwise.
uint32_t nfd_base(uint32_t cp);
// First code point of the lowercase form (simple mapping); the code point itself otherwise.
uint32_t to_lower(uint32_t cp);

// --- UTF-8 ---
// Decodes one code point at s[pos]. On success stores it in cp, advances pos and
// returns true. On malformed input (bad lead, truncated, overlong, surrogate,
// > U+10FFFF) advances pos past the maximal invalid subpart (>= 1 byte) and
// returns false.
bool utf8_next(std::string_view s, size_t& pos, uint32_t& cp);
void utf8_append(std::string& out, uint32_t cp);
std::string utf8_encode(uint32_t cp);
// Code points of s; each invalid subpart becomes U+FFFD.
std::vector<uint32_t> utf8_to_cpts(std::string_view s);
// s with each invalid subpart replaced by U+FFFD.
std::string utf8_sanitize(std::string_view s);
bool utf8_is_valid(std::string_view s);
// Number of trailing bytes of s that form an incomplete but so far valid
// multi-byte sequence (0..3): more bytes could still complete it.
size_t utf8_incomplete_tail(std::string_view s);

// --- GPT-2 byte-level alphabet ---
// UTF-8 text of the code point that stands for byte b.
const std::string& byte_to_bytelevel(uint8_t b);
// Byte that code point cp stands for, or -1 if cp is not in the alphabet.
int bytelevel_to_byte(uint32_t cp);
// Byte-level encoding of raw bytes (each byte -> its code point's UTF-8).
std::string bytelevel_encode(std::string_view raw);
// Inverse of bytelevel_encode; code points outside the alphabet are kept as
// their UTF-8 (so text that was never byte-level encoded survives).
std::string bytelevel_decode(std::string_view text);

}  // namespace chimera::tokenizer
