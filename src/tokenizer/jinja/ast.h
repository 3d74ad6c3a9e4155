// Syntax tree of a parsed Jinja template: expressions and statements.
// Invariants: nodes own their children (unique_ptr), the tree is immutable
// after parsing and is shared read-only by every render; each node keeps the
// source line for error messages; nesting depth is bounded by the parser.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace chimera::tokenizer::jinja {

enum class ExprKind {
  kLiteral,    // literal
  kName,       // name
  kList,       // args = items
  kTuple,      // args = items
  kDict,       // args = alternating key, value
  kGetAttr,    // args[0] . name
  kGetItem,    // args[0] [ args[1] ]
  kSlice,      // args[0] [ args[1] : args[2] : args[3] ] (null = omitted)
  kCall,       // args[0] ( args[1..] , kwargs )
  kFilter,     // args[0] | name ( args[1..], kwargs )
  kTest,       // args[0] is [not] name ( args[1..] )
  kUnary,      // op args[0]
  kBinary,     // args[0] op args[1]
  kCondExpr,   // args[1] if args[0] else args[2] (args[2] may be null)
};

enum class Op {
  kNone, kNot, kNeg, kPos, kAnd, kOr, kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat,
  kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn,
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  int line = 0;
  Op op = Op::kNone;
  bool negated = false;  // kTest: `is not`
  std::string name;      // kName / kGetAttr / kFilter / kTest
  Value literal;         // kLiteral
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

enum class StmtKind {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // branches (cond, body); else_body
  kFor,       // targets in expr [if cond]: body / else_body
  kSet,       // targets (or target.attr) = expr
  kSetBlock,  // {% set name %}body{% endset %}
  kMacro,     // name(params=defaults): body
  kBreak,
  kContinue,
  kBlock,     // a body rendered in place ({% generation %}, {% filter %} not supported)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                  // kText; kSetBlock / kMacro name
  ExprPtr expr;                      // kOutput, kFor iterable, kSet value
  ExprPtr cond;                      // kFor filter
  std::vector<std::string> targets;  // kFor / kSet names (tuple unpacking)
  std::string attr;                  // kSet: `set ns.attr = ...` (targets[0] = ns)
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro (default may be null)
};

}  // namespace chimera::tokenizer::jinja
