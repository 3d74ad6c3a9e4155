// GBNF for an integer interval (JSON Schema minimum/maximum on integers):
// split by sign and by number of digits; within one digit count, the classic
// digit-by-digit range expansion (as regex range generators do):
// [lo, hi] = lo0 [lo', 9..9] | [lo0+1 - hi0-1] [0-9]{n-1} | hi0 [0..0, hi'].
// No leading zeros, no "-0".
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "runtime/grammar/json_schema.h"

namespace chimera::runtime::grammar {

namespace {

constexpr int kMaxDigits = 18;  // unbounded sides stop at 18 digits (< 2^63)

bool all_of(const std::string& s, size_t from, char c) {
  for (size_t i = from; i < s.size(); ++i)
    if (s[i] != c) return false;
  return true;
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

std::string join_alts(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// `parts` joined by single spaces (built with append: GCC 12's -Wrestrict
// misfires on chains of std::string operator+).
std::string cat(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

std::string quoted_digit(char d) {
  std::string q = "\"";
  q += d;
  q += '"';
  return q;
}

std::string digit_class(char first, char last) {
  std::string c = "[";
  c += first;
  if (last != first) {
    c += '-';
    c += last;
  }
  c += ']';
  return c;
}

// Digit strings of equal length n >= 1, lo <= hi (as numbers).
std::string same_len(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  const size_t n = lo.size();
  if (lo == hi) {
    std::string q = "\"";
    q += lo;
    q += '"';
    return q;
  }
  if (lo[0] == hi[0]) return cat({quoted_digit(lo[0]), same_len(lo.substr(1), hi.substr(1))});
  std::vector<std::string> alts;
  char first = lo[0], last = hi[0];
  if (!all_of(lo, 1, '0')) {
    alts.push_back(cat({quoted_digit(lo[0]), same_len(lo.substr(1), std::string(n - 1, '9'))}));
    ++first;
  }
  std::string tail_alt;
  if (!all_of(hi, 1, '9')) {
    tail_alt = cat({quoted_digit(hi[0]), same_len(std::string(n - 1, '0'), hi.substr(1))});
    --last;
  }
  if (first <= last) alts.push_back(cat({digit_class(first, last), any_digits(n - 1)}));
  if (!tail_alt.empty()) alts.push_back(tail_alt);
  return join_alts(alts);
}

uint64_t pow10(int k) {
  uint64_t v = 1;
  for (int i = 0; i < k; ++i) v *= 10;
  return v;
}

// Non-negative [a, b]; b_inf: no upper bound (up to kMaxDigits digits).
std::string nonneg(uint64_t a, bool b_inf, uint64_t b) {
  const std::string as = std::to_string(a);
  const int la = (int)as.size();
  const int lb = b_inf ? kMaxDigits : (int)std::to_string(b).size();
  std::vector<std::string> alts;
  for (int len = la; len <= lb; ++len) {
    const uint64_t lo = len == la ? a : pow10(len - 1);
    const uint64_t hi = (len == lb && !b_inf) ? b : pow10(len) - 1;
    if (b_inf && len > la) {  // every number of this length and longer
      alts.push_back("[1-9] [0-9]{" + std::to_string(len - 1) + "," + std::to_string(kMaxDigits - 1) + "}");
      break;
    }
    alts.push_back(same_len(std::to_string(lo), std::to_string(hi)));
  }
  return join_alts(alts);
}

}  // namespace

std::string integer_range_gbnf(bool has_lo, int64_t lo, bool has_hi, int64_t hi) {
  std::vector<std::string> alts;
  // Negative part: values in [lo, min(hi, -1)], written "-" |v|.
  if (!has_lo || lo < 0) {
    const uint64_t abs_min = has_hi && hi < 0 ? (uint64_t)(-(hi + 1)) + 1 : 1;
    const bool inf = !has_lo;
    const uint64_t abs_max = inf ? 0 : (uint64_t)(-(lo + 1)) + 1;
    alts.push_back("\"-\" " + nonneg(abs_min, inf, abs_max));
  }
  // Non-negative part: [max(lo, 0), hi].
  if (!has_hi || hi >= 0) {
    const uint64_t a = has_lo && lo > 0 ? (uint64_t)lo : 0;
    alts.push_back(nonneg(a, !has_hi, has_hi ? (uint64_t)hi : 0));
  }
  return join_alts(alts);
}

}  // namespace chimera::runtime::grammar
