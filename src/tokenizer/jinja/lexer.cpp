// Jinja lexer implementation; the whitespace handling mirrors jinja2's
// Lexer.tokeniter (strip sign, lstrip_blocks with `line_starting`, trim_blocks).
#include "tokenizer/jinja/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace chimera::tokenizer::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

void append_utf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out += (char)cp;
  } else if (cp < 0x800) {
    out += (char)(0xC0 | (cp >> 6));
    out += (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += (char)(0xE0 | (cp >> 12));
    out += (char)(0x80 | ((cp >> 6) & 0x3F));
    out += (char)(0x80 | (cp & 0x3F));
  } else {
    out += (char)(0xF0 | (cp >> 18));
    out += (char)(0x80 | ((cp >> 12) & 0x3F));
    out += (char)(0x80 | ((cp >> 6) & 0x3F));
    out += (char)(0x80 | (cp & 0x3F));
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python "unicode-escape" decoding of a string literal body.
std::string decode_escapes(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\\' || i + 1 >= s.size()) {
      out += c;
      continue;
    }
    char n = s[++i];
    switch (n) {
      case '\n': break;  // line continuation
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case 'a': out += '\a'; break;
      case 'x':
      case 'u':
      case 'U': {
        size_t len = n == 'x' ? 2 : n == 'u' ? 4 : 8;
        uint32_t cp = 0;
        bool ok = i + len < s.size();
        for (size_t k = 1; ok && k <= len; ++k) {
          int h = hex_value(s[i + k]);
          if (h < 0) ok = false;
          else cp = cp * 16 + (uint32_t)h;
        }
        if (!ok) {  // malformed: keep literally (Python would raise; be lenient)
          out += '\\';
          out += n;
        } else {
          append_utf8(out, cp);
          i += len;
        }
        break;
      }
      default:
        if (n >= '0' && n <= '7') {
          uint32_t cp = (uint32_t)(n - '0');
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
            cp = cp * 8 + (uint32_t)(s[++i] - '0');
          append_utf8(out, cp);
        } else {
          out += '\\';
          out += n;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string src, const LexOptions& o) : src_(std::move(src)), opt_(o) {}

  Result<std::vector<Token>> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t start = find_tag(pos);
      if (start == std::string::npos) {
        emit_text(src_.substr(pos), line_at(pos));
        break;
      }
      char kind = src_[start + 1];  // '{', '%' or '#'
      size_t p = start + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      std::string text = src_.substr(pos, start - pos);
      if (sign == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (l_pos > 0 || line_starting) {
          bool only_blank = true;
          for (size_t k = l_pos; k < text.size(); ++k)
            if (text[k] != ' ' && text[k] != '\t') only_blank = false;
          if (only_blank) text.resize(l_pos);
        }
      }
      emit_text(text, line_at(pos));
      int tag_line = line_at(start);
      if (kind == '#') {
        size_t end = src_.find("#}", p);
        if (end == std::string::npos)
          return invalid_argument("unterminated comment '{#' opened at line " + std::to_string(tag_line));
        char rsign = (end > p && (src_[end - 1] == '-' || src_[end - 1] == '+')) ? src_[end - 1] : 0;
        pos = after_tag(end + 2, rsign, true);
      } else if (kind == '%' && is_raw_open(p)) {
        CHIMERA_ASSIGN_OR_RETURN(pos, lex_raw(p, tag_line));
      } else {
        CHIMERA_ASSIGN_OR_RETURN(pos, lex_tag(p, kind == '{', tag_line));
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    toks_.push_back(Token{TokKind::kEof, "", 0, 0, line_at(src_.size())});
    return std::move(toks_);
  }

  void normalize() {
    std::string out;
    out.reserve(src_.size());
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\r') {
        out += '\n';
        if (i + 1 < src_.size() && src_[i + 1] == '\n') ++i;
      } else {
        out += src_[i];
      }
    }
    if (!opt_.keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
    src_ = std::move(out);
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

 private:
  int line_at(size_t pos) const {
    size_t lo = 0, hi = line_starts_.size();
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      if (line_starts_[mid] <= pos) lo = mid;
      else hi = mid;
    }
    return (int)lo + 1;
  }

  size_t find_tag(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos && i + 1 < src_.size(); i = src_.find('{', i + 1)) {
      char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
    }
    return std::string::npos;
  }

  void emit_text(const std::string& text, int line) {
    if (text.empty()) return;
    toks_.push_back(Token{TokKind::kText, text, 0, 0, line});
  }

  // Position after a tag's closing delimiter, applying `-` / trim_blocks.
  size_t after_tag(size_t pos, char rsign, bool is_block) const {
    if (rsign == '-') {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
    } else if (rsign != '+' && is_block && opt_.trim_blocks && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  // `{% raw %}`: p is just after "{%" and its sign.
  bool is_raw_open(size_t p) const {
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    return src_.compare(p, 2, "%}") == 0;
  }

  Result<size_t> lex_raw(size_t p, int line) {
    size_t close = src_.find("%}", p);
    char rsign = (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    size_t body = after_tag(close + 2, rsign, true);
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 2)) {
      size_t q = i + 2;
      char lsign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) lsign = src_[q++];
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      char es = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) es = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(body, i - body);
      if (lsign == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      }
      emit_text(text, line_at(body));
      return after_tag(q + 2, es, true);
    }
    return invalid_argument("unterminated '{% raw %}' block opened at line " + std::to_string(line));
  }

  Result<size_t> lex_tag(size_t p, bool is_var, int line) {
    toks_.push_back(Token{is_var ? TokKind::kVarBegin : TokKind::kBlockBegin, "", 0, 0, line});
    std::string stack;  // open brackets
    const char* close = is_var ? "}}" : "%}";
    while (true) {
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (p >= src_.size())
        return invalid_argument(std::string("unterminated tag '") + (is_var ? "{{" : "{%") + "' opened at line " +
                                std::to_string(line));
      char c = src_[p];
      int tline = line_at(p);
      if (stack.empty()) {
        if (src_.compare(p, 2, close) == 0) {
          toks_.push_back(Token{is_var ? TokKind::kVarEnd : TokKind::kBlockEnd, "", 0, 0, tline});
          return after_tag(p + 2, 0, !is_var);
        }
        if ((c == '-' || c == '+') && src_.compare(p + 1, 2, close) == 0) {
          toks_.push_back(Token{is_var ? TokKind::kVarEnd : TokKind::kBlockEnd, "", 0, 0, tline});
          return after_tag(p + 3, c, !is_var);
        }
      }
      if (std::isalpha((unsigned char)c) || c == '_') {
        size_t e = p;
        while (e < src_.size() && (std::isalnum((unsigned char)src_[e]) || src_[e] == '_')) ++e;
        toks_.push_back(Token{TokKind::kName, src_.substr(p, e - p), 0, 0, tline});
        p = e;
      } else if (std::isdigit((unsigned char)c)) {
        size_t e = p;
        bool is_float = false;
        std::string digits;
        auto take_digits = [&]() {
          while (e < src_.size() && (std::isdigit((unsigned char)src_[e]) || src_[e] == '_')) {
            if (src_[e] != '_') digits += src_[e];
            ++e;
          }
        };
        take_digits();
        if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit((unsigned char)src_[e + 1])) {
          is_float = true;
          digits += src_[e++];
          take_digits();
        }
        if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
          size_t k = e + 1;
          if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
          if (k < src_.size() && std::isdigit((unsigned char)src_[k])) {
            is_float = true;
            digits += 'e';
            digits.append(src_, e + 1, k - e - 1);
            e = k;
            take_digits();
          }
        }
        Token t{is_float ? TokKind::kFloat : TokKind::kInt, digits, 0, 0, tline};
        if (is_float) {
          t.float_value = std::strtod(digits.c_str(), nullptr);
        } else {
          errno = 0;
          t.int_value = std::strtoll(digits.c_str(), nullptr, 10);
          if (errno == ERANGE) return invalid_argument("integer literal too large at line " + std::to_string(tline));
        }
        toks_.push_back(std::move(t));
        p = e;
      } else if (c == '\'' || c == '"') {
        size_t e = p + 1;
        while (e < src_.size() && src_[e] != c) e += (src_[e] == '\\') ? 2 : 1;
        if (e >= src_.size()) return invalid_argument("unterminated string literal at line " + std::to_string(tline));
        toks_.push_back(Token{TokKind::kString, decode_escapes(src_.substr(p + 1, e - p - 1)), 0, 0, tline});
        p = e + 1;
      } else {
        static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* t : kTwo)
          if (src_.compare(p, 2, t) == 0) op = t;
        if (op.empty()) {
          if (!std::strchr("+-*/%~<>=()[]{},.:|", c))
            return invalid_argument(std::string("unexpected character '") + c + "' at line " + std::to_string(tline));
          op = std::string(1, c);
        }
        if (c == '(' || c == '[' || c == '{') stack += c;
        if (c == ')' || c == ']' || c == '}') {
          char want = c == ')' ? '(' : c == ']' ? '[' : '{';
          if (stack.empty() || stack.back() != want)
            return invalid_argument(std::string("unexpected '") + c + "' at line " + std::to_string(tline));
          stack.pop_back();
        }
        toks_.push_back(Token{TokKind::kOp, op, 0, 0, tline});
        p += op.size();
      }
    }
  }

  std::string src_;
  LexOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> toks_;
};

}  // namespace

Result<std::vector<Token>> lex(const std::string& source, const LexOptions& options) {
  Lexer lexer(source, options);
  lexer.normalize();
  return lexer.run();
}

}  // namespace chimera::tokenizer::jinja
