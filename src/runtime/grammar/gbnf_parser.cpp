// GBNF parser and lowering to the byte grammar (see gbnf_parser.h).
// Structure follows llama.cpp's grammar parser: a rule's alternatives are
// sequences; a group becomes a generated rule; repetitions are rewritten into
// right-recursive generated rules (x* -> R ::= x R | ""), which the matcher's
// tail-call handling keeps at a constant stack height; x{m,n} is m copies of
// x followed by n-m nested optionals. A multi-byte character class becomes a
// generated rule whose alternatives are UTF-8 byte-range sequences.
// Parse errors are thrown as ParseError inside this file only and turned
// into a Status with line and column at the boundary.
#include "runtime/grammar/gbnf_parser.h"

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/grammar/utf8_ranges.h"

namespace chimera::runtime::grammar {

namespace {

struct ParseError {
  size_t pos;
  std::string msg;
};

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view src) : s_(src) {}

  Grammar parse() {
    size_t pos = skip_space(0, true);
    if (pos >= s_.size()) throw ParseError{0, "grammar is empty (it needs at least a 'root' rule)"};
    while (pos < s_.size()) pos = parse_rule(pos);
    // The earliest reference to an undefined rule is reported.
    size_t bad_pos = std::string::npos;
    uint32_t bad = 0;
    for (const auto& [id, where] : first_ref_) {
      if (!b_.has_alts(id) && where < bad_pos) bad_pos = where, bad = id;
    }
    if (bad_pos != std::string::npos) throw ParseError{bad_pos, "undefined rule '" + b_.name(bad) + "'"};
    if (!defined_.count("root")) throw ParseError{s_.size(), "grammar has no 'root' rule"};
    Grammar g = b_.take(b_.rule("root"));
    return g;
  }

 private:
  char at(size_t pos) const { return pos < s_.size() ? s_[pos] : '\0'; }

  size_t skip_space(size_t pos, bool newline_ok) const {
    while (pos < s_.size()) {
      const char c = s_[pos];
      if (c == ' ' || c == '\t') {
        ++pos;
      } else if (c == '#') {
        while (pos < s_.size() && s_[pos] != '\n' && s_[pos] != '\r') ++pos;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++pos;
      } else {
        break;
      }
    }
    return pos;
  }

  size_t parse_name(size_t pos) const {
    size_t end = pos;
    while (end < s_.size() && is_word_char(s_[end])) ++end;
    if (end == pos) throw ParseError{pos, "expecting a rule name"};
    return end;
  }

  size_t parse_rule(size_t pos) {
    const size_t name_end = parse_name(pos);
    const std::string name(s_.substr(pos, name_end - pos));
    size_t p = skip_space(name_end, false);
    if (s_.compare(p, 3, "::=") != 0) throw ParseError{p, "expecting '::=' after rule name '" + name + "'"};
    if (!defined_.insert({name, pos}).second) throw ParseError{pos, "rule '" + name + "' is defined twice"};
    const uint32_t id = b_.rule(name);
    p = skip_space(p + 3, true);
    p = parse_alternates(p, id, false);
    if (at(p) == '\r') {
      p += at(p + 1) == '\n' ? 2 : 1;
    } else if (at(p) == '\n') {
      ++p;
    } else if (p < s_.size()) {
      throw ParseError{p, std::string("unexpected '") + at(p) + "' (expecting newline or end of rule)"};
    }
    return skip_space(p, true);
  }

  size_t parse_alternates(size_t pos, uint32_t rule, bool nested) {
    std::vector<Element> seq;
    pos = parse_sequence(pos, rule, nested, seq);
    add_alt(rule, seq, pos);
    while (at(pos) == '|') {
      pos = skip_space(pos + 1, true);
      seq.clear();
      pos = parse_sequence(pos, rule, nested, seq);
      add_alt(rule, seq, pos);
    }
    return pos;
  }

  void add_alt(uint32_t rule, const std::vector<Element>& seq, size_t pos) {
    if (Status st = b_.add_alt(rule, seq); !st) throw ParseError{pos, st.message()};
  }

