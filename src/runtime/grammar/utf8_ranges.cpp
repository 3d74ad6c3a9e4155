// UTF-8 range splitting (see utf8_ranges.h).
#include "runtime/grammar/utf8_ranges.h"

#include <algorithm>

namespace chimera::runtime::grammar {

namespace {

using Range = std::pair<uint32_t, uint32_t>;

int encode(uint32_t cp, uint8_t* b) {
  if (cp < 0x80) {
    b[0] = (uint8_t)cp;
    return 1;
  }
  if (cp < 0x800) {
    b[0] = (uint8_t)(0xC0 | (cp >> 6));
    b[1] = (uint8_t)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    b[0] = (uint8_t)(0xE0 | (cp >> 12));
    b[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    b[2] = (uint8_t)(0x80 | (cp & 0x3F));
    return 3;
  }
  b[0] = (uint8_t)(0xF0 | (cp >> 18));
  b[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
  b[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
  b[3] = (uint8_t)(0x80 | (cp & 0x3F));
  return 4;
}

// [lo, hi] contains no surrogates.
void split(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out) {
  for (uint32_t m : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= m && hi > m) {
      split(lo, m, out);
      split(m + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({{(uint8_t)lo, (uint8_t)hi}});
    return;
  }
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  const int n = encode(lo, a);
  encode(hi, b);
  ByteRangeSeq seq(n);
  for (int i = 0; i < n; ++i) seq[i] = {a[i], b[i]};
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<Range> normalize_ranges(std::vector<Range> ranges) {
  std::vector<Range> in;
  for (auto [lo, hi] : ranges) {
    if (lo > hi || lo > kMaxCodePoint) continue;
    hi = std::min(hi, kMaxCodePoint);
    // Drop surrogates.
    if (hi < 0xD800 || lo > 0xDFFF) {
      in.push_back({lo, hi});
    } else {
      if (lo < 0xD800) in.push_back({lo, 0xD7FF});
      if (hi > 0xDFFF) in.push_back({0xE000, hi});
    }
  }
  std::sort(in.begin(), in.end());
  std::vector<Range> out;
  for (const Range& r : in) {
    if (!out.empty() && r.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<Range> complement_ranges(const std::vector<Range>& ranges) {
  std::vector<Range> norm = normalize_ranges(ranges), out;
  uint32_t next = 0;
  for (const Range& r : norm) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalize_ranges(out);
}

std::vector<ByteRangeSeq> utf8_sequences(const std::vector<Range>& ranges) {
  std::vector<ByteRangeSeq> out;
  for (const Range& r : normalize_ranges(ranges)) split(r.first, r.second, out);
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  uint8_t b[4];
  const int n = encode(cp, b);
  out.append((const char*)b, (size_t)n);
}

}  // namespace chimera::runtime::grammar
