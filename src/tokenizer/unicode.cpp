// Unicode helpers: table lookups over the generated data, a strict UTF-8
// codec and GPT-2's byte-level alphabet. Lookups are binary searches over
// sorted tables; the byte-level maps are built once (thread-safe statics).
#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace chimera::tokenizer {

namespace detail {
extern const uint32_t kCategoryRuns[];
extern const size_t kCategoryRuns_size;
extern const uint64_t kNfdBase[];
extern const size_t kNfdBase_size;
extern const uint64_t kLowercase[];
extern const size_t kLowercase_size;
}  // namespace detail

namespace {

uint32_t lookup_map(const uint64_t* table, size_t n, uint32_t cp) {
  const uint64_t key = (uint64_t)cp << 32;
  const uint64_t* end = table + n;
  const uint64_t* it = std::lower_bound(table, end, key);
  if (it != end && (uint32_t)(*it >> 32) == cp) return (uint32_t)(*it & 0xFFFFFFFFu);
  return cp;
}

}  // namespace

UnicodeCategory unicode_category(uint32_t cp) {
  if (cp > 0x10FFFF) return UnicodeCategory::Cn;
  const uint32_t* begin = detail::kCategoryRuns;
  const uint32_t* end = begin + detail::kCategoryRuns_size;
  // Last run starting at or before cp.
  const uint32_t* it = std::upper_bound(begin, end, (cp << 5) | 31u);
  if (it == begin) return UnicodeCategory::Cn;
  return (UnicodeCategory)(*(it - 1) & 31u);
}

bool is_letter(uint32_t cp) {
  auto c = unicode_category(cp);
  return c >= UnicodeCategory::Lu && c <= UnicodeCategory::Lo;
}
bool is_mark(uint32_t cp) {
  auto c = unicode_category(cp);
  return c >= UnicodeCategory::Mn && c <= UnicodeCategory::Me;
}
bool is_number(uint32_t cp) {
  auto c = unicode_category(cp);
  return c >= UnicodeCategory::Nd && c <= UnicodeCategory::No;
}
bool is_punctuation(uint32_t cp) {
  auto c = unicode_category(cp);
  return c >= UnicodeCategory::Pc && c <= UnicodeCategory::Po;
}
bool is_symbol(uint32_t cp) {
  auto c = unicode_category(cp);
  return c >= UnicodeCategory::Sm && c <= UnicodeCategory::So;
}
bool is_other(uint32_t cp) {
  auto c = unicode_category(cp);
  return c == UnicodeCategory::Cn || c >= UnicodeCategory::Cc;
}

bool is_whitespace(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

uint32_t nfd_base(uint32_t cp) {
  if (cp < 0xC0) return cp;
  return lookup_map(detail::kNfdBase, detail::kNfdBase_size, cp);
}

uint32_t to_lower(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  return lookup_map(detail::kLowercase, detail::kLowercase_size, cp);
}

// --- UTF-8 ---

namespace {

// Expected total length for a lead byte (0 = never valid as a lead).
int utf8_lead_len(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Valid range of the second byte given the lead (excludes overlongs, surrogates, > U+10FFFF).
bool utf8_second_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

}  // namespace

bool utf8_next(std::string_view s, size_t& pos, uint32_t& cp) {
  const size_t n = s.size();
  const uint8_t lead = (uint8_t)s[pos];
  const int len = utf8_lead_len(lead);
  if (len == 1) {
    cp = lead;
    pos += 1;
    return true;
  }
  if (len == 0) {
    pos += 1;
    return false;
  }
  // Count the valid continuation bytes (the maximal subpart on failure).
  int got = 1;
  while (got < len && pos + got < n) {
    const uint8_t b = (uint8_t)s[pos + got];
    const bool ok = (got == 1) ? utf8_second_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++got;
  }
  if (got < len) {
    pos += got;
    return false;
  }
  uint32_t v = lead & (0xFF >> (len + 1));
  for (int i = 1; i < len; ++i) v = (v << 6) | ((uint8_t)s[pos + i] & 0x3F);
  cp = v;
  pos += len;
  return true;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
  if (cp < 0x80) {
    out.push_back((char)cp);
  } else if (cp < 0x800) {
    out.push_back((char)(0xC0 | (cp >> 6)));
    out.push_back((char)(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back((char)(0xE0 | (cp >> 12)));
    out.push_back((char)(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back((char)(0x80 | (cp & 0x3F)));
  } else {
    out.push_back((char)(0xF0 | (cp >> 18)));
    out.push_back((char)(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back((char)(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back((char)(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_encode(uint32_t cp) {
  std::string s;
  utf8_append(s, cp);
  return s;
}

std::vector<uint32_t> utf8_to_cpts(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    uint32_t cp = 0;
    out.push_back(utf8_next(s, pos, cp) ? cp : kReplacementChar);
  }
  return out;
}

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    uint32_t cp = 0;
    if (utf8_next(s, pos, cp)) {
      out.append(s.data() + start, pos - start);
    } else {
      utf8_append(out, kReplacementChar);
    }
  }
  return out;
}

bool utf8_is_valid(std::string_view s) {
  size_t pos = 0;
  uint32_t cp = 0;
  while (pos < s.size()) {
    if (!utf8_next(s, pos, cp)) return false;
  }
  return true;
}

size_t utf8_incomplete_tail(std::string_view s) {
  const size_t n = s.size();
  // A lead byte at most 3 bytes from the end, followed only by valid continuations.
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    const uint8_t b = (uint8_t)s[n - k];
    const int len = utf8_lead_len(b);
    if (len >= 2) {
      if ((size_t)len <= k) return 0;  // complete (or over-long run): nothing to hold back
      for (size_t i = 1; i < k; ++i) {
        const uint8_t c = (uint8_t)s[n - k + i];
        const bool ok = (i == 1) ? utf8_second_ok(b, c) : (c >= 0x80 && c <= 0xBF);
        if (!ok) return 0;
      }
      return k;
    }
    if (len == 1 || !(b >= 0x80 && b <= 0xBF)) return 0;  // ASCII or invalid lead
  }
  return 0;
}

// --- byte-level alphabet ---

namespace {

struct ByteLevelTables {
  std::array<std::string, 256> to_text;
  std::array<int16_t, 512> from_cp;  // all mapped code points are < 512
  ByteLevelTables() {
    from_cp.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? (uint32_t)b : (uint32_t)(256 + extra++);
      to_text[b] = utf8_encode(cp);
      from_cp[cp] = (int16_t)b;
    }
  }
};

const ByteLevelTables& byte_level() {
  static const ByteLevelTables t;
  return t;
}

}  // namespace

const std::string& byte_to_bytelevel(uint8_t b) { return byte_level().to_text[b]; }

int bytelevel_to_byte(uint32_t cp) {
  if (cp >= 512) return -1;
  return byte_level().from_cp[cp];
}

std::string bytelevel_encode(std::string_view raw) {
  const auto& t = byte_level();
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) out += t.to_text[c];
  return out;
}

std::string bytelevel_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    uint32_t cp = 0;
    if (utf8_next(text, pos, cp)) {
      const int b = bytelevel_to_byte(cp);
      if (b >= 0) {
        out.push_back((char)b);
        continue;
      }
    }
    out.append(text.data() + start, pos - start);
  }
  return out;
}

}  // namespace chimera::tokenizer
