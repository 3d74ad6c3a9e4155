// Unit tests of the Jinja interpreter behind chat templates: one test per
// feature (whitespace control, statements, expressions, filters, tests,
// methods, globals), Python/Jinja2 value semantics, and the error paths
// (malformed templates, unknown names, raise_exception, runaway loops,
// recursion and output size) which must return a Status, never crash or hang.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/template.h"

namespace chimera::tokenizer::jinja {
namespace {

Result<std::string> try_render(const std::string& src, const char* vars_json = "{}", const Limits& limits = {}) {
  CHIMERA_ASSIGN_OR_RETURN(Template t, Template::parse(src));
  Scope vars;
  auto j = nlohmann::ordered_json::parse(vars_json);
  for (auto it = j.begin(); it != j.end(); ++it) {
    CHIMERA_ASSIGN_OR_RETURN(vars[it.key()], from_json(it.value()));
  }
  return t.render(std::move(vars), {}, limits);
}

std::string R(const std::string& src, const char* vars_json = "{}") {
  auto r = try_render(src, vars_json);
  EXPECT_TRUE(r.is_ok()) << src << " -> " << r.status().message();
  return r.is_ok() ? r.value() : "<error>";
}

std::string E(const std::string& src, const char* vars_json = "{}", const Limits& limits = {}) {
  auto r = try_render(src, vars_json, limits);
  EXPECT_FALSE(r.is_ok()) << src << " unexpectedly rendered: " << r.value();
  return r.is_ok() ? "" : r.status().message();
}

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

TEST(JinjaSyntax, TextExpressionsAndComments) {
  EXPECT_EQ(R("plain text"), "plain text");
  EXPECT_EQ(R("a{{ 1 }}b{# comment {{ x }} #}c"), "a1bc");
  EXPECT_EQ(R("{{ '}}' }}{{ {'a': {'b': 1}}['a']['b'] }}"), "}}1");
  EXPECT_EQ(R("{{ x }}|{{ y }}", R"({"x": "hi"})"), "hi|");  // undefined prints nothing
  EXPECT_EQ(R("{% raw %}{{ not evaluated }}{% endraw %}"), "{{ not evaluated }}");
}

TEST(JinjaSyntax, WhitespaceControl) {
  EXPECT_EQ(R("a  \n  {{- 'b' -}}  \n  c"), "abc");
  EXPECT_EQ(R("a\n{%- if true -%}\n b \n{%- endif -%}\nc"), "abc");
  // trim_blocks: the newline right after a block tag goes; after {{ }} it stays.
  EXPECT_EQ(R("{% if true %}\nx\n{% endif %}\n{{ 'y' }}\nz"), "x\ny\nz");
  // lstrip_blocks: indentation before a block tag goes, not before {{ }}.
  EXPECT_EQ(R("{% for i in [1, 2] %}\n    {% if i %}\n    [{{ i }}]\n    {% endif %}\n{% endfor %}"),
            "    [1]\n    [2]\n");
  // `+` keeps what lstrip/trim would remove; comments obey the same rules.
  EXPECT_EQ(R("  {%+ if true %}x{% endif +%}\ny"), "  x\ny");
  EXPECT_EQ(R("a\n  {# c #}\nb"), "a\nb");
  // One trailing newline is dropped (keep_trailing_newline=False), \r\n normalised.
  EXPECT_EQ(R("x\n"), "x");
  EXPECT_EQ(R("x\n\n"), "x\n");
  EXPECT_EQ(R("a\r\nb"), "a\nb");
}

TEST(JinjaStatements, IfElifElse) {
  const char* t = "{% if n > 1 %}many{% elif n == 1 %}one{% else %}none{% endif %}";
  EXPECT_EQ(R(t, R"({"n": 3})"), "many");
  EXPECT_EQ(R(t, R"({"n": 1})"), "one");
  EXPECT_EQ(R(t, R"({"n": 0})"), "none");
  EXPECT_EQ(R("{% if missing %}a{% else %}b{% endif %}"), "b");
}

TEST(JinjaStatements, ForLoopVariables) {
  EXPECT_EQ(R("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
              "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
              R"({"xs": ["a", "b"]})"),
            "1021TrueFalse2;2110FalseTrue2;");
  EXPECT_EQ(R("{% for x in xs %}{{ loop.previtem }}>{{ x }}>{{ loop.nextitem }} {% endfor %}", R"({"xs": [1, 2, 3]})"),
            ">1>2 1>2>3 2>3> ");
  EXPECT_EQ(R("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in missing %}x{% else %}empty{% endfor %}"), "empty");
  // `for ... if`: filtered before looping, so loop.* counts kept items only.
  EXPECT_EQ(R("{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% endfor %}"),
            "1/2:2 2/2:4 ");
  EXPECT_EQ(R("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", R"({"d": {"b": 1, "a": 2}})"), "b=1,a=2,");
  EXPECT_EQ(R("{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"x": 1, "y": 2}})"), "xy");
  EXPECT_EQ(R("{% for c in 'hé' %}[{{ c }}]{% endfor %}"), "[h][é]");
  EXPECT_EQ(R("{% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}"
              "{{ i }}{% endfor %}"),
            "023");
  EXPECT_EQ(R("{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{% endfor %}"),
            "113 214 123 224 ");
}

TEST(JinjaStatements, SetAndScoping) {
  EXPECT_EQ(R("{% set x = 1 + 2 %}{{ x }}"), "3");
  EXPECT_EQ(R("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(R("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  // A set inside a loop does not leak out (that is what namespace() is for).
  EXPECT_EQ(R("{% set x = 'out' %}{% for i in [1] %}{% set x = 'in' %}{{ x }}{% endfor %}{{ x }}"), "inout");
  EXPECT_EQ(R("{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}"
              "{{ ns.n }}"),
            "6");
  // `if` does not open a scope.
  EXPECT_EQ(R("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(R("{% set block %}a{{ 1 + 1 }}b{% endset %}[{{ block }}]"), "[a2b]");
  EXPECT_TRUE(contains(E("{% set d = {} %}{% set d.x = 1 %}"), "namespace"));
}

TEST(JinjaStatements, Macros) {
  EXPECT_EQ(R("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
              "{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='Cy') }}"),
            "Hi Bob! Hi Al? Hi Cy!");
  // Macros see top-level variables but not the caller's loop variables.
  EXPECT_EQ(R("{% set g = 'G' %}{% macro m() %}{{ g }}{{ i }}{% endmacro %}{% for i in [1] %}{{ m() }}{% endfor %}"),
            "G");
  EXPECT_EQ(R("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
  EXPECT_TRUE(contains(E("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"), "arguments"));
  EXPECT_TRUE(contains(E("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}"), "unexpected keyword"));
  EXPECT_EQ(R("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(JinjaExpressions, LiteralsAndOutput) {
  EXPECT_EQ(R(R"({{ 'a\'b' }}|{{ "tab\there" }}|{{ '\u00e9\x41\n' }}|{{ 'x' "y" }})"), "a'b|tab\there|éA\n|xy");
  EXPECT_EQ(R("{{ 42 }} {{ 1_000 }} {{ 2.5 }} {{ 1.0 }} {{ 1e3 }} {{ 0.1 + 0.2 }}"), "42 1000 2.5 1.0 1000.0 0.30000000000000004");
  EXPECT_EQ(R("{{ true }} {{ False }} {{ none }} {{ None }}"), "True False None None");
  EXPECT_EQ(R("{{ [1, 'a', none, true] }} {{ {'k': 'v', 'n': 1} }} {{ (1, 2) }}"),
            "[1, 'a', None, True] {'k': 'v', 'n': 1} [1, 2]");
  EXPECT_EQ(R("{{ 1e16 }} {{ 0.00001 }} {{ -2.0 }}"), "1e+16 1e-05 -2.0");
}

TEST(JinjaExpressions, ArithmeticAndPrecedence) {
  EXPECT_EQ(R("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}"), "7 9 64 4");
  EXPECT_EQ(R("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 10 / 4 }} {{ 4 / 2 }}"), "3 -4 1 2 2.5 2.0");
  EXPECT_EQ(R("{{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ none }} {{ 1 + 2.5 }}"), "ababab [1, 2] a1None 3.5");
  EXPECT_EQ(R("{{ 'x' + 'y' | upper }}"), "xY");  // filters bind tighter than +
  EXPECT_EQ(R("{{ -x }} {{ +x }}", R"({"x": 3})"), "-3 3");
}

TEST(JinjaExpressions, LogicComparisonAndMembership) {
  EXPECT_EQ(R("{{ 1 and 'a' }} {{ 0 and 'a' }} {{ '' or 'b' }} {{ 'a' or 'b' }} {{ not 0 }}"), "a 0 b a True");
  EXPECT_EQ(R("{{ 1 == 1.0 }} {{ 1 != 2 }} {{ 'a' < 'b' }} {{ 2 <= 2 }} {{ 3 > 2 }} {{ 2 >= 3 }} {{ true == 1 }}"),
            "True True True True True False True");
  EXPECT_EQ(R("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 3 not in [3] }}"),
            "True True True True False");
  EXPECT_EQ(R("{{ 'yes' if x else 'no' }} {{ 'yes' if y else 'no' }} [{{ 'only' if y }}]", R"({"x": [0]})"),
            "yes no []");
  EXPECT_EQ(R("{{ not x is defined }} {{ x is not none }}", R"({"x": null})"), "False False");
  // Short-circuit: the right side is not evaluated (it would raise).
  EXPECT_EQ(R("{{ xs | length == 0 or xs[0].a }}", R"({"xs": []})"), "True");
}

TEST(JinjaExpressions, SubscriptsAttributesAndSlices) {
  const char* v = R"({"m": {"role": "user", "content": "hello"}, "xs": [1, 2, 3, 4]})";
  EXPECT_EQ(R("{{ m.role }} {{ m['content'] }} {{ m.missing is defined }} {{ m['missing'] is undefined }}", v),
            "user hello False True");
  EXPECT_EQ(R("{{ xs[0] }} {{ xs[-1] }} {{ xs[1:] }} {{ xs[:2] }} {{ xs[::-1] }} {{ xs[1:3] }} {{ xs[::2] }}", v),
            "1 4 [2, 3, 4] [1, 2] [4, 3, 2, 1] [2, 3] [1, 3]");
  EXPECT_EQ(R("{{ xs[10] is defined }} {{ 'héllo'[1] }} {{ 'héllo'[1:3] }} {{ 'abc'[::-1] }} {{ xs.0 }}", v),
            "False é él cba 1");
  EXPECT_EQ(R("{{ m.content.content is defined }}", v), "False");  // attribute of a str: undefined
  EXPECT_TRUE(contains(E("{{ nope.attr }}"), "'nope' is undefined"));
}

TEST(JinjaFilters, StringFilters) {
  EXPECT_EQ(R("[{{ '  a b \n' | trim }}] {{ 'xxaxx' | trim('x') }}"), "[a b] a");
  EXPECT_EQ(R("{{ 'Ab' | upper }} {{ 'Ab' | lower }} {{ 'hello big-world' | title }} {{ 'hELLO' | capitalize }}"),
            "AB ab Hello Big-World Hello");
  EXPECT_EQ(R("{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }}"), "a+b+c bba");
  EXPECT_EQ(R("{{ 42 | string }}{{ [1] | string }} {{ '<a & \"b\">' | escape }} {{ '<x>' | safe }}"),
            "42[1] &lt;a &amp; &#34;b&#34;&gt; <x>");
  EXPECT_EQ(R("{{ 'a\nb' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}"), "a\n  b|  a\n  b");
  EXPECT_EQ(R("{{ 'one two  three' | wordcount }} {{ '%s-%d' | format('a', 3) }}"), "3 a-3");
}

TEST(JinjaFilters, SequenceFilters) {
  const char* v = R"({"ms": [{"role": "system", "c": "s"}, {"role": "user", "c": "u1"}, {"role": "user", "c": "u2"},
                            {"role": "assistant", "c": "a", "tool_calls": []}]})";
  EXPECT_EQ(R("{{ ms | length }} {{ 'héllo' | length }} {{ {'a': 1} | count }} {{ missing | length }}", v), "4 5 1 0");
  EXPECT_EQ(R("{{ ms | map(attribute='role') | join(',') }}", v), "system,user,user,assistant");
  EXPECT_EQ(R("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | list }}", v), "['u1', 'u2']");
  EXPECT_EQ(R("{{ ms | rejectattr('role', 'eq', 'user') | map(attribute='c') | join }}", v), "sa");
  EXPECT_EQ(R("{{ ms | selectattr('tool_calls', 'defined') | list | length }}", v), "1");
  EXPECT_EQ(R("{{ ms | selectattr('tool_calls') | list | length }}", v), "0");  // truthiness without a test
  EXPECT_EQ(R("{{ [1, 2, 3, 4] | select('odd') | list }} {{ ['a', 'code', 'b'] | reject('equalto', 'code') | join }}"),
            "[1, 3] ab");
  EXPECT_EQ(R("{{ ['a', 'b'] | map('upper') | join }} {{ [3, 1, 2] | first }}{{ [3, 1, 2] | last }}"), "AB 32");
  EXPECT_EQ(R("{{ 'ab' | list }} {{ [3, 1, 2] | sort }} {{ [1, 2] | reverse | list }} {{ [1, 1, 2] | unique | list }}"),
            "['a', 'b'] [1, 2, 3] [2, 1] [1, 2]");
  EXPECT_EQ(R("{{ [1, 2, 3] | sum }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ {'b': 1, 'a': 2} | dictsort }}"),
            "6 1 3 [['a', 2], ['b', 1]]");
  EXPECT_EQ(R("{% for k, v in {'x': 1} | items %}{{ k }}{{ v }}{% endfor %}"), "x1");
}

TEST(JinjaFilters, DefaultNumbersAndJson) {
  EXPECT_EQ(R("{{ missing | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ x | d(1) }}",
              R"({"x": null})"),
            "d  d None");
  EXPECT_EQ(R("{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '2.5' | float }}"),
            "42 4 0 7 3 2.5");
  // round() is Python's: half to even.
  EXPECT_EQ(R("{{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.1 | round(0, 'ceil') }}"),
            "3 2.57 2.0 4.0 3.0");
  EXPECT_EQ(R("{{ x | tojson }}", R"({"x": {"b": [1, 2.0, "é\n\"q\""], "a": null, "t": true}})"),
            "{\"b\": [1, 2.0, \"é\\n\\\"q\\\"\"], \"a\": null, \"t\": true}");
  EXPECT_EQ(R("{{ x | tojson(indent=2) }}", R"({"x": {"a": [1, {}], "b": []}})"),
            "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
  EXPECT_EQ(R("{{ '<tag>' | tojson }}"), "\"<tag>\"");  // no HTML escaping (transformers' tojson)
}

TEST(JinjaTests, AllTests) {
  const char* v = R"({"s": "x", "n": 1, "f": 1.5, "l": [1], "d": {"a": 1}, "z": null, "b": true})";
  EXPECT_EQ(R("{{ s is defined }}{{ q is undefined }}{{ z is none }}{{ s is string }}{{ n is number }}"
              "{{ f is number }}{{ n is integer }}{{ f is float }}{{ b is boolean }}",
              v),
            "TrueTrueTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(R("{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}{{ s is iterable }}{{ n is iterable }}"
              "{{ l is sequence }}{{ n is sequence }}",
              v),
            "TrueFalseTrueTrueFalseTrueFalse");
  EXPECT_EQ(R("{{ b is true }}{{ b is false }}{{ n is true }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}", v),
            "TrueFalseFalseTrueTrueTrue");
  EXPECT_EQ(R("{{ s is eq 'x' }}{{ s is equalto('x') }}{{ n is ne 2 }}{{ n is lt 2 }}{{ n is gt 0 }}{{ 1 is in l }}"
              "{{ 'ab' is lower }}{{ 'AB' is upper }}{{ l is sameas l }}{{ range is callable }}",
              v),
            "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(R("{{ s is not string }}{{ z is not none }}", v), "FalseFalse");
}

TEST(JinjaMethods, StringAndDictMethods) {
  EXPECT_EQ(R("[{{ '  a  '.strip() }}][{{ '  a  '.lstrip() }}][{{ '  a  '.rstrip() }}][{{ 'xax'.strip('x') }}]"),
            "[a][a  ][  a][a]");
  EXPECT_EQ(R("{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'x</think>y'.split('</think>')[-1] }}"),
            "['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b,c'] y");
  EXPECT_EQ(R("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }}"),
            "True True True");
  EXPECT_EQ(R("{{ 'Ab'.upper() }} {{ 'Ab'.lower() }} {{ 'a-a'.replace('-', '') }} {{ 'ab cd'.title() }}"),
            "AB ab aa Ab Cd");
  EXPECT_EQ(R("{{ '{} and {}'.format(1, 'b') }} {{ '{0}{0}{name}'.format('x', name='y') }} {{ ', '.join(['a', 'b']) }}"),
            "1 and b xxy a, b");
  EXPECT_EQ(R("{{ 'banana'.find('n') }} {{ 'banana'.count('a') }} {{ 'a\nb'.splitlines() }} {{ '12'.isdigit() }}"),
            "2 3 ['a', 'b'] True");
  const char* v = R"({"d": {"a": 1, "b": 2}})";
  EXPECT_EQ(R("{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('z') }}"
              " {{ d.get('z', 0) }}",
              v),
            "[['a', 1], ['b', 2]] ['a', 'b'] [1, 2] 1 None 0");
  EXPECT_TRUE(contains(E("{{ 'x'.nosuchmethod() }}"), "no method"));
}

TEST(JinjaGlobals, RangeNamespaceDictStrftime) {
  EXPECT_EQ(R("{{ range(3) | list }} {{ range(1, 4) | list }} {{ range(5, 0, -2) | list }}"),
            "[0, 1, 2] [1, 2, 3] [5, 3, 1]");
  EXPECT_EQ(R("{{ dict(a=1, b='x') | tojson }} {% set ns = namespace(a=1) %}{% set ns.a = 2 %}{{ ns.a }}"),
            "{\"a\": 1, \"b\": \"x\"} 2");
  auto t = Template::parse("{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now is defined }}");
  ASSERT_TRUE(t.is_ok());
  Scope globals;
  globals["strftime_now"] = make_strftime_now(86400 * 365 + 43200);  // 1971-01-01 12:00 UTC
  auto r = t->render({}, globals);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(), "1971-01-01|True");
  // Without the global, templates take their `is defined` fallback (Llama 3.2's "26 Jul 2024").
  EXPECT_EQ(R("{% if strftime_now is defined %}now{% else %}26 Jul 2024{% endif %}"), "26 Jul 2024");
}

TEST(JinjaErrors, MalformedTemplates) {
  EXPECT_TRUE(contains(E("{{ x"), "unterminated tag '{{'"));
  EXPECT_TRUE(contains(E("ab{% if x"), "unterminated tag '{%'"));
  EXPECT_TRUE(contains(E("{# never closed"), "unterminated comment"));
  EXPECT_TRUE(contains(E("{{ 'abc }}"), "unterminated string"));
  EXPECT_TRUE(contains(E("{% if x %}yes"), "endif"));
  EXPECT_TRUE(contains(E("{% for x in y %}"), "endfor"));
  EXPECT_TRUE(contains(E("{% endfor %}"), "no matching opening tag"));
  EXPECT_TRUE(contains(E("{% include 'x' %}"), "unknown or unsupported tag 'include'"));
  EXPECT_TRUE(contains(E("{{ 1 + }}"), "syntax error"));
  EXPECT_TRUE(contains(E("{{ (1 }}"), "unexpected '}'"));
  EXPECT_TRUE(contains(E("{{ foo(1 2) }}"), "syntax error"));
  EXPECT_TRUE(contains(E("{{ a ] }}"), "unexpected ']'"));
  EXPECT_TRUE(contains(E("{{ a @ b }}"), "unexpected character '@'"));
  EXPECT_TRUE(contains(E("line1\nline2 {{ ) }}"), "line 2"));
  EXPECT_TRUE(contains(E("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}"), "nested too deeply"));
  EXPECT_TRUE(contains(E("{% if a < b < c %}{% endif %}"), "chained comparisons"));
  // Unknown filters/tests are found at parse time (as jinja2 does), even in branches never taken.
  auto t = Template::parse("{% if false %}{{ x | nosuchfilter }}{% endif %}");
  ASSERT_FALSE(t.is_ok());
  EXPECT_TRUE(contains(t.status().message(), "unknown filter 'nosuchfilter'"));
  t = Template::parse("\n{{ x is nosuchtest }}");
  ASSERT_FALSE(t.is_ok());
  EXPECT_TRUE(contains(t.status().message(), "line 2: unknown test 'nosuchtest'"));
  EXPECT_TRUE(contains(E("{{ [1] | map('nosuchfilter') | list }}"), "unknown filter"));  // named at run time
}

TEST(JinjaErrors, RuntimeErrors) {
  std::string msg = E("a\n{{ raise_exception('Roles must alternate!') }}");
  EXPECT_TRUE(contains(msg, "Roles must alternate!")) << msg;
  EXPECT_TRUE(contains(msg, "line 2")) << msg;
  EXPECT_TRUE(contains(E("{{ undefined_fn(1) }}"), "'undefined_fn' is undefined"));
  EXPECT_TRUE(contains(E("{{ 'a' + 1 }}"), "unsupported operand"));
  EXPECT_TRUE(contains(E("{{ 'a' + missing }}"), "'missing' is undefined"));
  EXPECT_TRUE(contains(E("{{ 1 // 0 }}"), "division by zero"));
  EXPECT_TRUE(contains(E("{{ 1 / 0 }}"), "division by zero"));
  EXPECT_TRUE(contains(E("{{ 9223372036854775807 + 1 }}"), "overflow"));
  EXPECT_TRUE(contains(E("{% for x in none %}{% endfor %}"), "not iterable"));
  EXPECT_TRUE(contains(E("{{ 1 < 'a' }}"), "not supported"));
  EXPECT_TRUE(contains(E("{{ f | tojson }}", R"({})"), "undefined"));
  EXPECT_TRUE(contains(E("{{ 1 in 'abc' }}"), "requires string"));
  EXPECT_TRUE(contains(E("{% break %}"), "outside of a loop"));
}

TEST(JinjaErrors, RunawayWorkIsBounded) {
  Limits small;
  small.max_steps = 100000;
  EXPECT_TRUE(contains(E("{% for i in range(1000) %}{% for j in range(1000) %}{{ i }}{% endfor %}{% endfor %}", "{}",
                         small),
                       "step limit"));
  EXPECT_TRUE(contains(E("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "call depth"));
  EXPECT_TRUE(contains(E("{{ range(100000000) | length }}"), "range() exceeds"));
  Limits tiny_output;
  tiny_output.max_output_bytes = 1000;
  EXPECT_TRUE(contains(E("{{ 'a' * 5000 }}", "{}", tiny_output), "size limit"));
  EXPECT_TRUE(contains(E("{% for i in range(100) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}", "{}",
                         tiny_output),
                       "size limit"));
  EXPECT_TRUE(contains(E("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
                         "{% endfor %}",
                         "{}", tiny_output),
                       "size limit"));
  EXPECT_TRUE(contains(E("{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}"
                         "{% endfor %}",
                         "{}", tiny_output),
                       "size limit"));
  EXPECT_TRUE(contains(E("{{ ([1] * 100000) | length }}", "{}", tiny_output), "size limit"));
  // Hostile JSON input is bounded too.
  std::string deep(1000, '[');
  deep += std::string(1000, ']');
  EXPECT_FALSE(from_json(nlohmann::ordered_json::parse(deep)).is_ok());
}

}  // namespace
}  // namespace chimera::tokenizer::jinja
