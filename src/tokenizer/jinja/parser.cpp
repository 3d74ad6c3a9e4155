// Recursive-descent Jinja parser (statements and expressions). See parser.h.
#include "tokenizer/jinja/parser.h"

#include <initializer_list>
#include <string>

namespace chimera::tokenizer::jinja {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  Result<Body> parse_template() {
    std::string end;
    CHIMERA_ASSIGN_OR_RETURN(Body body, parse_body({}, &end));
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return t_[pos_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().kind == TokKind::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == TokKind::kName && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    advance();
    return true;
  }
  Status error(const std::string& msg) const {
    return invalid_argument("template syntax error at line " + std::to_string(cur().line) + ": " + msg);
  }
  std::string describe() const {
    switch (cur().kind) {
      case TokKind::kEof: return "end of template";
      case TokKind::kBlockEnd: return "end of statement block";
      case TokKind::kVarEnd: return "end of print statement";
      case TokKind::kString: return "string literal";
      default: return "'" + cur().text + "'";
    }
  }
  Status expect_op(const char* op) {
    if (skip_op(op)) return Status::ok();
    return error(std::string("expected '") + op + "', got " + describe());
  }
  Status expect_block_end() {
    if (cur().kind == TokKind::kBlockEnd) {
      advance();
      return Status::ok();
    }
    return error("expected end of statement block, got " + describe());
  }
  Result<std::string> expect_name() {
    if (cur().kind != TokKind::kName) return error("expected a name, got " + describe());
    std::string n = cur().text;
    advance();
    return n;
  }

  struct DepthGuard {
    explicit DepthGuard(int& d) : d_(d) { ++d_; }
    ~DepthGuard() { --d_; }
    int& d_;
  };
#define JINJA_DEPTH_CHECK()                                    \
  DepthGuard _guard(depth_);                                   \
  if (depth_ > kMaxParseDepth) return error("template nested too deeply")

