// Runtime values of the Jinja interpreter, with Python/Jinja2 semantics where
// chat templates depend on them: truthiness, equality (1 == 1.0 == True),
// str() / repr() of lists and dicts, HF-style `tojson` (json.dumps with
// ensure_ascii=False, ", " / ": " separators, insertion-ordered keys), and
// code-point indexing of UTF-8 strings.
// Invariants: arrays and objects are shared by reference (like Python lists
// and dicts), so a `namespace()` mutated through one name is seen through all;
// object keys are strings and keep insertion order; `Undefined` is a distinct
// kind (missing variable / key) that renders as "" and is falsy.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace chimera::tokenizer::jinja {

class Value;
class Evaluator;

using Array = std::vector<Value>;
using KwArgs = std::vector<std::pair<std::string, Value>>;

// Insertion-ordered string-keyed map (dicts are small in chat templates).
struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_namespace = false;  // only namespace() objects accept `set ns.x = ...`

  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
  void set(const std::string& key, Value v);
};

// A callable: macro, global function or bound helper.
using NativeFn = std::function<Result<Value>(Evaluator&, Array& args, KwArgs& kwargs)>;
struct Function {
  std::string name;
  NativeFn fn;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Value() = default;  // undefined
  static Value undefined(std::string name = {}) {
    Value v;
    v.str_ = std::move(name);
    return v;
  }
  static Value none() { return make(Kind::kNone); }
  static Value boolean(bool b) {
    Value v = make(Kind::kBool);
    v.int_ = b ? 1 : 0;
    return v;
  }
  static Value integer(int64_t i) {
    Value v = make(Kind::kInt);
    v.int_ = i;
    return v;
  }
  static Value floating(double d) {
    Value v = make(Kind::kFloat);
    v.float_ = d;
    return v;
  }
  static Value string(std::string s) {
    Value v = make(Kind::kString);
    v.str_ = std::move(s);
    return v;
  }
  static Value array(Array items = {}) {
    Value v = make(Kind::kArray);
    v.ptr_ = std::make_shared<Array>(std::move(items));
    return v;
  }
  static Value object(std::shared_ptr<Object> obj = nullptr) {
    Value v = make(Kind::kObject);
    v.ptr_ = obj ? std::shared_ptr<void>(std::move(obj)) : std::make_shared<Object>();
    return v;
  }
  static Value function(std::string name, NativeFn fn) {
    Value v = make(Kind::kFunction);
    v.ptr_ = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return kind_ == Kind::kFloat ? (int64_t)float_ : int_; }
  double as_float() const { return kind_ == Kind::kFloat ? float_ : (double)int_; }
  const std::string& as_string() const { return str_; }
  // Name of the missing variable/key for an undefined value (for messages).
  const std::string& undefined_name() const { return str_; }
  Array& items() const { return *static_cast<Array*>(ptr_.get()); }
  Object& obj() const { return *static_cast<Object*>(ptr_.get()); }
  const Function& fn() const { return *static_cast<const Function*>(ptr_.get()); }
  // Identity of the shared list/dict/function (for `is sameas`).
  const void* identity() const { return ptr_.get(); }

  // Python truthiness; undefined is falsy.
  bool truthy() const;
  // Python str(): strings raw, None -> "None", True -> "True", lists/dicts as repr.
  std::string str() const;
  // Python repr(): strings quoted.
  std::string repr() const;
  // Jinja type name for error messages.
  const char* type_name() const;

 private:
  static Value make(Kind k) {
    Value v;
    v.kind_ = k;
    return v;
  }
  Kind kind_ = Kind::kUndefined;
  union {
    int64_t int_ = 0;  // kBool, kInt
    double float_;     // kFloat
  };
  std::string str_;            // kString; the missing name for kUndefined
  std::shared_ptr<void> ptr_;  // Array / Object / Function by kind
};

// Python ==, with 1 == 1.0 == True and deep comparison of lists/dicts.
bool values_equal(const Value& a, const Value& b);
// Python <: numbers, strings, lists (lexicographic). Error for other types.
Result<bool> values_less(const Value& a, const Value& b);

// Python float repr ("1.0", "0.1", "1e-05", "1e+16").
std::string format_float(double d);

// json.dumps(v, ensure_ascii=False, indent=indent) as HF's tojson filter
// renders it; indent < 0 means no indent. Error for undefined / functions.
Result<std::string> to_json(const Value& v, int indent);

// Converts JSON data (message lists, tools, extra context) into values.
// Depth is bounded so hostile input cannot exhaust the stack.
Result<Value> from_json(const nlohmann::ordered_json& j, int max_depth = 256);

// UTF-8 helpers: byte offsets of each code point start (plus the end).
std::vector<size_t> utf8_offsets(const std::string& s);
size_t utf8_length(const std::string& s);

}  // namespace chimera::tokenizer::jinja
