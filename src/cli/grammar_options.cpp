// Grammar flags shared by `run` and `chat` (see grammar_options.h).
#include "cli/grammar_options.h"

#include "cli/common.h"

namespace chimera::cli {

void GrammarCliOptions::add_to(CLI::App* app) {
  app->add_option("--grammar", grammar, "Constrain the output to a GBNF grammar (llama.cpp syntax)");
  app->add_option("--grammar-file", grammar_file, "Read the GBNF grammar from FILE");
  app->add_option("--json-schema", json_schema, "Constrain the output to JSON matching a JSON Schema (TEXT, or @FILE)");
}

Result<std::shared_ptr<runtime::grammar::CompiledGrammar>> GrammarCliOptions::resolve(
    const tokenizer::Tokenizer& tok) const {
  using runtime::grammar::GrammarSource;
  const int n = !grammar.empty() + !grammar_file.empty() + !json_schema.empty();
  if (n == 0) return std::shared_ptr<runtime::grammar::CompiledGrammar>();
  if (n > 1) return invalid_argument("give at most one of --grammar, --grammar-file and --json-schema");
  GrammarSource src;
  std::string flag;
  if (!grammar.empty()) {
    src.text = grammar;
    flag = "--grammar";
  } else if (!grammar_file.empty()) {
    CHIMERA_ASSIGN_OR_RETURN(src.text, read_text_file(grammar_file));
    flag = "--grammar-file";
  } else {
    src.kind = GrammarSource::Kind::kJsonSchema;
    flag = "--json-schema";
    if (json_schema[0] == '@') {
      CHIMERA_ASSIGN_OR_RETURN(src.text, read_text_file(json_schema.substr(1)));
    } else {
      src.text = json_schema;
    }
  }
  auto g = runtime::grammar::CompiledGrammar::compile(src, runtime::grammar::TokenVocab::from_tokenizer(tok));
  if (!g) return g.status().with_context(flag);
  return g;
}

}  // namespace chimera::cli
