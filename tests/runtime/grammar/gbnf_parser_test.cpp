// GBNF parser: real llama.cpp grammar files (written from their published
// syntax) parse and match what they should; every syntax error reports its
// line and column; left recursion, rules that can never finish and oversized
// repetitions are refused instead of hanging or exploding.
#include <gtest/gtest.h>

#include <string>

#include "grammar_test_util.h"
#include "runtime/grammar/json_schema.h"

namespace chimera::test {
namespace {

using runtime::grammar::parse_gbnf;

const char* const kJsonGbnf = R"G(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)G";

const char* const kArithmeticGbnf = R"G(root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)G";

const char* const kListGbnf = R"G(root ::= item+

# Excludes various line break characters
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
)G";

const char* const kChessGbnf = R"G(# Specifies chess moves as a list in algebraic notation, using PGN conventions

# Force first move to "1. ", then any 1-2 digit number after, relying on model to follow the pattern
root    ::= "1. " move " " move "\n" ([1-9] [0-9]? ". " move " " move "\n")+
move    ::= (pawn | nonpawn | castle) [+#]?

# piece type, optional file/rank, optional capture, dest file & rank
nonpawn ::= [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8]

# optional file & capture, dest file & rank, optional promotion
pawn    ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBKQR])?

castle  ::= "O-O" "-O"?
)G";

TEST(GbnfParser, JsonGrammarFile) {
  auto g = compile_gbnf(kJsonGbnf);
  ASSERT_TRUE(g);
  EXPECT_TRUE(full_match(g, R"({"a": [1, 2.5e3, -0.25, true, null], "b": {"c": "x\"y\u00e9"}})"));
  EXPECT_TRUE(full_match(g, "{}"));
  EXPECT_TRUE(full_match(g, "{\n  \"k\": \"v\"\n}"));
  EXPECT_TRUE(full_match(g, "{\"s\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}"));  // UTF-8 in strings
  EXPECT_FALSE(full_match(g, R"({"a": })"));
  EXPECT_FALSE(full_match(g, R"({"a": 01})"));
  EXPECT_FALSE(full_match(g, R"({'a': 1})"));
  EXPECT_FALSE(full_match(g, "{\"a\": \"\x01\"}"));       // raw control character
  EXPECT_FALSE(full_match(g, "{\"a\": \"\xc3\"}"));       // truncated UTF-8
  EXPECT_FALSE(full_match(g, "{\"a\": \"\xed\xa0\x80\"}"));  // encoded surrogate
  EXPECT_TRUE(prefix_ok(g, R"({"a": [1, )"));
  EXPECT_FALSE(full_match(g, R"({"a": [1, )"));
}

TEST(GbnfParser, ArithmeticGrammarFile) {
  auto g = compile_gbnf(kArithmeticGbnf);
  ASSERT_TRUE(g);
  EXPECT_TRUE(full_match(g, "a+b*(c-1)= x\n"));
  EXPECT_TRUE(full_match(g, "1=2\nfoo_1/3 = ( a )\n"));
  EXPECT_FALSE(full_match(g, "a+=b\n"));
  EXPECT_FALSE(full_match(g, "A=b\n"));
  EXPECT_FALSE(full_match(g, "a=b"));  // needs the newline
}

TEST(GbnfParser, ListGrammarFile) {
  auto g = compile_gbnf(kListGbnf);
  ASSERT_TRUE(g);
  EXPECT_TRUE(full_match(g, "- milk\n- eggs \xe2\x9c\x93\n"));
  EXPECT_FALSE(full_match(g, "- \n"));                      // item+ needs one character
  EXPECT_FALSE(full_match(g, "- a\xe2\x80\xa8" "b\n"));     // U+2028 excluded
  EXPECT_FALSE(full_match(g, "- a\xc2\x85\n"));              // U+0085 excluded
  EXPECT_FALSE(full_match(g, "* a\n"));
}

TEST(GbnfParser, ChessGrammarFile) {
  auto g = compile_gbnf(kChessGbnf);
  ASSERT_TRUE(g);
  EXPECT_TRUE(full_match(g, "1. e4 e5\n2. Nf3 Nc6\n3. Bb5 a6\n4. O-O exd4\n"));
  EXPECT_TRUE(full_match(g, "1. e4 e5\n10. e8=Q+ Kxe8#\n"));
  EXPECT_FALSE(full_match(g, "1. e9 e5\n2. a3 a4\n"));
  EXPECT_FALSE(full_match(g, "1. e4 e5\n"));  // the + group needs one more line
}

TEST(GbnfParser, Syntax) {
  // Repetition forms, escapes, groups, comments, any-char, CRLF line ends.
  auto g = compile_gbnf("root ::= a{2} b{1,} c{,2} d{1,3} \".\" # tail comment\r\n"
                        "a ::= \"\\x41\"\r\nb ::= [\\u0042]\r\nc ::= \"\\U00000043\"\r\nd ::= (\"d\" | \"\\t\")\r\n");
  ASSERT_TRUE(g);
  EXPECT_TRUE(full_match(g, "AABd."));
  EXPECT_TRUE(full_match(g, "AABBBCC\td\t."));
  EXPECT_FALSE(full_match(g, "ABd."));
  EXPECT_FALSE(full_match(g, "AABCCCd."));
  EXPECT_FALSE(full_match(g, "AABdddd."));
  auto any = compile_gbnf("root ::= . . [^a-z]\n");
  ASSERT_TRUE(any);
  EXPECT_TRUE(full_match(any, "\xe2\x82\xac" "x" "Q"));
  EXPECT_TRUE(full_match(any, "\xf0\x9f\x98\x80" "\x7f" "\xc3\xa9"));
  EXPECT_FALSE(full_match(any, "abc"));
  // Literal repetition applies to the whole literal; a nullable rule repeated.
  auto lit = compile_gbnf("root ::= \"ab\"+ x*\nx ::= \"c\"?\n");
  ASSERT_TRUE(lit);
  EXPECT_TRUE(full_match(lit, "ababcc"));
  EXPECT_FALSE(full_match(lit, "aba"));
}

