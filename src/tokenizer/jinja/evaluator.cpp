// Statement execution and expression evaluation. See evaluator.h for the
// scoping rules and the limits every render is held to.
#include "tokenizer/jinja/evaluator.h"

#include "tokenizer/jinja/builtins.h"

namespace chimera::tokenizer::jinja {
namespace {

Status with_line(const Status& st, int line) {
  if (st.message().rfind("template error at line", 0) == 0 || st.message().rfind("template syntax error", 0) == 0)
    return st;
  return Status(st.code(), "template error at line " + std::to_string(line) + ": " + st.message());
}

Status undefined_error(const Value& v) {
  return invalid_argument("'" + (v.undefined_name().empty() ? std::string("value") : v.undefined_name()) +
                          "' is undefined");
}

}  // namespace

Evaluator::Evaluator(const Limits& limits, std::shared_ptr<Scope> globals) : limits_(limits) {
  scopes_.push_back(globals ? std::move(globals) : std::make_shared<Scope>());
}

Status Evaluator::step() {
  if (++steps_ > limits_.max_steps)
    return out_of_range("template exceeded the evaluation step limit (" + std::to_string(limits_.max_steps) +
                        "); runaway loop?");
  return Status::ok();
}

Status Evaluator::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    return out_of_range("template output exceeds the size limit (" + std::to_string(limits_.max_output_bytes) +
                        " bytes)");
  return Status::ok();
}

Status Evaluator::emit(const std::string& text) {
  CHIMERA_RETURN_IF_ERROR(check_size(out_->size() + text.size()));
  out_->append(text);
  return Status::ok();
}

Result<std::string> Evaluator::render(const Body& body, Scope vars) {
  scopes_.resize(1);
  scopes_.push_back(std::make_shared<Scope>(std::move(vars)));
  std::string out;
  out_ = &out;
  steps_ = 0;
  call_depth_ = 0;
  CHIMERA_ASSIGN_OR_RETURN(Flow f, exec(body));
  if (f != Flow::kNormal) return invalid_argument("template error: 'break'/'continue' outside of a loop");
  out_ = nullptr;
  return out;
}

Value Evaluator::lookup(const std::string& name) const {
  for (size_t i = scopes_.size(); i-- > 0;) {
    auto it = scopes_[i]->find(name);
    if (it != scopes_[i]->end()) return it->second;
  }
  return Value::undefined(name);
}

void Evaluator::assign(const std::string& name, Value v) { (*scopes_.back())[name] = std::move(v); }

Result<std::string> Evaluator::capture(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  auto r = exec(body);
  out_ = saved;
  if (!r.is_ok()) return r.status();
  if (r.value() != Flow::kNormal) return invalid_argument("'break'/'continue' outside of a loop");
  return buf;
}

Result<Evaluator::Flow> Evaluator::exec(const Body& body) {
  for (const StmtPtr& s : body) {
    auto r = exec_stmt(*s);
    if (!r.is_ok()) return with_line(r.status(), s->line);
    if (r.value() != Flow::kNormal) return r.value();
  }
  return Flow::kNormal;
}

Result<Evaluator::Flow> Evaluator::exec_stmt(const Stmt& s) {
  CHIMERA_RETURN_IF_ERROR(step());
  switch (s.kind) {
    case StmtKind::kText: CHIMERA_RETURN_IF_ERROR(emit(s.text)); return Flow::kNormal;
    case StmtKind::kOutput: {
      CHIMERA_ASSIGN_OR_RETURN(Value v, eval(*s.expr));
      CHIMERA_RETURN_IF_ERROR(emit(v.str()));
      return Flow::kNormal;
    }
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        CHIMERA_ASSIGN_OR_RETURN(Value c, eval(*cond));
        if (c.truthy()) return exec(body);
      }
      return exec(s.else_body);
    case StmtKind::kFor: return exec_for(s);
    case StmtKind::kSet: CHIMERA_RETURN_IF_ERROR(exec_set(s)); return Flow::kNormal;
    case StmtKind::kSetBlock: {
      CHIMERA_ASSIGN_OR_RETURN(std::string text, capture(s.body));
      assign(s.text, Value::string(std::move(text)));
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      const Stmt* macro = &s;
      assign(s.text, Value::function(s.text, [macro](Evaluator& ev, Array& args, KwArgs& kwargs) {
               return ev.call_macro(*macro, args, kwargs);
             }));
      return Flow::kNormal;
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kBlock: return exec(s.body);
  }
  return internal_error("unknown statement kind");
}

