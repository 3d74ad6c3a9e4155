// Methods of str and dict values that chat templates call (`content.strip()`,
// `tool.items()`, `'{}'.format(x)`, ...) and the global functions range,
// namespace, dict, raise_exception and strftime_now.
// Invariants: range() output is bounded by Limits::max_range; string results
// are bounded by the evaluator's size cap.
#include <algorithm>
#include <cctype>
#include <ctime>

#include "tokenizer/jinja/builtins.h"

namespace chimera::tokenizer::jinja {
namespace {

bool is_py_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

const Value* arg(const Array& args, const KwArgs& kwargs, size_t pos, const char* name) {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return pos < args.size() ? &args[pos] : nullptr;
}

std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
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

Result<Value> split(const std::string& s, const Value* sep_v, const Value* maxsplit_v) {
  int64_t maxsplit = maxsplit_v && !maxsplit_v->is_none() ? maxsplit_v->as_int() : -1;
  Array out;
  if (!sep_v || sep_v->is_none()) {  // runs of whitespace, no empty strings
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_py_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && (int64_t)out.size() == maxsplit) {
        size_t e = s.size();
        while (e > i && is_py_space(s[e - 1])) --e;
        out.push_back(Value::string(s.substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_py_space(s[j])) ++j;
      out.push_back(Value::string(s.substr(i, j - i)));
      i = j;
    }
    return Value::array(std::move(out));
  }
  const std::string sep = sep_v->str();
  if (sep.empty()) return invalid_argument("split(): empty separator");
  size_t pos = 0;
  while (maxsplit < 0 || (int64_t)out.size() < maxsplit) {
    size_t hit = s.find(sep, pos);
    if (hit == std::string::npos) break;
    out.push_back(Value::string(s.substr(pos, hit - pos)));
    pos = hit + sep.size();
  }
  out.push_back(Value::string(s.substr(pos)));
  return Value::array(std::move(out));
}

Result<bool> affix_match(const std::string& s, const Value* affix, bool prefix) {
  if (!affix) return invalid_argument(std::string(prefix ? "startswith" : "endswith") + "() needs an argument");
  Array options = affix->is_array() ? affix->items() : Array{*affix};
  for (const Value& o : options) {
    if (!o.is_string()) return invalid_argument("startswith/endswith need string arguments");
    const std::string& a = o.as_string();
    if (a.size() > s.size()) continue;
    if (prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0) return true;
  }
  return false;
}

std::string ascii_map(std::string s, int (*f)(int)) {
  for (char& c : s) c = (char)f((unsigned char)c);
  return s;
}

Result<Value> string_method(Evaluator& ev, const std::string& s, const std::string& name, Array& a, KwArgs& k,
                            bool* found) {
  *found = true;
  if (name == "strip") return Value::string(strip(s, arg(a, k, 0, "chars"), true, true));
  if (name == "lstrip") return Value::string(strip(s, arg(a, k, 0, "chars"), true, false));
  if (name == "rstrip") return Value::string(strip(s, arg(a, k, 0, "chars"), false, true));
  if (name == "split") return split(s, arg(a, k, 0, "sep"), arg(a, k, 1, "maxsplit"));
  if (name == "splitlines") {
    Array out;
    size_t pos = 0;
    while (pos < s.size()) {
      size_t nl = s.find('\n', pos);
      if (nl == std::string::npos) nl = s.size();
      out.push_back(Value::string(s.substr(pos, nl - pos)));
      pos = nl + 1;
    }
    return Value::array(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    CHIMERA_ASSIGN_OR_RETURN(bool r, affix_match(s, arg(a, k, 0, "prefix"), name == "startswith"));
    return Value::boolean(r);
  }
  if (name == "upper") return Value::string(ascii_map(s, std::toupper));
  if (name == "lower") return Value::string(ascii_map(s, std::tolower));
  if (name == "title" || name == "capitalize") {
    Array none;
    KwArgs nokw;
    return apply_filter(ev, name, Value::string(s), none, nokw);
  }
  if (name == "replace") {
    Array fargs = a;
    KwArgs fkw = k;
    return apply_filter(ev, "replace", Value::string(s), fargs, fkw);
  }
  if (name == "find" || name == "count") {
    const Value* sub = arg(a, k, 0, "sub");
    if (!sub || !sub->is_string()) return invalid_argument(name + "() needs a string argument");
    const std::string& n = sub->as_string();
    if (name == "find") {
      size_t hit = s.find(n);
      if (hit == std::string::npos) return Value::integer(-1);
      return Value::integer((int64_t)utf8_length(s.substr(0, hit)));
    }
    if (n.empty()) return Value::integer((int64_t)utf8_length(s) + 1);
    int64_t c = 0;
    for (size_t p = s.find(n); p != std::string::npos; p = s.find(n, p + n.size())) ++c;
    return Value::integer(c);
  }
  if (name == "join") {
    const Value* items = arg(a, k, 0, "iterable");
    if (!items) return invalid_argument("join() needs an argument");
    CHIMERA_ASSIGN_OR_RETURN(Array parts, iterate(*items));
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!parts[i].is_string()) return invalid_argument("join(): sequence item is not a string");
      if (i) out += s;
      out += parts[i].as_string();
      CHIMERA_RETURN_IF_ERROR(ev.check_size(out.size()));
    }
    return Value::string(std::move(out));
  }
  if (name == "format") {
    CHIMERA_ASSIGN_OR_RETURN(std::string out, python_format(s, a, k));
    CHIMERA_RETURN_IF_ERROR(ev.check_size(out.size()));
    return Value::string(std::move(out));
  }
  auto all_of = [&](int (*pred)(int)) {
    return Value::boolean(!s.empty() && std::all_of(s.begin(), s.end(), [&](char c) { return pred((unsigned char)c) != 0; }));
  };
  if (name == "isdigit") return all_of(std::isdigit);
  if (name == "isalpha") return all_of(std::isalpha);
  if (name == "isalnum") return all_of(std::isalnum);
  if (name == "isspace") return all_of(std::isspace);
  *found = false;
  return Value::undefined(name);
}

Result<Value> dict_method(const Value& d, const std::string& name, Array& a, KwArgs& k, bool* found) {
  *found = true;
  const Object& o = d.obj();
  if (name == "items" || name == "keys" || name == "values") {
    Array out;
    for (const auto& [key, v] : o.entries) {
      if (name == "items") out.push_back(Value::array({Value::string(key), v}));
      else if (name == "keys") out.push_back(Value::string(key));
      else out.push_back(v);
    }
    return Value::array(std::move(out));
  }
  if (name == "get") {
    const Value* key = arg(a, k, 0, "key");
    if (!key) return invalid_argument("get() needs a key");
    const Value* dflt = arg(a, k, 1, "default");
    const Value* v = key->is_string() ? o.find(key->as_string()) : nullptr;
    if (v) return *v;
    return dflt ? *dflt : Value::none();
  }
  *found = false;
  return Value::undefined(name);
}

}  // namespace