void expect_error(const std::string& text, const std::string& what, const std::string& where = "") {
  auto r = parse_gbnf(text);
  ASSERT_FALSE(r.is_ok()) << text;
  EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  if (!where.empty()) {
    EXPECT_NE(r.status().message().find(where), std::string::npos) << r.status().message();
  }
}

TEST(GbnfParser, ErrorsHaveLineAndColumn) {
  expect_error("root ::= \"abc", "unterminated string literal", "line 1, column 14");
  expect_error("root ::= x\nx ::= \"a\" ]\n", "unexpected ']'", "line 2, column 11");
  expect_error("root ::= foo\n", "undefined rule 'foo'", "line 1, column 10");
  expect_error("a ::= \"x\"\n", "no 'root' rule");
  expect_error("root ::= \"a\"\nroot ::= \"b\"\n", "defined twice", "line 2, column 1");
  expect_error("root ::= \"a\" <[12]>\n", "token references", "line 1, column 14");
  expect_error("root ::= \"\\q\"\n", "unknown escape", "line 1, column 11");
  expect_error("root ::= [z-a]\n", "reversed", "line 1, column 13");
  expect_error("root ::= [abc\n", "unterminated character class", "line 1, column 10");
  expect_error("root ::= (\"a\" | \"b\"\n", "unclosed '('", "line 1, column 10");
  expect_error("root ::= * \"a\"\n", "must follow an item", "line 1, column 10");
  expect_error("root ::= \"a\"{3,2}\n", "m <= n", "line 1, column 13");
  expect_error("root = \"a\"\n", "expecting '::='", "line 1, column 6");
  expect_error("root ::= \"\\x4\"\n", "hex digits", "line 1, column 11");
  expect_error("", "empty");
}

TEST(GbnfParser, PathologicalGrammarsAreRefused) {
  expect_error("root ::= root \"a\" | \"b\"\n", "left recursion");
  expect_error("root ::= x root \"a\" | \"b\"\nx ::= \"c\"?\n", "left recursion");  // through a nullable rule
  expect_error("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"\n", "left recursion");
  expect_error("root ::= \"a\" root\n", "can never finish");
  expect_error("root ::= \"a\"{100001}\n", "too large");
  expect_error("root ::= [^\\x00-\\U0010FFFF]\n", "matches nothing");
}

TEST(GbnfParser, AmbiguousGrammarStaysBounded) {
  // Exponentially many parse trees; the stack sets are deduplicated so each
  // step stays small and the matcher answers quickly.
  auto g = compile_gbnf("root ::= (\"a\" | \"a\" | x)* \"b\"\nx ::= \"a\"? \"a\"?\n");
  ASSERT_TRUE(g);
  EXPECT_TRUE(full_match(g, std::string(200, 'a') + "b"));
  EXPECT_FALSE(full_match(g, std::string(200, 'a') + "c"));
  EXPECT_LT(g->space().n_states(), 50u);
}

}  // namespace
}  // namespace chimera::test

namespace chimera::test {
namespace {

TEST(GbnfParser, RandomInputNeverCrashes) {
  // Random texts over the GBNF alphabet: every one is parsed or refused with
  // a message, and accepted grammars match random bytes without trouble.
  const std::string alphabet = "root ::= a|b()[]^-*+?{},.\"\\x41u\n#  09az";
  std::mt19937_64 rng(42);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = "root ::= ";
    const size_t len = 1 + rng() % 40;
    for (size_t k = 0; k < len; ++k) text += alphabet[rng() % alphabet.size()];
    auto g = CompiledGrammar::compile({GrammarSource::Kind::kGbnf, text}, byte_vocab());
    if (!g.is_ok()) {
      EXPECT_FALSE(g.status().message().empty());
      continue;
    }
    ++ok;
    GrammarMatcher m(*g);
    std::vector<uint64_t> bits;
    for (int step = 0; step < 8; ++step) {
      auto n = m.fill_mask(bits, 257);
      if (!n.is_ok() || *n == 0) break;
      m.accept_bytes(std::string(1, (char)("ab()AZaz"[rng() % 8])));
    }
  }
  EXPECT_GT(ok, 10);
  // Deep nesting is refused, not a stack overflow.
  auto deep = runtime::grammar::parse_gbnf("root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')'));
  ASSERT_FALSE(deep.is_ok());
  EXPECT_NE(deep.status().message().find("nest too deeply"), std::string::npos) << deep.status().message();
  std::string schema;
  for (int i = 0; i < 5000; ++i) schema += R"({"type":"array","items":)";
  schema += "{}";
  for (int i = 0; i < 5000; ++i) schema += "}";
  auto s = runtime::grammar::json_schema_to_gbnf(schema);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("nests too deeply"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace chimera::test
