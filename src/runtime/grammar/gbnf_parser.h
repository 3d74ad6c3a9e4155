// GBNF text -> Grammar. The syntax is llama.cpp's (`--grammar`,
// `--grammar-file`), so existing grammar files work:
//
//   name ::= alternatives          one rule per line; `root` is the start rule
//   a | b                          alternatives; newlines only inside ( )
//   "lit\n\x41\u00e9\U0001F600"    string literal (escapes: \n \r \t \\ \" \[ \]
//                                  \xHH \uHHHH \UHHHHHHHH; code points, UTF-8 encoded)
//   [a-z0-9_] [^"\\] [\x00-\x1F]   character class: ranges, negation, same escapes
//   .                              any character
//   ( ... )                        group
//   x* x+ x? x{m} x{m,} x{m,n} x{,n}  repetition of the preceding item
//   # comment                      to the end of the line
//
// Errors say what is wrong with the line and column (1-based) where it is.
// Token references (`<[id]>`) are refused clearly. The result is validated
// (undefined rules, left recursion, rules that can never finish).
#pragma once

#include <string_view>

#include "core/status.h"
#include "runtime/grammar/grammar.h"

namespace chimera::runtime::grammar {

// Repetition counts above this are refused ({m,n} expands to O(n) rules).
constexpr uint64_t kMaxRepetition = 100000;

Result<Grammar> parse_gbnf(std::string_view text);

}  // namespace chimera::runtime::grammar