Result<std::string> python_format(const std::string& fmt, const Array& args, const KwArgs& kwargs) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}' ) {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) return invalid_argument("format(): single '{' encountered");
    std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos)
      return invalid_argument("format(): format specs and conversions are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index < args.size()) v = &args[auto_index];
      ++auto_index;
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return std::isdigit((unsigned char)d); })) {
      size_t idx = (size_t)std::stoul(field);
      if (idx < args.size()) v = &args[idx];
    } else {
      for (const auto& [k, x] : kwargs)
        if (k == field) v = &x;
    }
    if (!v) return invalid_argument("format(): no argument for field '{" + field + "}'");
    out += v->str();
    i = close;
  }
  return out;
}

Result<Value> call_method(Evaluator& ev, const Value& obj, const std::string& name, Array& args, KwArgs& kwargs,
                          bool* found) {
  CHIMERA_RETURN_IF_ERROR(ev.step());
  *found = false;
  if (obj.is_string()) return string_method(ev, obj.as_string(), name, args, kwargs, found);
  if (obj.is_object() && !obj.obj().is_namespace) return dict_method(obj, name, args, kwargs, found);
  return Value::undefined(name);
}

void add_builtin_globals(Scope& g) {
  g["range"] = Value::function("range", [](Evaluator& ev, Array& a, KwArgs&) -> Result<Value> {
    if (a.empty() || a.size() > 3) return invalid_argument("range() takes 1 to 3 arguments");
    for (const Value& v : a)
      if (!v.is_int() && !v.is_bool()) return invalid_argument("range() arguments must be integers");
    int64_t start = 0, stop, step = 1;
    if (a.size() == 1) {
      stop = a[0].as_int();
    } else {
      start = a[0].as_int();
      stop = a[1].as_int();
      if (a.size() == 3) step = a[2].as_int();
    }
    if (step == 0) return invalid_argument("range() step must not be zero");
    Array out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= ev.limits().max_range)
        return out_of_range("range() exceeds the limit of " + std::to_string(ev.limits().max_range) + " elements");
      out.push_back(Value::integer(i));
      if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
    }
    return Value::array(std::move(out));
  });
  auto make_obj = [](bool ns) {
    return [ns](Evaluator&, Array& a, KwArgs& k) -> Result<Value> {
      auto obj = std::make_shared<Object>();
      obj->is_namespace = ns;
      for (const Value& init : a) {
        if (!init.is_object()) return invalid_argument(ns ? "namespace() takes a dict or keyword arguments"
                                                          : "dict() takes a dict or keyword arguments");
        for (const auto& [key, v] : init.obj().entries) obj->set(key, v);
      }
      for (const auto& [key, v] : k) obj->set(key, v);
      return Value::object(std::move(obj));
    };
  };
  g["namespace"] = Value::function("namespace", make_obj(true));
  g["dict"] = Value::function("dict", make_obj(false));
  g["raise_exception"] = Value::function("raise_exception", [](Evaluator&, Array& a, KwArgs&) -> Result<Value> {
    return invalid_argument("raised exception: " + (a.empty() ? std::string("(no message)") : a[0].str()));
  });
}

Value make_strftime_now(std::optional<std::time_t> now) {
  return Value::function("strftime_now", [now](Evaluator&, Array& a, KwArgs&) -> Result<Value> {
    if (a.size() != 1 || !a[0].is_string()) return invalid_argument("strftime_now() takes one format string");
    std::time_t t = now ? *now : std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    const std::string& fmt = a[0].as_string();
    if (fmt.empty()) return Value::string("");
    std::string buf(256 + fmt.size() * 4, '\0');
    size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n == 0) return invalid_argument("strftime_now(): could not format '" + fmt + "'");
    buf.resize(n);
    return Value::string(std::move(buf));
  });
}

}  // namespace chimera::tokenizer::jinja
