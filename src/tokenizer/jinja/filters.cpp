// Built-in Jinja filters and tests with jinja2 3.x semantics (tojson follows
// transformers' override: no HTML escaping, ensure_ascii=False, key order kept).
// Case mapping is ASCII-only; other bytes pass through unchanged.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <unordered_map>

#include "tokenizer/jinja/builtins.h"

namespace chimera::tokenizer::jinja {
namespace {

using FilterFn = std::function<Result<Value>(Evaluator&, const Value&, Array&, KwArgs&)>;
using TestFn = std::function<Result<bool>(Evaluator&, const Value&, Array&)>;

// Argument by keyword or position; nullptr when absent.
const Value* arg(const Array& args, const KwArgs& kwargs, size_t pos, const char* name) {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return pos < args.size() ? &args[pos] : nullptr;
}

bool arg_bool(const Array& args, const KwArgs& kwargs, size_t pos, const char* name, bool dflt) {
  const Value* v = arg(args, kwargs, pos, name);
  return v ? v->truthy() : dflt;
}

bool is_py_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  auto strip_me = [&](char c) {
    if (chars && chars->is_string()) return chars->as_string().find(c) != std::string::npos;
    return is_py_space(c);
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && strip_me(s[b])) ++b;
  if (right)
    while (e > b && strip_me(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string ascii_map(std::string s, int (*f)(int)) {
  for (char& c : s) c = (char)f((unsigned char)c);
  return s;
}

std::string title_case(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    if (is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<') {
      start = true;
      continue;
    }
    c = (char)(start ? std::toupper((unsigned char)c) : std::tolower((unsigned char)c));
    start = false;
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_map(s, std::tolower);
  if (!out.empty()) out[0] = (char)std::toupper((unsigned char)out[0]);
  return out;
}

Result<std::string> replace_all(Evaluator& ev, const std::string& s, const std::string& from, const std::string& to,
                                int64_t count) {
  std::string out;
  size_t pos = 0;
  int64_t done = 0;
  if (from.empty()) {  // Python inserts `to` between every character
    std::vector<size_t> offs = utf8_offsets(s);
    for (size_t i = 0; i + 1 < offs.size(); ++i) {
      if (count < 0 || done < count) out += to, ++done;
      out.append(s, offs[i], offs[i + 1] - offs[i]);
      CHIMERA_RETURN_IF_ERROR(ev.check_size(out.size()));
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  while (count < 0 || done < count) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    CHIMERA_RETURN_IF_ERROR(ev.check_size(out.size()));
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  CHIMERA_RETURN_IF_ERROR(ev.check_size(out.size()));
  return out;
}

// Attribute path "a.b.0" as jinja's make_attrgetter resolves it.
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit((unsigned char)c); });
    if (cur.is_undefined()) return cur;
    cur = numeric && cur.is_array() ? get_item(cur, Value::integer(std::atoll(part.c_str()))) : get_attr(cur, part);
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Result<Value> to_int(const Value& v, const Value* dflt) {
  Value fallback = dflt ? *dflt : Value::integer(0);
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) return std::isfinite(v.as_float()) ? Value::integer((int64_t)v.as_float()) : fallback;
  if (v.is_string()) {
    std::string s = strip_chars(v.as_string(), nullptr, true, true);
    if (s.empty()) return fallback;
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(s.c_str(), &end, 10);
    if (*end == '\0' && errno == 0) return Value::integer(i);
    double d = std::strtod(s.c_str(), &end);
    if (*end == '\0' && std::isfinite(d)) return Value::integer((int64_t)d);
  }
  return fallback;
}

Result<Value> to_float(const Value& v, const Value* dflt) {
  Value fallback = dflt ? *dflt : Value::floating(0.0);
  if (v.is_number()) return Value::floating(v.as_float());
  if (v.is_string()) {
    std::string s = strip_chars(v.as_string(), nullptr, true, true);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value::floating(d);
  }
  return fallback;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Case-insensitive ordering for sort/dictsort/min/max (jinja's default).
Result<bool> sort_less(const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string())
    return ascii_map(a.as_string(), std::tolower) < ascii_map(b.as_string(), std::tolower);
  return values_less(a, b);
}

Result<Array> sorted(Array items, bool reverse, bool case_sensitive, const Value* attribute) {
  Status err;
  auto key = [&](const Value& v) { return attribute && attribute->is_string() ? attr_path(v, attribute->as_string()) : v; };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    if (!err.is_ok()) return false;
    auto r = reverse ? sort_less(key(b), key(a), case_sensitive) : sort_less(key(a), key(b), case_sensitive);
    if (!r.is_ok()) {
      err = r.status();
      return false;
    }
    return r.value();
  });
  if (!err.is_ok()) return err;
  return items;
}

Result<Value> select_impl(Evaluator& ev, const Value& v, Array& args, bool by_attr, bool keep_if) {
  CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(v));
  size_t k = 0;
  std::string attr;
  if (by_attr) {
    if (args.empty() || !args[0].is_string()) return invalid_argument("selectattr/rejectattr need an attribute name");
    attr = args[0].as_string();
    k = 1;
  }
  std::string test;
  if (k < args.size()) {
    if (!args[k].is_string()) return invalid_argument("select/reject: test name must be a string");
    test = args[k].as_string();
    ++k;
  }
  Array test_args(args.begin() + (long)std::min(k, args.size()), args.end());
  Array out;
  for (const Value& item : items) {
    Value x = by_attr ? attr_path(item, attr) : item;
    bool r;
    if (test.empty()) {
      r = x.truthy();
    } else {
      Array targs = test_args;
      CHIMERA_ASSIGN_OR_RETURN(r, apply_test(ev, test, x, targs));
    }
    if (r == keep_if) out.push_back(item);
  }
  return Value::array(std::move(out));
}

// jinja's do_indent: pad every line but the first (and blank lines only when
// `blank`), the first too when `first`.
std::string indent_text(const std::string& s, const Value* width, bool first, bool blank) {
  std::string pad = width && width->is_string()
                        ? width->as_string()
                        : std::string((size_t)std::clamp<int64_t>(width ? width->as_int() : 4, 0, 1024), ' ');
  std::vector<std::string> lines;
  size_t start = 0;
  while (true) {
    size_t nl = s.find('\n', start);
    lines.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  std::string out = lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    out += '\n';
    if (blank || !lines[i].empty()) out += pad;
    out += lines[i];
  }
  return first ? pad + out : out;
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> kFilters = [] {
    std::unordered_map<std::string, FilterFn> m;
    m["trim"] = [](Evaluator&, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      return Value::string(strip_chars(v.str(), arg(a, k, 0, "chars"), true, true));
    };
    m["length"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      if (v.is_string()) return Value::integer((int64_t)utf8_length(v.as_string()));
      if (v.is_array()) return Value::integer((int64_t)v.items().size());
      if (v.is_object()) return Value::integer((int64_t)v.obj().entries.size());
      if (v.is_undefined()) return Value::integer(0);
      return invalid_argument(std::string("object of type '") + v.type_name() + "' has no len()");
    };
    m["count"] = m["length"];
    m["upper"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      return Value::string(ascii_map(v.str(), std::toupper));
    };
    m["lower"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      return Value::string(ascii_map(v.str(), std::tolower));
    };
    m["title"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> { return Value::string(title_case(v.str())); };
    m["capitalize"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      return Value::string(capitalize(v.str()));
    };
    m["replace"] = [](Evaluator& ev, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      const Value* from = arg(a, k, 0, "old");
      const Value* to = arg(a, k, 1, "new");
      const Value* count = arg(a, k, 2, "count");
      if (!from || !to) return invalid_argument("replace filter needs 'old' and 'new'");
      CHIMERA_ASSIGN_OR_RETURN(std::string r, replace_all(ev, v.str(), from->str(), to->str(),
                                                          count && !count->is_none() ? count->as_int() : -1));
      return Value::string(std::move(r));
    };
    m["join"] = [](Evaluator& ev, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      const Value* sep = arg(a, k, 0, "d");
      const Value* attr = arg(a, k, 1, "attribute");
      CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(v));
      std::string out;
      for (size_t i = 0; i < items.size(); ++i) {
        if (i && sep) out += sep->str();
        out += (attr && attr->is_string() ? attr_path(items[i], attr->as_string()) : items[i]).str();
        CHIMERA_RETURN_IF_ERROR(ev.check_size(out.size()));
      }
      return Value::string(std::move(out));
    };
    m["default"] = [](Evaluator&, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      const Value* d = arg(a, k, 0, "default_value");
      bool boolean = arg_bool(a, k, 1, "boolean", false);
      if (v.is_undefined() || (boolean && !v.truthy())) return d ? *d : Value::string("");
      return v;
    };
    m["d"] = m["default"];
    m["tojson"] = [](Evaluator& ev, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      const Value* ind = arg(a, k, 0, "indent");
      int indent = ind && ind->is_number() ? (int)std::clamp<int64_t>(ind->as_int(), 0, 64) : -1;
      CHIMERA_ASSIGN_OR_RETURN(std::string s, to_json(v, indent));
      CHIMERA_RETURN_IF_ERROR(ev.check_size(s.size()));
      return Value::string(std::move(s));
    };
    m["string"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> { return Value::string(v.str()); };
    m["int"] = [](Evaluator&, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      return to_int(v, arg(a, k, 0, "default"));
    };
    m["float"] = [](Evaluator&, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      return to_float(v, arg(a, k, 0, "default"));
    };
    m["abs"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      if (v.is_float()) return Value::floating(std::fabs(v.as_float()));
      if (v.is_int() || v.is_bool()) return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
      return invalid_argument(std::string("bad operand type for abs(): '") + v.type_name() + "'");
    };
    m["round"] = [](Evaluator&, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      if (!v.is_number()) return invalid_argument("round filter needs a number");
      const Value* prec = arg(a, k, 0, "precision");
      const Value* method = arg(a, k, 1, "method");
      double scale = std::pow(10.0, prec ? (double)prec->as_int() : 0.0);
      double x = v.as_float() * scale;
      std::string how = method ? method->str() : "common";
      // "common" is Python's round(): ties go to the even neighbour.
      double r = how == "floor" ? std::floor(x) : how == "ceil" ? std::ceil(x) : std::nearbyint(x);
      return Value::floating(r / scale);
    };
    m["first"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(v));
      return items.empty() ? Value::undefined("first") : items.front();
    };
    m["last"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(v));
      return items.empty() ? Value::undefined("last") : items.back();
    };
    m["list"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(v));
      return Value::array(std::move(items));
    };
    m["reverse"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      if (v.is_string()) {
        CHIMERA_ASSIGN_OR_RETURN(Array chars, iterate(v));
        std::string out;
        for (size_t i = chars.size(); i-- > 0;) out += chars[i].as_string();
        return Value::string(std::move(out));
      }
      CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(v));
      std::reverse(items.begin(), items.end());
      return Value::array(std::move(items));
    };
    m["sort"] = [](Evaluator&, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(v));
      CHIMERA_ASSIGN_OR_RETURN(items, sorted(std::move(items), arg_bool(a, k, 0, "reverse", false),
                                             arg_bool(a, k, 1, "case_sensitive", false), arg(a, k, 2, "attribute")));
      return Value::array(std::move(items));
    };
    m["dictsort"] = [](Evaluator&, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      if (!v.is_object()) return invalid_argument("dictsort filter needs a dict");
      Array pairs;
      for (const auto& [key, x] : v.obj().entries) pairs.push_back(Value::array({Value::string(key), x}));
      const Value* by = arg(a, k, 1, "by");
      Value attr = Value::string(by && by->str() == "value" ? "1" : "0");
      CHIMERA_ASSIGN_OR_RETURN(pairs, sorted(std::move(pairs), arg_bool(a, k, 2, "reverse", false),
                                             arg_bool(a, k, 0, "case_sensitive", false), &attr));
      return Value::array(std::move(pairs));
    };
    m["unique"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(v));
      Array out;
      for (const Value& x : items)
        if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return values_equal(x, y); })) out.push_back(x);
      return Value::array(std::move(out));
    };
    m["sum"] = [](Evaluator&, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(v));
      const Value* attr = arg(a, k, 0, "attribute");
      const Value* start = arg(a, k, 1, "start");
      Value acc = start ? *start : Value::integer(0);
      for (const Value& x : items) {
        CHIMERA_ASSIGN_OR_RETURN(acc, binary_op(Op::kAdd, acc, attr ? attr_path(x, attr->str()) : x, 1u << 30));
      }
      return acc;
    };
    auto minmax = [](bool want_max) {
      return [want_max](Evaluator&, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
        CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(v));
        if (items.empty()) return Value::undefined(want_max ? "max" : "min");
        CHIMERA_ASSIGN_OR_RETURN(items, sorted(std::move(items), want_max, arg_bool(a, k, 0, "case_sensitive", false),
                                               arg(a, k, 1, "attribute")));
        return items.front();
      };
    };
    m["min"] = minmax(false);
    m["max"] = minmax(true);
    m["items"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      if (v.is_undefined()) return Value::array();
      if (!v.is_object()) return invalid_argument(std::string("items filter needs a dict, got '") + v.type_name() + "'");
      Array pairs;
      for (const auto& [key, x] : v.obj().entries) pairs.push_back(Value::array({Value::string(key), x}));
      return Value::array(std::move(pairs));
    };
    m["map"] = [](Evaluator& ev, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(v));
      Array out;
      for (const auto& [key, x] : k) {
        if (key != "attribute") continue;
        const Value* dflt = arg({}, k, 99, "default");
        for (const Value& item : items) {
          Value r = attr_path(item, x.str());
          out.push_back(r.is_undefined() && dflt ? *dflt : r);
        }
        return Value::array(std::move(out));
      }
      if (a.empty() || !a[0].is_string()) return invalid_argument("map filter needs a filter name or attribute=");
      std::string name = a[0].as_string();
      for (const Value& item : items) {
        Array fargs(a.begin() + 1, a.end());
        KwArgs fkw = k;
        CHIMERA_ASSIGN_OR_RETURN(Value r, apply_filter(ev, name, item, fargs, fkw));
        out.push_back(std::move(r));
      }
      return Value::array(std::move(out));
    };
    m["select"] = [](Evaluator& ev, const Value& v, Array& a, KwArgs&) { return select_impl(ev, v, a, false, true); };
    m["reject"] = [](Evaluator& ev, const Value& v, Array& a, KwArgs&) { return select_impl(ev, v, a, false, false); };
    m["selectattr"] = [](Evaluator& ev, const Value& v, Array& a, KwArgs&) { return select_impl(ev, v, a, true, true); };
    m["rejectattr"] = [](Evaluator& ev, const Value& v, Array& a, KwArgs&) { return select_impl(ev, v, a, true, false); };
    m["safe"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> { return v; };
    m["escape"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      return Value::string(html_escape(v.str()));
    };
    m["e"] = m["escape"];
    m["forceescape"] = m["escape"];
    m["indent"] = [](Evaluator&, const Value& v, Array& a, KwArgs& k) -> Result<Value> {
      return Value::string(indent_text(v.str(), arg(a, k, 0, "width"), arg_bool(a, k, 1, "first", false),
                                       arg_bool(a, k, 2, "blank", false)));
    };
    m["wordcount"] = [](Evaluator&, const Value& v, Array&, KwArgs&) -> Result<Value> {
      int64_t n = 0;
      bool in_word = false;
      for (char c : v.str()) {
        bool w = std::isalnum((unsigned char)c) || c == '_' || (unsigned char)c >= 0x80;
        if (w && !in_word) ++n;
        in_word = w;
      }
      return Value::integer(n);
    };
    m["format"] = [](Evaluator&, const Value& v, Array& a, KwArgs&) -> Result<Value> {
      // printf-style subset: %s and %d and %%.
      std::string f = v.str(), out;
      size_t next = 0;
      for (size_t i = 0; i < f.size(); ++i) {
        if (f[i] != '%' || i + 1 >= f.size()) {
          out += f[i];
          continue;
        }
        char c = f[++i];
        if (c == '%') {
          out += '%';
        } else if (c == 's' || c == 'd') {
          if (next >= a.size()) return invalid_argument("format filter: not enough arguments");
          out += c == 'd' ? std::to_string(a[next++].as_int()) : a[next++].str();
        } else {
          return invalid_argument(std::string("format filter: unsupported conversion '%") + c + "'");
        }
      }
      return Value::string(std::move(out));
    };
    return m;
  }();
  return kFilters;
}

