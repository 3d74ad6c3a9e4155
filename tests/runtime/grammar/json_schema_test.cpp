// JSON Schema -> grammar: for every supported keyword a schema, 100 seeded
// random generations through the grammar on a real vocabulary (random allowed
// tokens, then closing tokens) that must all parse as JSON and validate
// against the schema (a small validator for the supported keywords below);
// integer ranges checked exhaustively near their bounds; unsupported keywords
// refused with their name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>

#include "grammar_test_util.h"
#include "runtime/grammar/json_schema.h"

namespace chimera::test {
namespace {

using Json = nlohmann::json;
using runtime::grammar::json_schema_to_gbnf;

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Validates v against schema (supported keywords only); returns "" when valid.
std::string validate(const Json& v, const Json& s, const Json& root, const std::string& at = "$") {
  if (s.is_boolean()) return s.get<bool>() ? "" : at + ": schema false";
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    return validate(v, ref == "#" ? root : root.at(Json::json_pointer(ref.substr(1))), root, at);
  }
  if (s.contains("anyOf")) {
    for (const Json& alt : s["anyOf"])
      if (validate(v, alt, root, at).empty()) return "";
    return at + ": matches no anyOf branch";
  }
  if (s.contains("const") && v != s["const"]) return at + ": not the const";
  if (s.contains("enum")) {
    bool found = false;
    for (const Json& e : s["enum"]) found |= e == v;
    if (!found) return at + ": not in enum";
  }
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_string()) types.push_back(s["type"]);
    else for (const Json& t : s["type"]) types.push_back(t);
    bool ok = false;
    for (const auto& t : types) {
      ok |= (t == "string" && v.is_string()) || (t == "number" && v.is_number()) ||
            (t == "integer" && (v.is_number_integer())) || (t == "boolean" && v.is_boolean()) ||
            (t == "null" && v.is_null()) || (t == "object" && v.is_object()) || (t == "array" && v.is_array());
    }
    if (!ok) return at + ": wrong type " + v.dump();
  }
  if (v.is_string()) {
    const size_t len = utf8_length(v.get<std::string>());
    if (s.contains("minLength") && len < s["minLength"].get<size_t>()) return at + ": too short";
    if (s.contains("maxLength") && len > s["maxLength"].get<size_t>()) return at + ": too long";
  }
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (s.contains("minimum") && x < s["minimum"].get<int64_t>()) return at + ": below minimum";
    if (s.contains("maximum") && x > s["maximum"].get<int64_t>()) return at + ": above maximum";
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<int64_t>()) return at + ": not above exclusiveMinimum";
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<int64_t>()) return at + ": not below exclusiveMaximum";
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return at + ": too few items";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return at + ": too many items";
    if (s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i)
        if (auto e = validate(v[i], s["items"], root, at + "[" + std::to_string(i) + "]"); !e.empty()) return e;
  }
  if (v.is_object()) {
    const Json props = s.value("properties", Json::object());
    for (const Json& r : s.value("required", Json::array()))
      if (!v.contains(r.get<std::string>())) return at + ": missing " + r.get<std::string>();
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (auto e = validate(x, props[k], root, at + "." + k); !e.empty()) return e;
      } else if (s.contains("additionalProperties")) {
        const Json& ap = s["additionalProperties"];
        if (ap.is_boolean() && !ap.get<bool>()) return at + ": extra property " + k;
        if (ap.is_object())
          if (auto e = validate(x, ap, root, at + "." + k); !e.empty()) return e;
      }
    }
  }
  return "";
}

struct Case {
  const char* name;
  const char* schema;
  VocabKind vocab;
};

