// --grammar TEXT, --grammar-file FILE, --json-schema TEXT|@FILE for `run` and
// `chat`: at most one of them; resolve() compiles it against the model's
// vocabulary (null when none was given). Errors name the flag.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/status.h"
#include "runtime/grammar/grammar_constraint.h"
#include "tokenizer/tokenizer.h"

namespace chimera::cli {

struct GrammarCliOptions {
  std::string grammar, grammar_file, json_schema;
  void add_to(CLI::App* app);
  bool given() const { return !grammar.empty() || !grammar_file.empty() || !json_schema.empty(); }
  Result<std::shared_ptr<runtime::grammar::CompiledGrammar>> resolve(const tokenizer::Tokenizer& tok) const;
};

}  // namespace chimera::cli
