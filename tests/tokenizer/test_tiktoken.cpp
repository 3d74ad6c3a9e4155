// Tokenizer::from_tiktoken against independent references: Llama 3's rank
// file with llama.cpp's llama-bpe vectors (the Llama 3 GGUF is not shipped),
// and o200k_base / cl100k_base with jtokkit's reference encodings.
#include <fstream>

#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace chimera::test {
namespace {

using tokenizer::TiktokenOptions;
using tokenizer::Tokenizer;

std::string tiktoken_dir() {
  const std::string s = shared_dir();
  return s.empty() ? s : s + "/tokenizers/tiktoken";
}

// Minimal CSV reader: quoted fields with "" escapes.
std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  const std::string text = read_text(path);
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field.push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(field);
      field.clear();
    } else if (c == '\n') {
      rows.back().push_back(field);
      field.clear();
      rows.emplace_back();
    } else if (c != '\r') {
      field.push_back(c);
    }
  }
  if (!field.empty() || !rows.back().empty()) rows.back().push_back(field);
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string num;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      num.push_back(c);
    } else if (!num.empty()) {
      ids.push_back(std::stoi(num));
      num.clear();
    }
  }
  if (!num.empty()) ids.push_back(std::stoi(num));
  return ids;
}

void check_csv(const Tokenizer& tok, const std::string& csv_path, const char* name) {
  const auto rows = read_csv(csv_path);
  ASSERT_GT(rows.size(), 100u);
  int passed = 0, total = 0;
  for (size_t i = 1; i < rows.size(); ++i) {  // row 0 is the header
    if (rows[i].size() < 2) continue;
    ++total;
    const auto expected = parse_ids(rows[i][1]);
    const auto got = tok.encode(rows[i][0], false, false);
    if (got == expected) {
      ++passed;
    } else {
      ADD_FAILURE() << name << " input '" << rows[i][0] << "'\n  expected: " << ids_to_string(expected)
                    << "\n  got:      " << ids_to_string(got);
    }
    EXPECT_EQ(tok.decode(got, true), rows[i][0]);
  }
  std::printf("[ vectors  ] %s: %d/%d\n", name, passed, total);
}

TEST(Tiktoken, Llama3MatchesLlamaBpeVectors) {
  CHIMERA_REQUIRE_SHARED(shared);
  TiktokenOptions o;
  o.pre = "llama3";
  o.special_tokens = {{"<|begin_of_text|>", 128000}, {"<|end_of_text|>", 128001}, {"<|eot_id|>", 128009}};
  o.bos = 128000;
  o.eos = 128001;
  o.add_bos = true;
  auto r = Tokenizer::from_tiktoken(tiktoken_dir() + "/llama3.tiktoken", o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const Tokenizer& tok = **r;
  EXPECT_EQ(tok.n_vocab(), 128010);
  const auto cases = load_vocab_cases(vocab_dir() + "/ggml-vocab-llama-bpe.gguf");
  ASSERT_GT(cases.size(), 10u);
  int passed = 0;
  for (const auto& c : cases) {
    const auto got = tok.encode(c.input, false, false);
    if (got == c.expected) {
      ++passed;
    } else {
      ADD_FAILURE() << "llama-bpe input '" << c.input << "'\n  expected: " << ids_to_string(c.expected)
                    << "\n  got:      " << ids_to_string(got);
    }
  }
  std::printf("[ vectors  ] llama-bpe (tiktoken): %d/%zu\n", passed, cases.size());
  // Special tokens and BOS.
  const auto ids = tok.encode("<|begin_of_text|>Hi<|eot_id|>", true, true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], 128000);
  EXPECT_EQ(ids[1], 128000);
  EXPECT_EQ(ids.back(), 128009);
  EXPECT_TRUE(tok.is_eog(128009));
  EXPECT_TRUE(tok.is_eog(128001));
}

TEST(Tiktoken, O200kMatchesReference) {
  CHIMERA_REQUIRE_SHARED(shared);
  TiktokenOptions o;
  o.pre = "gpt-4o";
  o.special_tokens = {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}};
  auto r = Tokenizer::from_tiktoken(tiktoken_dir() + "/o200k_base.tiktoken", o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)->n_vocab(), 200019);
  check_csv(**r, tiktoken_dir() + "/o200k_base_encodings.csv", "o200k_base");
}

TEST(Tiktoken, Cl100kMatchesReference) {
  CHIMERA_REQUIRE_SHARED(shared);
  TiktokenOptions o;
  o.pre = "llama3";  // cl100k's pattern is the one Llama 3 adopted
  o.special_tokens = {{"<|endoftext|>", 100257}};
  auto r = Tokenizer::from_tiktoken(tiktoken_dir() + "/cl100k_base.tiktoken", o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE((*r)->add_bos());
  check_csv(**r, tiktoken_dir() + "/cl100k_base_encodings.csv", "cl100k_base");
}

TEST(Tiktoken, MalformedRankFilesAreErrors) {
  TiktokenOptions o;
  EXPECT_FALSE(Tokenizer::from_tiktoken_text("", o).is_ok());
  EXPECT_FALSE(Tokenizer::from_tiktoken_text("IQ==\n", o).is_ok());         // no rank
  EXPECT_FALSE(Tokenizer::from_tiktoken_text("I*Q== 0\n", o).is_ok());      // bad base64
  EXPECT_FALSE(Tokenizer::from_tiktoken_text("IQ== x\n", o).is_ok());       // bad rank
  EXPECT_FALSE(Tokenizer::from_tiktoken_text("IQ== 0\nIg== 0\n", o).is_ok());  // rank twice
  o.pre = "no-such-pre";
  auto r = Tokenizer::from_tiktoken_text("IQ== 0\n", o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("no-such-pre"), std::string::npos);
  EXPECT_FALSE(Tokenizer::from_tiktoken("/nonexistent/file.tiktoken", TiktokenOptions{}).is_ok());
}

TEST(Tiktoken, TinyRankFileMergesByRank) {
  // Bytes 'a','b','c' plus "ab" (rank 3) and "abc" (rank 4): "abc" -> [4].
  const std::string ranks = "YQ== 0\nYg== 1\nYw== 2\nYWI= 3\nYWJj 4\nYmM= 5\n";
  TiktokenOptions o;
  o.pre = "gpt-2";
  auto r = Tokenizer::from_tiktoken_text(ranks, o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)->encode("abc", false, false), (std::vector<int32_t>{4}));
  EXPECT_EQ((*r)->encode("abcb", false, false), (std::vector<int32_t>{4, 1}));
  EXPECT_EQ((*r)->encode("bc", false, false), (std::vector<int32_t>{5}));
  EXPECT_EQ((*r)->decode({3, 2}, false), "abc");
}

}  // namespace
}  // namespace chimera::test