  ExprPtr node(ExprKind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // ---- statements ----
  // Parses until a block tag whose name is in `ends` (consumed up to and
  // including the name) or end of template (only when `ends` is empty).
  Result<Body> parse_body(std::initializer_list<const char*> ends, std::string* end_found) {
    JINJA_DEPTH_CHECK();
    Body body;
    while (true) {
      const Token& tk = cur();
      if (tk.kind == TokKind::kEof) {
        if (ends.size() == 0) return body;
        std::string want;
        for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
        return error("unexpected end of template, expected " + want);
      }
      if (tk.kind == TokKind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = tk.line;
        s->text = tk.text;
        body.push_back(std::move(s));
        advance();
      } else if (tk.kind == TokKind::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = tk.line;
        advance();
        CHIMERA_ASSIGN_OR_RETURN(s->expr, parse_expression());
        if (cur().kind != TokKind::kVarEnd) return error("expected end of print statement, got " + describe());
        advance();
        body.push_back(std::move(s));
      } else if (tk.kind == TokKind::kBlockBegin) {
        advance();
        if (cur().kind != TokKind::kName) return error("expected a statement name, got " + describe());
        std::string name = cur().text;
        for (const char* e : ends) {
          if (name == e) {
            advance();
            *end_found = name;
            return body;
          }
        }
        CHIMERA_ASSIGN_OR_RETURN(StmtPtr s, parse_statement());
        body.push_back(std::move(s));
      } else {
        return error("unexpected " + describe());
      }
    }
  }

  Result<StmtPtr> parse_statement() {
    std::string name = cur().text;
    int line = cur().line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    advance();
    std::string end;
    if (name == "if") {
      s->kind = StmtKind::kIf;
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr cond, parse_expression());
      while (true) {
        CHIMERA_RETURN_IF_ERROR(expect_block_end());
        CHIMERA_ASSIGN_OR_RETURN(Body body, parse_body({"elif", "else", "endif"}, &end));
        s->branches.emplace_back(std::move(cond), std::move(body));
        if (end == "elif") {
          CHIMERA_ASSIGN_OR_RETURN(cond, parse_expression());
          continue;
        }
        if (end == "else") {
          CHIMERA_RETURN_IF_ERROR(expect_block_end());
          CHIMERA_ASSIGN_OR_RETURN(s->else_body, parse_body({"endif"}, &end));
        }
        break;
      }
    } else if (name == "for") {
      s->kind = StmtKind::kFor;
      do {
        CHIMERA_ASSIGN_OR_RETURN(std::string t, expect_name());
        s->targets.push_back(t);
      } while (skip_op(","));
      if (!skip_name("in")) return error("expected 'in' in for loop, got " + describe());
      CHIMERA_ASSIGN_OR_RETURN(s->expr, parse_or());
      if (skip_name("if")) {
        CHIMERA_ASSIGN_OR_RETURN(s->cond, parse_expression());
      }
      if (skip_name("recursive")) return error("recursive for loops are not supported");
      CHIMERA_RETURN_IF_ERROR(expect_block_end());
      CHIMERA_ASSIGN_OR_RETURN(s->body, parse_body({"else", "endfor"}, &end));
      if (end == "else") {
        CHIMERA_RETURN_IF_ERROR(expect_block_end());
        CHIMERA_ASSIGN_OR_RETURN(s->else_body, parse_body({"endfor"}, &end));
      }
    } else if (name == "set") {
      CHIMERA_ASSIGN_OR_RETURN(std::string first, expect_name());
      s->targets.push_back(first);
      if (skip_op(".")) {
        CHIMERA_ASSIGN_OR_RETURN(s->attr, expect_name());
      } else {
        while (skip_op(",")) {
          CHIMERA_ASSIGN_OR_RETURN(std::string t, expect_name());
          s->targets.push_back(t);
        }
      }
      if (cur().kind == TokKind::kBlockEnd && s->attr.empty() && s->targets.size() == 1) {
        s->kind = StmtKind::kSetBlock;
        s->text = first;
        advance();
        CHIMERA_ASSIGN_OR_RETURN(s->body, parse_body({"endset"}, &end));
        return finish(std::move(s));
      }
      s->kind = StmtKind::kSet;
      CHIMERA_RETURN_IF_ERROR(expect_op("="));
      CHIMERA_ASSIGN_OR_RETURN(s->expr, parse_tuple());
      CHIMERA_RETURN_IF_ERROR(expect_block_end());
      return s;
    } else if (name == "macro") {
      s->kind = StmtKind::kMacro;
      CHIMERA_ASSIGN_OR_RETURN(s->text, expect_name());
      CHIMERA_RETURN_IF_ERROR(expect_op("("));
      while (!is_op(")")) {
        CHIMERA_ASSIGN_OR_RETURN(std::string p, expect_name());
        ExprPtr def;
        if (skip_op("=")) {
          CHIMERA_ASSIGN_OR_RETURN(def, parse_expression());
        }
        s->params.emplace_back(p, std::move(def));
        if (!skip_op(",")) break;
      }
      CHIMERA_RETURN_IF_ERROR(expect_op(")"));
      CHIMERA_RETURN_IF_ERROR(expect_block_end());
      CHIMERA_ASSIGN_OR_RETURN(s->body, parse_body({"endmacro"}, &end));
    } else if (name == "break" || name == "continue") {
      s->kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      CHIMERA_RETURN_IF_ERROR(expect_block_end());
      return s;
    } else if (name == "generation") {
      s->kind = StmtKind::kBlock;
      CHIMERA_RETURN_IF_ERROR(expect_block_end());
      CHIMERA_ASSIGN_OR_RETURN(s->body, parse_body({"endgeneration"}, &end));
    } else {
      pos_ -= 1;
      if (name.rfind("end", 0) == 0 || name == "elif" || name == "else")
        return error("unexpected '" + name + "' (no matching opening tag)");
      return error("unknown or unsupported tag '" + name + "'");
    }
    return finish(std::move(s));
  }

  // The end tag's name was consumed; accept an optional repeated name
  // (`{% endmacro name %}`) and the closing delimiter.
  Result<StmtPtr> finish(StmtPtr s) {
    if (cur().kind == TokKind::kName) advance();
    CHIMERA_RETURN_IF_ERROR(expect_block_end());
    return s;
  }