Result<bool> test_compare(const Value& v, const Array& a, Op op) {
  if (a.empty()) return invalid_argument("comparison test needs an argument");
  switch (op) {
    case Op::kEq: return values_equal(v, a[0]);
    case Op::kNe: return !values_equal(v, a[0]);
    case Op::kLt: return values_less(v, a[0]);
    case Op::kGt: return values_less(a[0], v);
    case Op::kLe: {
      CHIMERA_ASSIGN_OR_RETURN(bool r, values_less(a[0], v));
      return !r;
    }
    default: {
      CHIMERA_ASSIGN_OR_RETURN(bool r, values_less(v, a[0]));
      return !r;
    }
  }
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> kTests = [] {
    std::unordered_map<std::string, TestFn> m;
    auto simple = [&m](const char* name, std::function<bool(const Value&)> f) {
      m[name] = [f](Evaluator&, const Value& v, Array&) -> Result<bool> { return f(v); };
    };
    simple("defined", [](const Value& v) { return !v.is_undefined(); });
    simple("undefined", [](const Value& v) { return v.is_undefined(); });
    simple("none", [](const Value& v) { return v.is_none(); });
    simple("boolean", [](const Value& v) { return v.is_bool(); });
    simple("true", [](const Value& v) { return v.is_bool() && v.as_bool(); });
    simple("false", [](const Value& v) { return v.is_bool() && !v.as_bool(); });
    simple("integer", [](const Value& v) { return v.is_int(); });
    simple("float", [](const Value& v) { return v.is_float(); });
    simple("number", [](const Value& v) { return v.is_number(); });
    simple("string", [](const Value& v) { return v.is_string(); });
    simple("mapping", [](const Value& v) { return v.is_object(); });
    simple("iterable", [](const Value& v) { return v.is_array() || v.is_object() || v.is_string() || v.is_undefined(); });
    simple("sequence", [](const Value& v) { return v.is_array() || v.is_object() || v.is_string(); });
    simple("callable", [](const Value& v) { return v.is_function(); });
    simple("lower", [](const Value& v) { return v.is_string() && ascii_map(v.as_string(), std::tolower) == v.as_string(); });
    simple("upper", [](const Value& v) { return v.is_string() && ascii_map(v.as_string(), std::toupper) == v.as_string(); });
    simple("odd", [](const Value& v) { return (v.is_int() || v.is_bool()) && (v.as_int() % 2 != 0); });
    simple("even", [](const Value& v) { return (v.is_int() || v.is_bool()) && (v.as_int() % 2 == 0); });
    auto cmp = [&m](std::initializer_list<const char*> names, Op op) {
      for (const char* n : names)
        m[n] = [op](Evaluator&, const Value& v, Array& a) -> Result<bool> { return test_compare(v, a, op); };
    };
    cmp({"eq", "equalto", "=="}, Op::kEq);
    cmp({"ne", "!="}, Op::kNe);
    cmp({"lt", "lessthan", "<"}, Op::kLt);
    cmp({"gt", "greaterthan", ">"}, Op::kGt);
    cmp({"le", "<="}, Op::kLe);
    cmp({"ge", ">="}, Op::kGe);
    m["in"] = [](Evaluator&, const Value& v, Array& a) -> Result<bool> {
      if (a.empty()) return invalid_argument("'in' test needs an argument");
      return contains(a[0], v);
    };
    m["divisibleby"] = [](Evaluator&, const Value& v, Array& a) -> Result<bool> {
      if (a.empty() || a[0].as_int() == 0) return invalid_argument("divisibleby needs a non-zero argument");
      return v.as_int() % a[0].as_int() == 0;
    };
    m["sameas"] = [](Evaluator&, const Value& v, Array& a) -> Result<bool> {
      if (a.empty()) return invalid_argument("sameas needs an argument");
      const Value& o = a[0];
      if (v.kind() != o.kind()) return false;
      if (v.is_array() || v.is_object() || v.is_function()) return v.identity() == o.identity();
      return values_equal(v, o);
    };
    return m;
  }();
  return kTests;
}

}  // namespace

bool is_known_filter(const std::string& name) { return filters().count(name) != 0; }
bool is_known_test(const std::string& name) { return tests().count(name) != 0; }

Result<Value> apply_filter(Evaluator& ev, const std::string& name, const Value& v, Array& args, KwArgs& kwargs) {
  auto it = filters().find(name);
  if (it == filters().end()) return invalid_argument("unknown filter '" + name + "'");
  CHIMERA_RETURN_IF_ERROR(ev.step());
  return it->second(ev, v, args, kwargs);
}

Result<bool> apply_test(Evaluator& ev, const std::string& name, const Value& v, Array& args) {
  auto it = tests().find(name);
  if (it == tests().end()) return invalid_argument("unknown test '" + name + "'");
  CHIMERA_RETURN_IF_ERROR(ev.step());
  return it->second(ev, v, args);
}

}  // namespace chimera::tokenizer::jinja