const Case kCases[] = {
    {"object_required_additional_false",
     R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"ok":{"type":"boolean"}},"required":["name","age","ok"],"additionalProperties":false})",
     VocabKind::kLlama3},
    {"optional_properties",
     R"({"type":"object","properties":{"a":{"type":"null"},"b":{"type":"number"},"c":{"type":"string","maxLength":3}},"additionalProperties":false})",
     VocabKind::kO200k},
    {"mixed_required_optional",
     R"({"type":"object","properties":{"id":{"type":"integer"},"tag":{"type":"string","maxLength":5},"x":{"type":"boolean"}},"required":["tag"],"additionalProperties":false})",
     VocabKind::kSpm},
    {"enum", R"({"enum":["red","green","blue",42,null,{"k":[1,2]}]})", VocabKind::kLlama3},
    {"const", R"({"type":"object","properties":{"kind":{"const":"point"},"v":{"const":3}},"required":["kind","v"],"additionalProperties":false})", VocabKind::kGpt2},
    {"string_min_max_length", R"({"type":"string","minLength":2,"maxLength":6})", VocabKind::kLlama3},
    {"number", R"({"type":"number"})", VocabKind::kO200k},
    {"integer_min_max", R"({"type":"integer","minimum":-37,"maximum":1234})", VocabKind::kLlama3},
    {"integer_minimum_only", R"({"type":"integer","minimum":250})", VocabKind::kSpm},
    {"integer_exclusive", R"({"type":"integer","exclusiveMinimum":-5,"exclusiveMaximum":5})", VocabKind::kGpt2},
    {"boolean_null", R"({"type":["boolean","null"]})", VocabKind::kLlama3},
    {"array_items_min_max", R"({"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":2,"maxItems":4})", VocabKind::kO200k},
    {"array_of_objects",
     R"({"type":"array","items":{"type":"object","properties":{"q":{"type":"string","maxLength":8}},"required":["q"],"additionalProperties":false},"maxItems":3})",
     VocabKind::kLlama3},
    {"anyOf", R"({"anyOf":[{"type":"string","maxLength":4},{"type":"integer","minimum":10,"maximum":20},{"type":"array","items":{"type":"boolean"},"maxItems":2}]})", VocabKind::kSpm},
    {"ref_defs",
     R"({"$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x","y"],"additionalProperties":false}},"type":"object","properties":{"from":{"$ref":"#/$defs/pt"},"to":{"$ref":"#/$defs/pt"}},"required":["from","to"],"additionalProperties":false})",
     VocabKind::kLlama3},
    {"recursive_ref",
     R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":99},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
     VocabKind::kO200k},
    {"free_object", R"({"type":"object"})", VocabKind::kGpt2},
    {"additional_properties_schema", R"({"type":"object","additionalProperties":{"type":"integer","minimum":1,"maximum":3}})", VocabKind::kLlama3},
    {"any_value", R"({})", VocabKind::kLlama3},
};

class JsonSchemaSuite : public ::testing::TestWithParam<Case> {};

TEST_P(JsonSchemaSuite, HundredRandomGenerationsValidate) {
  const Case& c = GetParam();
  auto vocab = real_vocab(c.vocab);
  if (!vocab) GTEST_SKIP() << "shared vocabularies not found";
  auto g = CompiledGrammar::compile({GrammarSource::Kind::kJsonSchema, c.schema}, vocab);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const Json schema = Json::parse(c.schema);
  std::string text;
  size_t distinct_lengths = 0, last_len = SIZE_MAX;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    std::mt19937_64 rng(seed * 7919 + 13);
    ASSERT_TRUE(random_generation(*g, rng, /*free_steps=*/12, /*max_steps=*/3000, &text)) << "seed " << seed;
    Json v;
    try {
      v = Json::parse(text);
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << ": not JSON: " << e.what() << "\n" << text << "\n" << (*g)->gbnf();
    }
    const std::string err = validate(v, schema, schema);
    ASSERT_TRUE(err.empty()) << "seed " << seed << ": " << err << "\n" << text << "\n" << (*g)->gbnf();
    distinct_lengths += text.size() != last_len;
    last_len = text.size();
  }
  EXPECT_GT(distinct_lengths, 1u);  // the generations really differ
}