  // One code point from the source (UTF-8) or an escape; pos advances past it.
  uint32_t parse_char(size_t& pos) {
    const char c = at(pos);
    if (c == '\\') {
      const char e = at(pos + 1);
      auto hex = [&](int n) {
        uint32_t v = 0;
        for (int i = 0; i < n; ++i) {
          const int h = hex_value(at(pos + 2 + i));
          if (h < 0) throw ParseError{pos, std::string("expecting ") + std::to_string(n) + " hex digits after '\\" + e + "'"};
          v = v * 16 + (uint32_t)h;
        }
        pos += 2 + n;
        if (v > kMaxCodePoint) throw ParseError{pos - 2 - n, "code point out of range (above U+10FFFF)"};
        return v;
      };
      switch (e) {
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        case 'n': pos += 2; return '\n';
        case 'r': pos += 2; return '\r';
        case 't': pos += 2; return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
          pos += 2;
          return (uint8_t)e;
        default:
          throw ParseError{pos, std::string("unknown escape '\\") + (e ? std::string(1, e) : std::string()) + "'"};
      }
    }
    const auto u = (uint8_t)c;
    int n = u < 0x80 ? 1 : (u >> 5) == 6 ? 2 : (u >> 4) == 14 ? 3 : (u >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos + n > s_.size()) throw ParseError{pos, "invalid UTF-8 in grammar text"};
    uint32_t cp = n == 1 ? u : n == 2 ? (u & 0x1F) : n == 3 ? (u & 0x0F) : (u & 0x07);
    for (int i = 1; i < n; ++i) {
      const auto b = (uint8_t)s_[pos + i];
      if ((b & 0xC0) != 0x80) throw ParseError{pos, "invalid UTF-8 in grammar text"};
      cp = (cp << 6) | (b & 0x3F);
    }
    pos += n;
    return cp;
  }

  // Elements for a set of code points: one byte set when every code point is a
  // single byte, else a generated rule of UTF-8 alternatives.
  Element class_element(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, size_t pos) {
    const std::vector<ByteRangeSeq> seqs = utf8_sequences(ranges);
    if (seqs.empty()) throw ParseError{pos, "character class matches nothing"};
    ByteSet ascii;
    std::vector<const ByteRangeSeq*> multi;
    for (const auto& q : seqs) {
      if (q.size() == 1) {
        ascii.set_range(q[0].lo, q[0].hi);
      } else {
        multi.push_back(&q);
      }
    }
    if (multi.empty()) return {Element::kBytes, b_.byte_set(ascii)};
    std::string key;
    for (auto w : ascii.w) key += std::to_string(w) + ",";
    for (const auto* q : multi)
      for (auto r : *q) key += std::to_string(r.lo) + "-" + std::to_string(r.hi) + ",";
    if (auto it = class_rules_.find(key); it != class_rules_.end()) return {Element::kRule, it->second};
    const uint32_t r = b_.fresh_rule("char-class");
    if (!ascii.empty()) add_alt(r, {{Element::kBytes, b_.byte_set(ascii)}}, pos);
    for (const auto* q : multi) {
      std::vector<Element> seq;
      for (auto br : *q) {
        ByteSet s;
        s.set_range(br.lo, br.hi);
        seq.push_back({Element::kBytes, b_.byte_set(s)});
      }
      add_alt(r, seq, pos);
    }
    class_rules_.emplace(std::move(key), r);
    return {Element::kRule, r};
  }

  uint64_t parse_int(size_t& pos) {
    const size_t start = pos;
    uint64_t v = 0;
    while (at(pos) >= '0' && at(pos) <= '9') {
      v = v * 10 + (uint64_t)(at(pos) - '0');
      if (v > kMaxRepetition)
        throw ParseError{start, "repetition count is too large (at most " + std::to_string(kMaxRepetition) + ")"};
      ++pos;
    }
    if (pos == start) throw ParseError{pos, "expecting a number"};
    return v;
  }

  // Replaces seq[start..] (one item) by its repetition {min, max} (max < 0: unbounded).
  void repeat(std::vector<Element>& seq, size_t start, uint64_t min, int64_t max, uint32_t rule, size_t pos) {
    std::vector<Element> item(seq.begin() + (std::ptrdiff_t)start, seq.end());
    seq.resize(start);
    Element x;
    if (item.size() == 1) {
      x = item[0];
    } else {
      const uint32_t r = b_.fresh_rule(b_.name(rule));
      add_alt(r, item, pos);
      x = {Element::kRule, r};
    }
    for (uint64_t i = 0; i < min; ++i) seq.push_back(x);
    if (max < 0) {  // x*: R ::= x R | ""
      const uint32_t r = b_.fresh_rule(b_.name(rule));
      add_alt(r, {x, {Element::kRule, r}}, pos);
      add_alt(r, {}, pos);
      seq.push_back({Element::kRule, r});
      return;
    }
    // n = max - min optionals: R_n ::= x R_{n-1} | "", R_1 ::= x | "".
    uint32_t next = 0;
    bool have_next = false;
    for (int64_t k = 1; k <= max - (int64_t)min; ++k) {
      const uint32_t r = b_.fresh_rule(b_.name(rule));
      if (have_next) {
        add_alt(r, {x, {Element::kRule, next}}, pos);
      } else {
        add_alt(r, {x}, pos);
      }
      add_alt(r, {}, pos);
      next = r;
      have_next = true;
    }
    if (have_next) seq.push_back({Element::kRule, next});
  }

