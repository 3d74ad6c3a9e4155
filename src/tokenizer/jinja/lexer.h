// Jinja lexer: template source -> flat token stream (text, tag delimiters and
// expression tokens), applying Jinja2's whitespace rules exactly as
// transformers configures them: `-` strip markers, trim_blocks (drop the first
// newline after a block/comment tag), lstrip_blocks (drop spaces/tabs before a
// block/comment tag that starts a line), newline normalisation and removal of
// one trailing newline (keep_trailing_newline=False). Comments are dropped and
// `{% raw %}` bodies become text.
// Invariants: every begin token has a matching end token; the stream ends with
// kEof; `}}`/`%}` inside brackets or string literals never end a tag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace chimera::tokenizer::jinja {

enum class TokKind { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  TokKind kind;
  std::string text;  // text / name / decoded string literal / operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

Result<std::vector<Token>> lex(const std::string& source, const LexOptions& options);

}  // namespace chimera::tokenizer::jinja
