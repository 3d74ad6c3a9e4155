// Golden tests: every llama.cpp vocab-only GGUF with .inp/.out vectors (made
// by the Hugging Face tokenizers) must tokenize each input exactly, called the
// way llama.cpp's test-tokenizer-0 does: no BOS/EOS, special text not parsed.
// Also checks that decoding the ids gives the input back where the vocabulary
// can represent it losslessly.
#include "tokenizer_test_util.h"

namespace chimera::test {
namespace {

class VocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabVectors, MatchesReference) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string name = GetParam();
  const auto cases = load_vocab_cases(vocab_dir() + "/ggml-vocab-" + name + ".gguf");
  ASSERT_GT(cases.size(), 10u) << "no vectors for " << name;
  auto tok = load_vocab(name);
  ASSERT_NE(tok, nullptr);
  int passed = 0;
  for (const auto& c : cases) {
    const auto got = tok->encode(c.input, /*add_special=*/false, /*parse_special=*/false);
    if (got == c.expected) {
      ++passed;
    } else {
      ADD_FAILURE() << name << " input '" << c.input << "'\n  expected: " << ids_to_string(c.expected)
                    << "\n  got:      " << ids_to_string(got);
    }
  }
  std::printf("[ vectors  ] %s: %d/%zu\n", name.c_str(), passed, cases.size());
}

INSTANTIATE_TEST_SUITE_P(Gguf, VocabVectors,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "falcon", "mpt", "starcoder", "refact",
                                           "deepseek-llm", "deepseek-coder", "bert-bge"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

// Decoding reproduces the input for byte-exact vocabularies (BPE without
// clean-up, SentencePiece with the leading space removed).
class VocabRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabRoundTrip, DecodeGivesInputBack) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string name = GetParam();
  const auto cases = load_vocab_cases(vocab_dir() + "/ggml-vocab-" + name + ".gguf");
  auto tok = load_vocab(name);
  ASSERT_NE(tok, nullptr);
  for (const auto& c : cases) {
    const auto ids = tok->encode(c.input, false, false);
    std::string joined;
    for (int32_t id : ids) joined += tok->token_to_piece(id, true);
    if (tok->add_space_prefix() && !joined.empty() && joined[0] == ' ') joined.erase(0, 1);
    EXPECT_EQ(joined, c.input) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Gguf, VocabRoundTrip,
                         ::testing::Values("gpt-2", "falcon", "mpt", "starcoder", "refact", "deepseek-llm",
                                           "deepseek-coder", "llama-spm", "phi-3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

// The vocabularies without vectors still load and tokenize.
TEST(VocabLoad, NoVectorVocabularies) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const char* name : {"baichuan", "gpt-neox"}) {
    auto tok = load_vocab(name);
    ASSERT_NE(tok, nullptr) << name;
    const auto ids = tok->encode("Hello world", true, true);
    EXPECT_FALSE(ids.empty()) << name;
  }
}

}  // namespace
}  // namespace chimera::test