  // ---- expressions ----
  Result<ExprPtr> parse_tuple() {
    int line = cur().line;
    CHIMERA_ASSIGN_OR_RETURN(ExprPtr first, parse_expression());
    if (!is_op(",")) return first;
    auto t = node(ExprKind::kTuple, line);
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().kind == TokKind::kBlockEnd || cur().kind == TokKind::kVarEnd) break;
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr e, parse_expression());
      t->args.push_back(std::move(e));
    }
    return t;
  }

  Result<ExprPtr> parse_expression() {
    JINJA_DEPTH_CHECK();
    int line = cur().line;
    CHIMERA_ASSIGN_OR_RETURN(ExprPtr e, parse_or());
    while (skip_name("if")) {
      auto c = node(ExprKind::kCondExpr, line);
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr cond, parse_or());
      ExprPtr otherwise;
      if (skip_name("else")) {
        CHIMERA_ASSIGN_OR_RETURN(otherwise, parse_expression());
      }
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(Op op, ExprPtr l, ExprPtr r, int line) {
    auto b = node(ExprKind::kBinary, line);
    b->op = op;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  Result<ExprPtr> parse_or() {
    CHIMERA_ASSIGN_OR_RETURN(ExprPtr l, parse_and());
    while (is_name("or")) {
      int line = cur().line;
      advance();
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr r, parse_and());
      l = binary(Op::kOr, std::move(l), std::move(r), line);
    }
    return l;
  }

  Result<ExprPtr> parse_and() {
    CHIMERA_ASSIGN_OR_RETURN(ExprPtr l, parse_not());
    while (is_name("and")) {
      int line = cur().line;
      advance();
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr r, parse_not());
      l = binary(Op::kAnd, std::move(l), std::move(r), line);
    }
    return l;
  }

  Result<ExprPtr> parse_not() {
    JINJA_DEPTH_CHECK();
    if (is_name("not")) {
      auto n = node(ExprKind::kUnary, cur().line);
      advance();
      n->op = Op::kNot;
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr x, parse_not());
      n->args.push_back(std::move(x));
      return n;
    }
    return parse_compare();
  }

  Result<ExprPtr> parse_compare() {
    CHIMERA_ASSIGN_OR_RETURN(ExprPtr l, parse_math1());
    ExprPtr result;
    while (true) {
      int line = cur().line;
      Op op = Op::kNone;
      if (cur().kind == TokKind::kOp) {
        const std::string& o = cur().text;
        if (o == "==") op = Op::kEq;
        else if (o == "!=") op = Op::kNe;
        else if (o == "<") op = Op::kLt;
        else if (o == "<=") op = Op::kLe;
        else if (o == ">") op = Op::kGt;
        else if (o == ">=") op = Op::kGe;
      } else if (is_name("in")) {
        op = Op::kIn;
      } else if (is_name("not") && peek().kind == TokKind::kName && peek().text == "in") {
        op = Op::kNotIn;
        advance();
      }
      if (op == Op::kNone) break;
      advance();
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr r, parse_math1());
      // Chained comparisons (a < b < c) would need the middle operand twice; chat templates
      // do not use them, so they are rejected rather than silently mis-evaluated.
      if (result) return error("chained comparisons are not supported");
      result = binary(op, std::move(l), std::move(r), line);
    }
    return result ? std::move(result) : std::move(l);
  }

  Result<ExprPtr> parse_math1() {
    CHIMERA_ASSIGN_OR_RETURN(ExprPtr l, parse_concat());
    while (is_op("+") || is_op("-")) {
      Op op = is_op("+") ? Op::kAdd : Op::kSub;
      int line = cur().line;
      advance();
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr r, parse_concat());
      l = binary(op, std::move(l), std::move(r), line);
    }
    return l;
  }

  Result<ExprPtr> parse_concat() {
    CHIMERA_ASSIGN_OR_RETURN(ExprPtr l, parse_math2());
    while (is_op("~")) {
      int line = cur().line;
      advance();
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr r, parse_math2());
      l = binary(Op::kConcat, std::move(l), std::move(r), line);
    }
    return l;
  }

  Result<ExprPtr> parse_math2() {
    CHIMERA_ASSIGN_OR_RETURN(ExprPtr l, parse_pow());
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      Op op = is_op("*") ? Op::kMul : is_op("/") ? Op::kDiv : is_op("//") ? Op::kFloorDiv : Op::kMod;
      int line = cur().line;
      advance();
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr r, parse_pow());
      l = binary(op, std::move(l), std::move(r), line);
    }
    return l;
  }

  Result<ExprPtr> parse_pow() {
    CHIMERA_ASSIGN_OR_RETURN(ExprPtr l, parse_unary(true));
    while (is_op("**")) {
      int line = cur().line;
      advance();
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr r, parse_unary(true));
      l = binary(Op::kPow, std::move(l), std::move(r), line);
    }
    return l;
  }

  Result<ExprPtr> parse_unary(bool with_filter) {
    JINJA_DEPTH_CHECK();
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      auto u = node(ExprKind::kUnary, cur().line);
      u->op = is_op("-") ? Op::kNeg : Op::kPos;
      advance();
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr x, parse_unary(false));
      u->args.push_back(std::move(x));
      e = std::move(u);
    } else {
      CHIMERA_ASSIGN_OR_RETURN(e, parse_primary());
    }
    CHIMERA_ASSIGN_OR_RETURN(e, parse_postfix(std::move(e)));
    if (with_filter) {
      CHIMERA_ASSIGN_OR_RETURN(e, parse_filters(std::move(e)));
    }
    return e;
  }

  Result<ExprPtr> parse_primary() {
    JINJA_DEPTH_CHECK();
    const Token& tk = cur();
    int line = tk.line;
    if (tk.kind == TokKind::kName) {
      std::string n = tk.text;
      advance();
      auto e = node(ExprKind::kLiteral, line);
      if (n == "true" || n == "True") e->literal = Value::boolean(true);
      else if (n == "false" || n == "False") e->literal = Value::boolean(false);
      else if (n == "none" || n == "None") e->literal = Value::none();
      else {
        e->kind = ExprKind::kName;
        e->name = n;
      }
      return e;
    }
    if (tk.kind == TokKind::kString) {
      std::string s;
      while (cur().kind == TokKind::kString) {
        s += cur().text;
        advance();
      }
      auto e = node(ExprKind::kLiteral, line);
      e->literal = Value::string(std::move(s));
      return e;
    }
    if (tk.kind == TokKind::kInt || tk.kind == TokKind::kFloat) {
      auto e = node(ExprKind::kLiteral, line);
      e->literal = tk.kind == TokKind::kInt ? Value::integer(tk.int_value) : Value::floating(tk.float_value);
      advance();
      return e;
    }
    if (skip_op("(")) {
      if (skip_op(")")) return node(ExprKind::kTuple, line);
      CHIMERA_ASSIGN_OR_RETURN(ExprPtr first, parse_expression());
      if (skip_op(")")) return first;
      auto t = node(ExprKind::kTuple, line);
      t->args.push_back(std::move(first));
      while (skip_op(",")) {
        if (is_op(")")) break;
        CHIMERA_ASSIGN_OR_RETURN(ExprPtr x, parse_expression());
        t->args.push_back(std::move(x));
      }
      CHIMERA_RETURN_IF_ERROR(expect_op(")"));
      return t;
    }
    if (skip_op("[")) {
      auto l = node(ExprKind::kList, line);
      while (!is_op("]")) {
        CHIMERA_ASSIGN_OR_RETURN(ExprPtr x, parse_expression());
        l->args.push_back(std::move(x));
        if (!skip_op(",")) break;
      }
      CHIMERA_RETURN_IF_ERROR(expect_op("]"));
      return l;
    }
    if (skip_op("{")) {
      auto d = node(ExprKind::kDict, line);
      while (!is_op("}")) {
        CHIMERA_ASSIGN_OR_RETURN(ExprPtr k, parse_expression());
        CHIMERA_RETURN_IF_ERROR(expect_op(":"));
        CHIMERA_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
        d->args.push_back(std::move(k));
        d->args.push_back(std::move(v));
        if (!skip_op(",")) break;
      }
      CHIMERA_RETURN_IF_ERROR(expect_op("}"));
      return d;
    }
    return error("unexpected " + describe());
  }

  Status parse_call_args(Expr& call) {
    // '(' already consumed.
    while (!is_op(")")) {
      if (cur().kind == TokKind::kName && peek().kind == TokKind::kOp && peek().text == "=") {
        std::string k = cur().text;
        advance();
        advance();
        CHIMERA_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
        call.kwargs.emplace_back(k, std::move(v));
      } else {
        if (!call.kwargs.empty()) return error("positional argument follows keyword argument");
        CHIMERA_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
        call.args.push_back(std::move(v));
      }
      if (!skip_op(",")) break;
    }
    return expect_op(")");
  }

  Result<ExprPtr> parse_postfix(ExprPtr e) {
    int guard = 0;
    while (true) {
      if (++guard > kMaxParseDepth) return error("expression too long");
      int line = cur().line;
      if (skip_op(".")) {
        if (cur().kind == TokKind::kInt) {
          auto g = node(ExprKind::kGetItem, line);
          auto idx = node(ExprKind::kLiteral, line);
          idx->literal = Value::integer(cur().int_value);
          advance();
          g->args.push_back(std::move(e));
          g->args.push_back(std::move(idx));
          e = std::move(g);
          continue;
        }
        CHIMERA_ASSIGN_OR_RETURN(std::string n, expect_name());
        auto g = node(ExprKind::kGetAttr, line);
        g->name = n;
        g->args.push_back(std::move(e));
        e = std::move(g);
      } else if (skip_op("[")) {
        ExprPtr parts[3];
        bool is_slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!is_op(":") && !is_op("]")) {
            CHIMERA_ASSIGN_OR_RETURN(parts[k], parse_expression());
          }
          if (k < 2 && skip_op(":")) {
            is_slice = true;
            continue;
          }
          break;
        }
        CHIMERA_RETURN_IF_ERROR(expect_op("]"));
        auto g = node(is_slice ? ExprKind::kSlice : ExprKind::kGetItem, line);
        g->args.push_back(std::move(e));
        if (is_slice) {
          for (auto& p : parts) g->args.push_back(std::move(p));
        } else {
          if (!parts[0]) return error("empty subscript");
          g->args.push_back(std::move(parts[0]));
        }
        e = std::move(g);
      } else if (skip_op("(")) {
        auto c = node(ExprKind::kCall, line);
        c->args.push_back(std::move(e));
        CHIMERA_RETURN_IF_ERROR(parse_call_args(*c));
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  bool starts_test_arg() const {
    switch (cur().kind) {
      case TokKind::kString:
      case TokKind::kInt:
      case TokKind::kFloat: return true;
      case TokKind::kName:
        for (const char* kw : {"else", "or", "and", "if", "in", "is", "not"})
          if (cur().text == kw) return false;
        return true;
      case TokKind::kOp: return cur().text == "[" || cur().text == "{";
      default: return false;
    }
  }

  Result<std::string> dotted_name() {
    CHIMERA_ASSIGN_OR_RETURN(std::string n, expect_name());
    while (is_op(".") && peek().kind == TokKind::kName) {
      advance();
      n += "." + cur().text;
      advance();
    }
    return n;
  }

  Result<ExprPtr> parse_filters(ExprPtr e) {
    int guard = 0;
    while (true) {
      if (++guard > kMaxParseDepth) return error("expression too long");
      int line = cur().line;
      if (skip_op("|")) {
        auto f = node(ExprKind::kFilter, line);
        CHIMERA_ASSIGN_OR_RETURN(f->name, dotted_name());
        f->args.push_back(std::move(e));
        if (skip_op("(")) CHIMERA_RETURN_IF_ERROR(parse_call_args(*f));
        e = std::move(f);
      } else if (skip_name("is")) {
        auto t = node(ExprKind::kTest, line);
        t->negated = skip_name("not");
        CHIMERA_ASSIGN_OR_RETURN(t->name, dotted_name());
        t->args.push_back(std::move(e));
        if (skip_op("(")) {
          CHIMERA_RETURN_IF_ERROR(parse_call_args(*t));
        } else if (starts_test_arg()) {
          CHIMERA_ASSIGN_OR_RETURN(ExprPtr a, parse_primary());
          CHIMERA_ASSIGN_OR_RETURN(a, parse_postfix(std::move(a)));
          t->args.push_back(std::move(a));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<Body> parse(const std::vector<Token>& tokens) {
  Parser p(tokens);
  return p.parse_template();
}

}  // namespace chimera::tokenizer::jinja
