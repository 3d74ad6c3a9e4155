// Template facade: lex + parse at construction, fresh Evaluator per render.
#include "tokenizer/jinja/template.h"

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser.h"

namespace chimera::tokenizer::jinja {

Result<Template> Template::parse(const std::string& source, const LexOptions& options) {
  CHIMERA_ASSIGN_OR_RETURN(std::vector<Token> tokens, lex(source, options));
  CHIMERA_ASSIGN_OR_RETURN(Body body, jinja::parse(tokens));
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
