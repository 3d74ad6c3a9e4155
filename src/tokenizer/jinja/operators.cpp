// Python-semantics operators on values: arithmetic (int overflow and division
// by zero are errors), membership, subscripts, attribute access, slicing and
// iteration. Strings are indexed and sliced by code point.
// Invariant: no operation allocates a string (or list, counting sizeof(Value)
// per item) larger than the caller's byte cap; repetition and concatenation
// are checked before allocating.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tokenizer/jinja/evaluator.h"

namespace chimera::tokenizer::jinja {
namespace {

Status type_error(const char* op, const Value& a, const Value& b) {
  if (a.is_undefined()) return invalid_argument("'" + a.undefined_name() + "' is undefined");
  if (b.is_undefined()) return invalid_argument("'" + b.undefined_name() + "' is undefined");
  return invalid_argument(std::string("unsupported operand type(s) for ") + op + ": '" + a.type_name() + "' and '" +
                          b.type_name() + "'");
}

bool is_intlike(const Value& v) { return v.is_int() || v.is_bool(); }

Result<Value> repeat(const Value& seq, int64_t n, size_t max_bytes) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && (uint64_t)n > max_bytes / s.size()) return out_of_range("string repetition exceeds the size limit");
    std::string out;
    out.reserve(s.size() * (size_t)n);
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value::string(std::move(out));
  }
  const Array& a = seq.items();
  if (!a.empty() && (uint64_t)n > max_bytes / sizeof(Value) / a.size())
    return out_of_range("list repetition exceeds the size limit");
  Array out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), a.begin(), a.end());
  return Value::array(std::move(out));
}

}  // namespace

Result<Value> binary_op(Op op, const Value& a, const Value& b, size_t max_bytes) {
  switch (op) {
    case Op::kConcat: {
      std::string s = a.str() + b.str();
      if (s.size() > max_bytes) return out_of_range("string exceeds the size limit");
      return Value::string(std::move(s));
    }
    case Op::kAdd:
      if (a.is_string() && b.is_string()) {
        if (a.as_string().size() + b.as_string().size() > max_bytes) return out_of_range("string exceeds the size limit");
        return Value::string(a.as_string() + b.as_string());
      }
      if (a.is_array() && b.is_array()) {
        if (a.items().size() + b.items().size() > max_bytes / sizeof(Value))
          return out_of_range("list exceeds the size limit");
        Array out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return Value::array(std::move(out));
      }
      break;
    case Op::kMul:
      if ((a.is_string() || a.is_array()) && is_intlike(b)) return repeat(a, b.as_int(), max_bytes);
      if ((b.is_string() || b.is_array()) && is_intlike(a)) return repeat(b, a.as_int(), max_bytes);
      break;
    default: break;
  }
  if (!a.is_number() || !b.is_number()) {
    static const char* kNames[] = {"", "not", "-", "+", "and", "or", "+", "-", "*", "/", "//", "%", "**", "~"};
    return type_error(kNames[(int)op < 14 ? (int)op : 0], a, b);
  }
  bool ints = is_intlike(a) && is_intlike(b);
  int64_t x = a.as_int(), y = b.as_int(), r = 0;
  double fx = a.as_float(), fy = b.as_float();
  switch (op) {
    case Op::kAdd:
      if (!ints) return Value::floating(fx + fy);
      if (__builtin_add_overflow(x, y, &r)) return out_of_range("integer overflow");
      return Value::integer(r);
    case Op::kSub:
      if (!ints) return Value::floating(fx - fy);
      if (__builtin_sub_overflow(x, y, &r)) return out_of_range("integer overflow");
      return Value::integer(r);
    case Op::kMul:
      if (!ints) return Value::floating(fx * fy);
      if (__builtin_mul_overflow(x, y, &r)) return out_of_range("integer overflow");
      return Value::integer(r);
    case Op::kDiv:
      if (fy == 0) return invalid_argument("division by zero");
      return Value::floating(fx / fy);
    case Op::kFloorDiv:
      if (ints) {
        if (y == 0) return invalid_argument("integer division by zero");
        if (x == INT64_MIN && y == -1) return out_of_range("integer overflow");
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value::integer(q);
      }
      if (fy == 0) return invalid_argument("float floor division by zero");
      return Value::floating(std::floor(fx / fy));
    case Op::kMod:
      if (ints) {
        if (y == 0) return invalid_argument("integer modulo by zero");
        if (y == -1) return Value::integer(0);
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value::integer(m);
      } else {
        if (fy == 0) return invalid_argument("float modulo by zero");
        double m = std::fmod(fx, fy);
        if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
        return Value::floating(m);
      }
    case Op::kPow:
      if (ints && y >= 0) {
        int64_t acc = 1;
        for (int64_t i = 0; i < y; ++i) {
          if (__builtin_mul_overflow(acc, x, &acc)) return out_of_range("integer overflow");
          if (acc == 0 || acc == 1) break;
        }
        return Value::integer(acc);
      }
      return Value::floating(std::pow(fx, fy));
    default: return internal_error("bad arithmetic operator");
  }
}

