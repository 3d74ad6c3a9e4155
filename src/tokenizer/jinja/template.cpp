// Template facade: lex + parse (+ check that every filter and test named in
// the template exists, as jinja2 does at compile time, so an unsupported
// template fails when the model loads rather than at the first chat), then a
// fresh Evaluator per render.
#include "tokenizer/jinja/template.h"

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser.h"

namespace chimera::tokenizer::jinja {
namespace {

Status check_names(const Expr& e) {
  if (e.kind == ExprKind::kFilter && !is_known_filter(e.name))
    return invalid_argument("template error at line " + std::to_string(e.line) + ": unknown filter '" + e.name + "'");
  if (e.kind == ExprKind::kTest && !is_known_test(e.name))
    return invalid_argument("template error at line " + std::to_string(e.line) + ": unknown test '" + e.name + "'");
  for (const ExprPtr& a : e.args)
    if (a) CHIMERA_RETURN_IF_ERROR(check_names(*a));
  for (const auto& kv : e.kwargs) CHIMERA_RETURN_IF_ERROR(check_names(*kv.second));
  return Status::ok();
}

Status check_names(const Body& body) {
  for (const StmtPtr& s : body) {
    for (const Expr* e : {s->expr.get(), s->cond.get()})
      if (e) CHIMERA_RETURN_IF_ERROR(check_names(*e));
    for (const auto& [cond, b] : s->branches) {
      CHIMERA_RETURN_IF_ERROR(check_names(*cond));
      CHIMERA_RETURN_IF_ERROR(check_names(b));
    }
    for (const auto& p : s->params)
      if (p.second) CHIMERA_RETURN_IF_ERROR(check_names(*p.second));
    CHIMERA_RETURN_IF_ERROR(check_names(s->body));
    CHIMERA_RETURN_IF_ERROR(check_names(s->else_body));
  }
  return Status::ok();
}

}  // namespace

Result<Template> Template::parse(const std::string& source, const LexOptions& options) {
  CHIMERA_ASSIGN_OR_RETURN(std::vector<Token> tokens, lex(source, options));
  CHIMERA_ASSIGN_OR_RETURN(Body body, jinja::parse(tokens));
  CHIMERA_RETURN_IF_ERROR(check_names(body));
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(body));
  return t;
}

Result<std::string> Template::render(Scope vars, const Scope& extra_globals, const Limits& limits) const {
  auto globals = std::make_shared<Scope>();
  add_builtin_globals(*globals);
  for (const auto& [k, v] : extra_globals) (*globals)[k] = v;
  Evaluator ev(limits, std::move(globals));
  return ev.render(*body_, std::move(vars));
}

}  // namespace chimera::tokenizer::jinja
