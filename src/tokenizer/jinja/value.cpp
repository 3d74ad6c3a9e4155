// Value semantics: truthiness, str/repr, equality/ordering, float repr and
// HF-compatible JSON serialisation. See value.h for the invariants.
#include "tokenizer/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace chimera::tokenizer::jinja {

const Value* Object::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

Value* Object::find(const std::string& key) {
  for (auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void Object::set(const std::string& key, Value v) {
  if (Value* slot = find(key)) {
    *slot = std::move(v);
  } else {
    entries.emplace_back(key, std::move(v));
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0.0;
    case Kind::kString: return !str_.empty();
    case Kind::kArray: return !items().empty();
    case Kind::kObject: return !obj().entries.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kArray: return "list";
    case Kind::kObject: return obj().is_namespace ? "Namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp10 = std::atoi(sci.c_str() + e + 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 < 0) {
      out = "0." + std::string((size_t)(-exp10 - 1), '0') + digits;
    } else if ((int)digits.size() <= exp10 + 1) {
      out = digits + std::string((size_t)(exp10 + 1 - (int)digits.size()), '0') + ".0";
    } else {
      out = digits.substr(0, (size_t)exp10 + 1) + "." + digits.substr((size_t)exp10 + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  }
  return neg ? "-" + out : out;
}

static std::string py_repr_string(const std::string& s) {
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == (unsigned char)q) out += std::string("\\") + q;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    } else {
      out += (char)c;
    }
  }
  out += q;
  return out;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return int_ ? "True" : "False";
    case Kind::kInt: return std::to_string(int_);
    case Kind::kFloat: return format_float(float_);
    case Kind::kString: return str_;
    case Kind::kArray:
    case Kind::kObject:
    case Kind::kFunction: return repr();
  }
  return "";
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kString: return py_repr_string(str_);
    case Kind::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < items().size(); ++i) {
        if (i) out += ", ";
        out += items()[i].repr();
      }
      return out + "]";
    }
    case Kind::kObject: {
      std::string out = obj().is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : obj().entries) {
        if (!first) out += ", ";
        first = false;
        out += py_repr_string(k) + ": " + v.repr();
      }
      return out + (obj().is_namespace ? "}>" : "}");
    }
    case Kind::kFunction: return "<function " + fn().name + ">";
    case Kind::kUndefined: return "Undefined";
    default: return str();
  }
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kArray: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!values_equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Value::Kind::kObject: {
      if (a.identity() == b.identity()) return true;
      if (a.obj().entries.size() != b.obj().entries.size()) return false;
      for (const auto& [k, v] : a.obj().entries) {
        const Value* o = b.obj().find(k);
        if (!o || !values_equal(v, *o)) return false;
      }
      return true;
    }
    case Value::Kind::kFunction: return a.identity() == b.identity();
    default: return false;
  }
}

Result<bool> values_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_array() && b.is_array()) {
    const Array& x = a.items();
    const Array& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return values_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return invalid_argument(std::string("'<' not supported between instances of '") + a.type_name() +
                          "' and '" + b.type_name() + "'");
}

static void json_escape(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof(b), "\\u%04x", c);
          out += b;
        } else {
          out += (char)c;
        }
    }
  }
  out += '"';
}

static Status to_json_rec(const Value& v, int indent, int level, std::string& out) {
  if (level > 512) return invalid_argument("tojson: value nested too deeply");
  auto newline = [&](int lvl) {
    if (indent >= 0) {
      out += '\n';
      out.append((size_t)(indent * lvl), ' ');
    }
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::kUndefined: return invalid_argument("tojson: value is undefined");
    case Value::Kind::kFunction: return invalid_argument("tojson: cannot serialise a function");
    case Value::Kind::kNone: out += "null"; break;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; break;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); break;
    case Value::Kind::kFloat: {
      double d = v.as_float();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += format_float(d);
      break;
    }
    case Value::Kind::kString: json_escape(v.as_string(), out); break;
    case Value::Kind::kArray: {
      if (v.items().empty()) {
        out += "[]";
        break;
      }
      out += '[';
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        CHIMERA_RETURN_IF_ERROR(to_json_rec(v.items()[i], indent, level + 1, out));
      }
      newline(level);
      out += ']';
      break;
    }
    case Value::Kind::kObject: {
      if (v.obj().entries.empty()) {
        out += "{}";
        break;
      }
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.obj().entries) {
        if (!first) out += item_sep;
        first = false;
        newline(level + 1);
        json_escape(k, out);
        out += ": ";
        CHIMERA_RETURN_IF_ERROR(to_json_rec(x, indent, level + 1, out));
      }
      newline(level);
      out += '}';
      break;
    }
  }
  return Status::ok();
}

Result<std::string> to_json(const Value& v, int indent) {
  std::string out;
  CHIMERA_RETURN_IF_ERROR(to_json_rec(v, indent, 0, out));
  return out;
}

Result<Value> from_json(const nlohmann::ordered_json& j, int max_depth) {
  if (max_depth <= 0) return invalid_argument("JSON input nested too deeply");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > (uint64_t)INT64_MAX) return Value::floating((double)u);
      return Value::integer((int64_t)u);
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array items;
      items.reserve(j.size());
      for (const auto& e : j) {
        CHIMERA_ASSIGN_OR_RETURN(Value x, from_json(e, max_depth - 1));
        items.push_back(std::move(x));
      }
      return Value::array(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto obj = std::make_shared<Object>();
      for (auto it = j.begin(); it != j.end(); ++it) {
        CHIMERA_ASSIGN_OR_RETURN(Value x, from_json(it.value(), max_depth - 1));
        obj->set(it.key(), std::move(x));
      }
      return Value::object(std::move(obj));
    }
    default: return invalid_argument("unsupported JSON value (binary/discarded)");
  }
}

std::vector<size_t> utf8_offsets(const std::string& s) {
  std::vector<size_t> offs;
  offs.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size(); ++i)
    if (i == 0 || ((unsigned char)s[i] & 0xC0) != 0x80) offs.push_back(i);
  offs.push_back(s.size());
  return offs;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (i == 0 || ((unsigned char)s[i] & 0xC0) != 0x80) ++n;
  return n;
}

}  // namespace chimera::tokenizer::jinja
