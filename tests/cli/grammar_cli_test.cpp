// `chimera run` / `chimera chat` with --json-schema, --grammar, --grammar-file
// on the real stories260K model (SentencePiece with byte fallback): the
// generated text parses as JSON and satisfies the schema for several seeds
// and greedy decoding; chat replies follow the grammar every turn; bad
// grammars, unsupported schema keywords and conflicting flags exit 1 with a
// clear message.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "test_util.h"

namespace chimera::test {
namespace {

const char* const kSchema =
    R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":12},)"
    R"("age":{"type":"integer","minimum":1,"maximum":99},"pet":{"enum":["cat","dog","bird"]},)"
    R"("tags":{"type":"array","items":{"type":"boolean"},"maxItems":3}},)"
    R"("required":["name","age","pet","tags"],"additionalProperties":false})";

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

TEST(GrammarCli, RunJsonSchemaOutputValidates) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/models/stories260K.gguf";
  const std::string schema_file = write_temp("schema.json", kSchema);
  const std::string prompt = "Once upon a time";
  for (const char* sampling : {"--temp 0", "--seed 1", "--seed 2", "--seed 3", "--seed 4 --temp 1.5"}) {
    auto r = run_chimera_split("run -m " + model + " -p " + shell_quote(prompt) + " -n 400 -q --json-schema @" +
                               schema_file + " " + sampling);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(r.out.compare(0, prompt.size(), prompt), 0) << r.out;
    const std::string text = r.out.substr(prompt.size());
    nlohmann::json v;
    ASSERT_NO_THROW(v = nlohmann::json::parse(text)) << sampling << ": " << text;
    ASSERT_TRUE(v.is_object()) << text;
    EXPECT_EQ(v.size(), 4u) << text;
    ASSERT_TRUE(v["name"].is_string()) << text;
    const std::string name = v["name"];
    EXPECT_GE(name.size(), 1u);
    ASSERT_TRUE(v["age"].is_number_integer()) << text;
    EXPECT_GE(v["age"].get<int>(), 1);
    EXPECT_LE(v["age"].get<int>(), 99);
    EXPECT_TRUE(v["pet"] == "cat" || v["pet"] == "dog" || v["pet"] == "bird") << text;
    ASSERT_TRUE(v["tags"].is_array()) << text;
    EXPECT_LE(v["tags"].size(), 3u);
    for (const auto& t : v["tags"]) EXPECT_TRUE(t.is_boolean()) << text;
  }
}

TEST(GrammarCli, RunGrammarTextAndFile) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/models/stories260K.gguf";
  auto r = run_chimera_split("run -m " + model + " -p Hi -q --temp 0 --grammar " +
                             shell_quote("root ::= (\"yes\" | \"no\") \".\""));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == "Hiyes.\n" || r.out == "Hino.\n") << r.out;
  const std::string file = write_temp("list.gbnf", "root ::= item{2}\nitem ::= \"- \" [a-z]{1,5} \"\\n\"\n");
  r = run_chimera_split("run -m " + model + " -p Hi -q --seed 5 --grammar-file " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string body = r.out.substr(2);
  ASSERT_EQ(body.compare(0, 2, "- "), 0) << body;
  size_t lines = 0;
  for (char c : body) lines += c == '\n';
  EXPECT_EQ(lines, 3u) << body;  // two items plus the final newline of `run`
}

TEST(GrammarCli, ChatRepliesFollowTheGrammar) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string in = write_temp("chat-grammar-in.txt", "Hello there.\nHow are you?\n");
  auto r = run_shell(chimera_binary() + " chat -m " + shared + "/models/stories260K.gguf --seed 9 --grammar " +
                     shell_quote("root ::= \"<\" [a-z ]{1,20} \">\"") + " < " + in + " 2>/dev/null");
  ASSERT_EQ(r.rc, 0);
  // Two replies, each a whole match on its own line.
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < r.output.size(); ++i)
    if (r.output[i] == '\n') lines.push_back(r.output.substr(start, i - start)), start = i + 1;
  ASSERT_EQ(lines.size(), 2u) << r.output;
  for (const auto& l : lines) {
    ASSERT_GE(l.size(), 3u) << l;
    EXPECT_EQ(l.front(), '<') << l;
    EXPECT_EQ(l.back(), '>') << l;
  }
}

TEST(GrammarCli, BadGrammarsAreClearErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/models/stories260K.gguf";
  auto r = run_chimera_split("run -m " + model + " -p Hi -q --grammar " + shell_quote("root ::= \"a\" )"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--grammar: grammar: line 1, column 14"), std::string::npos) << r.err;
  r = run_chimera_split("run -m " + model + " -p Hi -q --json-schema " + shell_quote(R"({"type":"string","pattern":"a"})"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unsupported keyword 'pattern'"), std::string::npos) << r.err;
  r = run_chimera_split("run -m " + model + " -p Hi -q --grammar 'root ::= \"a\"' --json-schema '{}'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("at most one of"), std::string::npos) << r.err;
  r = run_chimera_split("run -m " + model + " -p Hi -q --grammar-file /nonexistent.gbnf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent.gbnf"), std::string::npos) << r.err;
  r = run_chimera_split("run -m " + model + " -p Hi -q --json-schema @/nonexistent.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent.json"), std::string::npos) << r.err;
  EXPECT_FALSE(r.signaled);
}

}  // namespace
}  // namespace chimera::test