Result<bool> contains(const Value& c, const Value& item) {
  switch (c.kind()) {
    case Value::Kind::kString:
      if (!item.is_string())
        return invalid_argument(std::string("'in <string>' requires string as left operand, not ") + item.type_name());
      return c.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kArray:
      for (const Value& x : c.items())
        if (values_equal(x, item)) return true;
      return false;
    case Value::Kind::kObject: return item.is_string() && c.obj().find(item.as_string()) != nullptr;
    case Value::Kind::kUndefined: return false;
    default: return invalid_argument(std::string("argument of type '") + c.type_name() + "' is not iterable");
  }
}

Value get_item(const Value& obj, const Value& index) {
  if (obj.is_object()) {
    if (index.is_string()) {
      const Value* v = obj.obj().find(index.as_string());
      return v ? *v : Value::undefined(index.as_string());
    }
    return Value::undefined(index.str());
  }
  if ((obj.is_array() || obj.is_string()) && (index.is_int() || index.is_bool())) {
    int64_t i = index.as_int();
    if (obj.is_array()) {
      int64_t n = (int64_t)obj.items().size();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined(index.str());
      return obj.items()[(size_t)i];
    }
    std::vector<size_t> offs = utf8_offsets(obj.as_string());
    int64_t n = (int64_t)offs.size() - 1;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined(index.str());
    return Value::string(obj.as_string().substr(offs[(size_t)i], offs[(size_t)i + 1] - offs[(size_t)i]));
  }
  return Value::undefined(index.str());
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_object()) {
    const Value* v = obj.obj().find(name);
    return v ? *v : Value::undefined(name);
  }
  return Value::undefined(name);
}

Result<Value> slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (!obj.is_array() && !obj.is_string())
    return invalid_argument(std::string("'") + obj.type_name() + "' object is not subscriptable");
  for (const Value* v : {&start_v, &stop_v, &step_v})
    if (!v->is_undefined() && !v->is_none() && !v->is_int() && !v->is_bool())
      return invalid_argument("slice indices must be integers or None");
  std::vector<size_t> offs;
  int64_t n;
  if (obj.is_string()) {
    offs = utf8_offsets(obj.as_string());
    n = (int64_t)offs.size() - 1;
  } else {
    n = (int64_t)obj.items().size();
  }
  auto given = [](const Value& v) { return v.is_int() || v.is_bool(); };
  int64_t step = given(step_v) ? step_v.as_int() : 1;
  if (step == 0) return invalid_argument("slice step cannot be zero");
  auto norm = [&](const Value& v, int64_t dflt) {
    if (!given(v)) return dflt;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    if (step > 0) return std::min(std::max<int64_t>(i, 0), n);
    return std::min(std::max<int64_t>(i, -1), n - 1);
  };
  int64_t start = norm(start_v, step > 0 ? 0 : n - 1);
  int64_t stop = norm(stop_v, step > 0 ? n : -1);
  std::vector<int64_t> idx;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) idx.push_back(i);
  if (obj.is_string()) {
    std::string out;
    const std::string& s = obj.as_string();
    for (int64_t i : idx) out.append(s, offs[(size_t)i], offs[(size_t)i + 1] - offs[(size_t)i]);
    return Value::string(std::move(out));
  }
  Array out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(obj.items()[(size_t)i]);
  return Value::array(std::move(out));
}

Result<Array> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kArray: return v.items();
    case Value::Kind::kObject: {
      Array keys;
      for (const auto& [k, x] : v.obj().entries) keys.push_back(Value::string(k));
      return keys;
    }
    case Value::Kind::kString: {
      Array chars;
      std::vector<size_t> offs = utf8_offsets(v.as_string());
      for (size_t i = 0; i + 1 < offs.size(); ++i)
        chars.push_back(Value::string(v.as_string().substr(offs[i], offs[i + 1] - offs[i])));
      return chars;
    }
    case Value::Kind::kUndefined: return Array{};
    default: return invalid_argument(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

}  // namespace chimera::tokenizer::jinja
