// Jinja parser: token stream -> statement tree, with Jinja2's operator
// precedence (conditional < or < and < not < comparisons < + - < ~ < * / // %
// < ** < unary; filters and tests bind to the primary before any operator).
// Invariants: unknown or unbalanced tags and malformed expressions return an
// error naming the line; expression/statement nesting is bounded (kMaxDepth)
// so a hostile template cannot overflow the stack.
#pragma once

#include <vector>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace chimera::tokenizer::jinja {

inline constexpr int kMaxParseDepth = 200;

Result<Body> parse(const std::vector<Token>& tokens);

}  // namespace chimera::tokenizer::jinja