  size_t parse_sequence(size_t pos, uint32_t rule, bool nested, std::vector<Element>& seq) {
    size_t last_start = std::string::npos;  // start of the last item in seq
    while (pos < s_.size()) {
      const char c = s_[pos];
      if (c == '"') {
        last_start = seq.size();
        ++pos;
        while (at(pos) != '"') {
          if (pos >= s_.size()) throw ParseError{pos, "unterminated string literal"};
          std::string bytes;
          append_utf8(bytes, parse_char(pos));
          for (char byte : bytes) {
            ByteSet s;
            s.set((uint8_t)byte);
            seq.push_back({Element::kBytes, b_.byte_set(s)});
          }
        }
        ++pos;
        // An empty literal "" matches nothing at all: an item of no elements.
        if (seq.size() == last_start) last_start = std::string::npos;
      } else if (c == '[') {
        const size_t open = pos;
        ++pos;
        bool negate = false;
        if (at(pos) == '^') {
          negate = true;
          ++pos;
        }
        std::vector<std::pair<uint32_t, uint32_t>> ranges;
        while (at(pos) != ']') {
          if (pos >= s_.size()) throw ParseError{open, "unterminated character class"};
          const uint32_t lo = parse_char(pos);
          uint32_t hi = lo;
          if (at(pos) == '-' && at(pos + 1) != ']' && pos + 1 < s_.size()) {
            ++pos;
            const size_t hi_pos = pos;
            hi = parse_char(pos);
            if (hi < lo) throw ParseError{hi_pos, "character range is reversed (end before start)"};
          }
          ranges.push_back({lo, hi});
        }
        ++pos;
        if (negate) ranges = complement_ranges(ranges);
        last_start = seq.size();
        seq.push_back(class_element(ranges, open));
      } else if (c == '.') {
        last_start = seq.size();
        seq.push_back(class_element({{0, kMaxCodePoint}}, pos));
        ++pos;
      } else if (is_word_char(c)) {
        const size_t end = parse_name(pos);
        const std::string name(s_.substr(pos, end - pos));
        const uint32_t id = b_.rule(name);
        first_ref_.emplace(id, pos);
        last_start = seq.size();
        seq.push_back({Element::kRule, id});
        pos = end;
      } else if (c == '(') {
        const size_t open = pos;
        if (++depth_ > kMaxNesting)
          throw ParseError{pos, "groups nest too deeply (more than " + std::to_string(kMaxNesting) + " levels)"};
        const uint32_t sub = b_.fresh_rule(b_.name(rule));
        pos = parse_alternates(skip_space(pos + 1, true), sub, true);
        if (at(pos) != ')') throw ParseError{open, "unclosed '(' (expecting ')')"};
        --depth_;
        ++pos;
        last_start = seq.size();
        seq.push_back({Element::kRule, sub});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last_start == std::string::npos)
          throw ParseError{pos, std::string("'") + c + "' must follow an item to repeat"};
        uint64_t min = 0;
        int64_t max = -1;
        if (c == '+') {
          min = 1;
        } else if (c == '?') {
          max = 1;
        } else if (c == '{') {
          const size_t open = pos;
          pos = skip_space(pos + 1, nested);
          if (at(pos) == ',') {
            min = 0;
          } else {
            min = parse_int(pos);
            max = (int64_t)min;
          }
          pos = skip_space(pos, nested);
          if (at(pos) == ',') {
            pos = skip_space(pos + 1, nested);
            max = at(pos) == '}' ? -1 : (int64_t)parse_int(pos);
            if (max >= 0 && (uint64_t)max < min)
              throw ParseError{open, "repetition {m,n} needs m <= n"};
            pos = skip_space(pos, nested);
          }
          if (at(pos) != '}') throw ParseError{pos, "expecting '}' to close the repetition"};
        }
        ++pos;
        repeat(seq, last_start, min, max, rule, pos);
        last_start = std::string::npos;  // x** is not meaningful; llama.cpp refuses it too
      } else if (c == '<') {
        throw ParseError{pos, "token references (<...>) are not supported; write the text as a string literal"};
      } else {
        break;
      }
      pos = skip_space(pos, nested);
    }
    return pos;
  }

  static constexpr int kMaxNesting = 256;  // parentheses; the parser recurses per level
  std::string_view s_;
  GrammarBuilder b_;
  int depth_ = 0;
  std::unordered_map<std::string, size_t> defined_;
  std::unordered_map<uint32_t, size_t> first_ref_;  // rule -> first reference position
  std::unordered_map<std::string, uint32_t> class_rules_;
};

std::string line_col(std::string_view s, size_t pos) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < s.size(); ++i) {
    if (s[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

}  // namespace

Result<Grammar> parse_gbnf(std::string_view text) {
  Grammar g;
  try {
    g = Parser(text).parse();
  } catch (const ParseError& e) {
    return invalid_argument("grammar: " + line_col(text, e.pos) + ": " + e.msg);
  }
  if (Status st = g.validate(); !st) return st.with_context("grammar");
  return g;
}

}  // namespace chimera::runtime::grammar