INSTANTIATE_TEST_SUITE_P(Keywords, JsonSchemaSuite, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(JsonSchema, JsonObjectGrammar) {
  auto vocab = real_vocab(VocabKind::kLlama3);
  if (!vocab) GTEST_SKIP() << "shared vocabularies not found";
  auto g = CompiledGrammar::compile({GrammarSource::Kind::kJsonObject, ""}, vocab);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  std::string text;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    std::mt19937_64 rng(seed);
    ASSERT_TRUE(random_generation(*g, rng, 12, 3000, &text));
    Json v;
    ASSERT_NO_THROW(v = Json::parse(text)) << text;
    EXPECT_TRUE(v.is_object()) << text;
  }
}

TEST(JsonSchema, IntegerRangesExact) {
  const std::pair<int64_t, int64_t> ranges[] = {{0, 0}, {-1, 1}, {5, 5}, {7, 123}, {-250, -17}, {-1000, 999},
                                               {19, 1001}, {100, 199}, {0, 99999}, {-9, 0}};
  for (auto [lo, hi] : ranges) {
    const std::string gbnf = "root ::= " + runtime::grammar::integer_range_gbnf(true, lo, true, hi) + "\n";
    auto g = compile_gbnf(gbnf);
    ASSERT_TRUE(g);
    for (int64_t x = lo - 300; x <= hi + 300; ++x)
      ASSERT_EQ(full_match(g, std::to_string(x)), x >= lo && x <= hi) << x << " in [" << lo << ", " << hi << "]\n" << gbnf;
    EXPECT_FALSE(full_match(g, "-0"));
    EXPECT_FALSE(full_match(g, "0" + std::to_string(std::max<int64_t>(lo, 1))));  // no leading zeros
  }
  // One-sided bounds.
  auto ge = compile_gbnf("root ::= " + runtime::grammar::integer_range_gbnf(true, 250, false, 0) + "\n");
  for (int64_t x : std::initializer_list<int64_t>{249, 250, 999, 1000, 123456789012345678}) EXPECT_EQ(full_match(ge, std::to_string(x)), x >= 250) << x;
  auto le = compile_gbnf("root ::= " + runtime::grammar::integer_range_gbnf(false, 0, true, -3) + "\n");
  for (int64_t x : std::initializer_list<int64_t>{-2, -3, -4, -1000, -123456789012345678}) EXPECT_EQ(full_match(le, std::to_string(x)), x <= -3) << x;
}

void expect_schema_error(const std::string& schema, const std::string& what) {
  auto r = json_schema_to_gbnf(schema);
  ASSERT_FALSE(r.is_ok()) << schema;
  EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  expect_schema_error(R"({"type":"string","pattern":"^a+$"})", "unsupported keyword 'pattern' (at #)");
  expect_schema_error(R"({"type":"object","properties":{"e":{"type":"string","format":"email"}}})",
                      "unsupported keyword 'format' (at #/properties/e)");
  expect_schema_error(R"({"oneOf":[{"type":"string"}]})", "unsupported keyword 'oneOf'");
  expect_schema_error(R"({"type":"number","minimum":0})", "'minimum' is supported for type 'integer' only");
  expect_schema_error(R"({"type":"array","items":[{"type":"string"}]})", "tuple form");
  expect_schema_error(R"({"$ref":"http://example.com/s.json"})", "only local '$ref'");
  expect_schema_error(R"({"$ref":"#/$defs/missing"})", "does not exist");
  expect_schema_error(R"({"type":"object","properties":{},"required":["x"]})", "required property 'x'");
  expect_schema_error(R"({"type":"string","minLength":5,"maxLength":2})", "'minLength' is greater than 'maxLength'");
  expect_schema_error(R"({"type":"integer","minimum":5,"maximum":2})", "empty");
  expect_schema_error(R"({"type":"strin"})", "unknown type 'strin'");
  expect_schema_error(R"({"type":)", "not valid JSON");
  expect_schema_error("false", "matches nothing");
}

}  // namespace
}  // namespace chimera::test
