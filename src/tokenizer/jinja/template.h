// Public entry point of the Jinja interpreter: parse once, render many times.
// Globals available to every render: range, namespace, dict, raise_exception
// (plus whatever the caller adds, e.g. strftime_now). Whitespace options
// default to what transformers uses (trim_blocks, lstrip_blocks).
// Invariants: a Template is immutable and cheap to copy (shared AST); render
// is re-entrant (all mutable state lives in a per-call Evaluator) and bounded
// by Limits.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/lexer.h"

namespace chimera::tokenizer::jinja {

class Template {
 public:
  static Result<Template> parse(const std::string& source, const LexOptions& options = {});

  // `vars`: the template's variables; `extra_globals`: added to the builtins.
  Result<std::string> render(Scope vars, const Scope& extra_globals = {}, const Limits& limits = {}) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace chimera::tokenizer::jinja