Result<Evaluator::Flow> Evaluator::exec_for(const Stmt& s) {
  CHIMERA_ASSIGN_OR_RETURN(Value seq, eval(*s.expr));
  if (seq.is_none()) return invalid_argument("'NoneType' object is not iterable");
  CHIMERA_ASSIGN_OR_RETURN(Array items, iterate(seq));
  scopes_.push_back(std::make_shared<Scope>());
  auto bind = [&](const Value& item) -> Status {
    if (s.targets.size() == 1) {
      assign(s.targets[0], item);
      return Status::ok();
    }
    CHIMERA_ASSIGN_OR_RETURN(Array parts, iterate(item));
    if (parts.size() != s.targets.size())
      return invalid_argument("cannot unpack " + std::to_string(parts.size()) + " values into " +
                              std::to_string(s.targets.size()) + " loop variables");
    for (size_t k = 0; k < parts.size(); ++k) assign(s.targets[k], parts[k]);
    return Status::ok();
  };
  auto run = [&]() -> Result<Flow> {
    if (s.cond) {  // `for x in xs if cond`: filter first so loop.length/index count kept items
      Array kept;
      for (Value& item : items) {
        CHIMERA_RETURN_IF_ERROR(step());
        CHIMERA_RETURN_IF_ERROR(bind(item));
        CHIMERA_ASSIGN_OR_RETURN(Value c, eval(*s.cond));
        if (c.truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    const int64_t n = (int64_t)items.size();
    // One loop object per loop, updated in place each iteration (as jinja's LoopContext).
    auto loop = std::make_shared<Object>();
    for (const char* k : {"index", "index0", "revindex", "revindex0", "first", "last", "length", "depth", "depth0",
                          "previtem", "nextitem"})
      loop->entries.emplace_back(k, Value());
    const Value loop_value = Value::object(loop);
    for (int64_t i = 0; i < n; ++i) {
      CHIMERA_RETURN_IF_ERROR(step());
      scopes_.back()->clear();
      auto& e = loop->entries;
      e[0].second = Value::integer(i + 1);
      e[1].second = Value::integer(i);
      e[2].second = Value::integer(n - i);
      e[3].second = Value::integer(n - i - 1);
      e[4].second = Value::boolean(i == 0);
      e[5].second = Value::boolean(i == n - 1);
      e[6].second = Value::integer(n);
      e[7].second = Value::integer(1);
      e[8].second = Value::integer(0);
      e[9].second = i > 0 ? items[(size_t)i - 1] : Value::undefined("previtem");
      e[10].second = i + 1 < n ? items[(size_t)i + 1] : Value::undefined("nextitem");
      assign("loop", loop_value);
      CHIMERA_RETURN_IF_ERROR(bind(items[(size_t)i]));
      CHIMERA_ASSIGN_OR_RETURN(Flow f, exec(s.body));
      if (f == Flow::kBreak) break;
    }
    if (n == 0) {
      scopes_.back()->clear();
      return exec(s.else_body);
    }
    return Flow::kNormal;
  };
  auto r = run();
  scopes_.pop_back();
  if (!r.is_ok()) return r.status();
  return Flow::kNormal;
}

Status Evaluator::exec_set(const Stmt& s) {
  CHIMERA_ASSIGN_OR_RETURN(Value v, eval(*s.expr));
  if (!s.attr.empty()) {
    Value ns = lookup(s.targets[0]);
    if (!ns.is_object() || !ns.obj().is_namespace)
      return invalid_argument("cannot assign attribute '" + s.attr + "' on '" + s.targets[0] +
                              "': only namespace() objects support attribute assignment");
    ns.obj().set(s.attr, std::move(v));
    return Status::ok();
  }
  if (s.targets.size() == 1) {
    assign(s.targets[0], std::move(v));
    return Status::ok();
  }
  CHIMERA_ASSIGN_OR_RETURN(Array parts, iterate(v));
  if (parts.size() != s.targets.size())
    return invalid_argument("cannot unpack " + std::to_string(parts.size()) + " values into " +
                            std::to_string(s.targets.size()) + " names");
  for (size_t k = 0; k < parts.size(); ++k) assign(s.targets[k], parts[k]);
  return Status::ok();
}

Result<Value> Evaluator::call_macro(const Stmt& m, Array& args, KwArgs& kwargs) {
  if (call_depth_ >= limits_.max_call_depth)
    return out_of_range("macro call depth limit (" + std::to_string(limits_.max_call_depth) + ") exceeded in '" +
                       m.text + "'");
  if (args.size() > m.params.size())
    return invalid_argument("macro '" + m.text + "' takes " + std::to_string(m.params.size()) +
                            " arguments, got " + std::to_string(args.size()));
  std::vector<std::shared_ptr<Scope>> saved = scopes_;
  scopes_.resize(std::min<size_t>(scopes_.size(), 2));
  scopes_.push_back(std::make_shared<Scope>());
  ++call_depth_;
  auto run = [&]() -> Result<Value> {
    for (size_t i = 0; i < m.params.size(); ++i) {
      const auto& [pname, pdefault] = m.params[i];
      Value v = Value::undefined(pname);
      bool set = false;
      if (i < args.size()) {
        v = args[i];
        set = true;
      }
      for (auto& [k, kv] : kwargs) {
        if (k != pname) continue;
        if (set) return invalid_argument("macro '" + m.text + "' got multiple values for '" + k + "'");
        v = kv;
        set = true;
      }
      if (!set && pdefault) {
        CHIMERA_ASSIGN_OR_RETURN(v, eval(*pdefault));
      }
      assign(pname, std::move(v));
    }
    for (auto& [k, kv] : kwargs) {
      bool known = false;
      for (const auto& p : m.params) known = known || p.first == k;
      if (!known) return invalid_argument("macro '" + m.text + "' got an unexpected keyword argument '" + k + "'");
    }
    CHIMERA_ASSIGN_OR_RETURN(std::string text, capture(m.body));
    return Value::string(std::move(text));
  };
  auto r = run();
  --call_depth_;
  scopes_ = std::move(saved);
  return r;
}

Result<Value> Evaluator::call(const Value& fn, Array& args, KwArgs& kwargs) {
  if (fn.is_undefined()) return undefined_error(fn);
  if (!fn.is_function()) return invalid_argument(std::string("'") + fn.type_name() + "' object is not callable");
  return fn.fn().fn(*this, args, kwargs);
}

Status Evaluator::eval_args(const Expr& e, size_t first, Array& args, KwArgs& kwargs) {
  for (size_t i = first; i < e.args.size(); ++i) {
    CHIMERA_ASSIGN_OR_RETURN(Value v, eval(*e.args[i]));
    args.push_back(std::move(v));
  }
  for (const auto& [k, x] : e.kwargs) {
    CHIMERA_ASSIGN_OR_RETURN(Value v, eval(*x));
    kwargs.emplace_back(k, std::move(v));
  }
  return Status::ok();
}

Result<Value> Evaluator::eval_call(const Expr& e) {
  const Expr& callee = *e.args[0];
  Array args;
  KwArgs kwargs;
  if (callee.kind == ExprKind::kGetAttr) {
    CHIMERA_ASSIGN_OR_RETURN(Value obj, eval(*callee.args[0]));
    if (obj.is_undefined()) return undefined_error(obj);
    Value attr = get_attr(obj, callee.name);
    if (!attr.is_function()) {
      CHIMERA_RETURN_IF_ERROR(eval_args(e, 1, args, kwargs));
      bool found = false;
      CHIMERA_ASSIGN_OR_RETURN(Value r, call_method(*this, obj, callee.name, args, kwargs, &found));
      if (found) return r;
      return invalid_argument(std::string("'") + obj.type_name() + "' object has no method '" + callee.name + "'");
    }
    CHIMERA_RETURN_IF_ERROR(eval_args(e, 1, args, kwargs));
    return call(attr, args, kwargs);
  }
  CHIMERA_ASSIGN_OR_RETURN(Value fn, eval(callee));
  CHIMERA_RETURN_IF_ERROR(eval_args(e, 1, args, kwargs));
  return call(fn, args, kwargs);
}

Result<Value> Evaluator::eval_subscript(const Expr& e) {
  CHIMERA_ASSIGN_OR_RETURN(Value obj, eval(*e.args[0]));
  if (obj.is_undefined()) return undefined_error(obj);
  if (e.kind == ExprKind::kGetAttr) return get_attr(obj, e.name);
  if (e.kind == ExprKind::kGetItem) {
    CHIMERA_ASSIGN_OR_RETURN(Value idx, eval(*e.args[1]));
    return get_item(obj, idx);
  }
  Value parts[3];
  for (int k = 0; k < 3; ++k) {
    if (e.args[(size_t)k + 1]) {
      CHIMERA_ASSIGN_OR_RETURN(parts[k], eval(*e.args[(size_t)k + 1]));
    }
  }
  return slice(obj, parts[0], parts[1], parts[2]);
}

Result<Value> Evaluator::eval_binary(const Expr& e) {
  CHIMERA_ASSIGN_OR_RETURN(Value a, eval(*e.args[0]));
  if (e.op == Op::kAnd) {
    if (!a.truthy()) return a;
    return eval(*e.args[1]);
  }
  if (e.op == Op::kOr) {
    if (a.truthy()) return a;
    return eval(*e.args[1]);
  }
  CHIMERA_ASSIGN_OR_RETURN(Value b, eval(*e.args[1]));
  switch (e.op) {
    case Op::kEq: return Value::boolean(values_equal(a, b));
    case Op::kNe: return Value::boolean(!values_equal(a, b));
    case Op::kLt: {
      CHIMERA_ASSIGN_OR_RETURN(bool r, values_less(a, b));
      return Value::boolean(r);
    }
    case Op::kGt: {
      CHIMERA_ASSIGN_OR_RETURN(bool r, values_less(b, a));
      return Value::boolean(r);
    }
    case Op::kLe: {
      CHIMERA_ASSIGN_OR_RETURN(bool r, values_less(b, a));
      return Value::boolean(!r);
    }
    case Op::kGe: {
      CHIMERA_ASSIGN_OR_RETURN(bool r, values_less(a, b));
      return Value::boolean(!r);
    }
    case Op::kIn:
    case Op::kNotIn: {
      CHIMERA_ASSIGN_OR_RETURN(bool r, contains(b, a));
      return Value::boolean(e.op == Op::kIn ? r : !r);
    }
    default: return binary_op(e.op, a, b, limits_.max_output_bytes);
  }
}

Result<Value> Evaluator::eval(const Expr& e) {
  CHIMERA_RETURN_IF_ERROR(step());
  switch (e.kind) {
    case ExprKind::kLiteral: return e.literal;
    case ExprKind::kName: return lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      Array items;
      for (const ExprPtr& x : e.args) {
        CHIMERA_ASSIGN_OR_RETURN(Value v, eval(*x));
        items.push_back(std::move(v));
      }
      return Value::array(std::move(items));
    }
    case ExprKind::kDict: {
      auto obj = std::make_shared<Object>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        CHIMERA_ASSIGN_OR_RETURN(Value k, eval(*e.args[i]));
        CHIMERA_ASSIGN_OR_RETURN(Value v, eval(*e.args[i + 1]));
        if (!k.is_string()) return invalid_argument("dict keys must be strings");
        obj->set(k.as_string(), std::move(v));
      }
      return Value::object(std::move(obj));
    }
    case ExprKind::kGetAttr:
    case ExprKind::kGetItem:
    case ExprKind::kSlice: return eval_subscript(e);
    case ExprKind::kCall: return eval_call(e);
    case ExprKind::kFilter: {
      CHIMERA_ASSIGN_OR_RETURN(Value v, eval(*e.args[0]));
      Array args;
      KwArgs kwargs;
      CHIMERA_RETURN_IF_ERROR(eval_args(e, 1, args, kwargs));
      return apply_filter(*this, e.name, v, args, kwargs);
    }
    case ExprKind::kTest: {
      CHIMERA_ASSIGN_OR_RETURN(Value v, eval(*e.args[0]));
      Array args;
      KwArgs kwargs;
      CHIMERA_RETURN_IF_ERROR(eval_args(e, 1, args, kwargs));
      CHIMERA_ASSIGN_OR_RETURN(bool r, apply_test(*this, e.name, v, args));
      return Value::boolean(e.negated ? !r : r);
    }
    case ExprKind::kUnary: {
      CHIMERA_ASSIGN_OR_RETURN(Value v, eval(*e.args[0]));
      if (e.op == Op::kNot) return Value::boolean(!v.truthy());
      if (!v.is_number()) {
        if (v.is_undefined()) return undefined_error(v);
        return invalid_argument(std::string("bad operand type for unary ") + (e.op == Op::kNeg ? "-" : "+") + ": '" +
                                v.type_name() + "'");
      }
      if (e.op == Op::kPos) return v.is_float() ? v : Value::integer(v.as_int());
      if (v.is_float()) return Value::floating(-v.as_float());
      if (v.as_int() == INT64_MIN) return out_of_range("integer overflow");
      return Value::integer(-v.as_int());
    }
    case ExprKind::kBinary: return eval_binary(e);
    case ExprKind::kCondExpr: {
      CHIMERA_ASSIGN_OR_RETURN(Value c, eval(*e.args[0]));
      if (c.truthy()) return eval(*e.args[1]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined();
    }
  }
  return internal_error("unknown expression kind");
}

}  // namespace chimera::tokenizer::jinja
