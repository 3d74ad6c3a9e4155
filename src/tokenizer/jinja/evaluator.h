// Tree-walking evaluator for parsed Jinja templates.
// Scoping follows Jinja2: `for` bodies and macro calls get their own scope,
// `if` does not; `set` writes the innermost scope; `namespace()` objects are
// the only values whose attributes can be assigned. Macros see globals, the
// template's top-level variables and their own arguments.
// Invariants: every render is bounded — total evaluation steps, macro call
// depth and output/string sizes are capped by Limits and exceeding a cap is
// an error, never a hang or crash; the AST is only read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace chimera::tokenizer::jinja {

struct Limits {
  size_t max_output_bytes = 64u << 20;  // also caps any single string value
  uint64_t max_steps = 20'000'000;      // expression evaluations + loop iterations
  int max_call_depth = 64;              // nested macro calls
  size_t max_range = 100'000;           // elements produced by range()
};

using Scope = std::unordered_map<std::string, Value>;

class Evaluator {
 public:
  Evaluator(const Limits& limits, std::shared_ptr<Scope> globals);

  // Renders `body` with `vars` as the template's top-level variables.
  Result<std::string> render(const Body& body, Scope vars);

  // Helpers for builtins.
  Result<Value> call(const Value& fn, Array& args, KwArgs& kwargs);
  Status check_size(size_t bytes) const;
  Status step();
  const Limits& limits() const { return limits_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Result<Flow> exec(const Body& body);
  Result<Flow> exec_stmt(const Stmt& s);
  Result<Flow> exec_for(const Stmt& s);
  Status exec_set(const Stmt& s);
  Result<Value> call_macro(const Stmt& macro, Array& args, KwArgs& kwargs);
  Result<std::string> capture(const Body& body);
  Status emit(const std::string& text);

  Result<Value> eval(const Expr& e);
  Result<Value> eval_binary(const Expr& e);
  Result<Value> eval_call(const Expr& e);
  Result<Value> eval_subscript(const Expr& e);
  Status eval_args(const Expr& e, size_t first, Array& args, KwArgs& kwargs);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);

  Limits limits_;
  std::vector<std::shared_ptr<Scope>> scopes_;  // [0] globals, [1] template, then locals
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
};

// Python-style arithmetic and membership used by the evaluator and filters.
Result<Value> binary_op(Op op, const Value& a, const Value& b, size_t max_bytes);
Result<bool> contains(const Value& container, const Value& item);
// obj[index] with Python semantics (negative indices); undefined when absent.
Value get_item(const Value& obj, const Value& index);
// obj.name: dict key or loop/namespace attribute; undefined when absent.
Value get_attr(const Value& obj, const std::string& name);
// Python slicing of lists and strings (code points).
Result<Value> slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Iteration as Jinja does it: lists, dict keys, string characters; undefined is empty.
Result<Array> iterate(const Value& v);

}  // namespace chimera::tokenizer::jinja
