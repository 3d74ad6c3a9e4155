// SentencePiece tokenizer.model reading (format/hf/sentencepiece_model.h) and
// its use by `convert`:
//  * the real tok512.model parses to the vocabulary llama.cpp wrote into
//    stories260K.gguf (same pieces, scores and types, id by id);
//  * every truncation and random corruption of it is answered with a clean
//    error or a result, never a crash (hostile input; also hand-made wire data
//    with oversized lengths, groups and 11-byte varints);
//  * an HF folder with tokenizer.model converts to a "llama" SPM vocabulary
//    padded to config.vocab_size with [PAD<id>] entries, and added tokens from
//    tokenizer_config.json become CONTROL / USER_DEFINED.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "format/gguf/gguf.h"
#include "format/hf/hf_convert.h"
#include "format/hf/sentencepiece_model.h"
#include "test_util.h"

namespace chimera::format::hf {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> tok512(const std::string& shared) {
  return test::read_file_bytes(shared + "/models/bitnet-llama2c/tok512.model");
}

TEST(SentencePieceModel, Tok512EqualsTheVocabularyLlamaCppWrote) {
  CHIMERA_REQUIRE_SHARED(shared);
  const auto bytes = tok512(shared);
  ASSERT_FALSE(bytes.empty());
  auto pieces = parse_sentencepiece_model(bytes.data(), bytes.size());
  ASSERT_TRUE(pieces.is_ok()) << pieces.status().message();
  auto g = GgufFile::open(shared + "/models/stories260K.gguf");
  ASSERT_TRUE(g.is_ok());
  const auto* tokens = (*g)->find("tokenizer.ggml.tokens");
  const auto* scores = (*g)->find("tokenizer.ggml.scores");
  const auto* types = (*g)->find("tokenizer.ggml.token_type");
  ASSERT_TRUE(tokens && scores && types);
  ASSERT_EQ(pieces->size(), tokens->arr.size());
  for (size_t i = 0; i < pieces->size(); ++i) {
    const SpmPiece& p = (*pieces)[i];
    EXPECT_EQ(p.piece, tokens->arr[i].s) << i;
    EXPECT_EQ(p.score, (float)scores->arr[i].f) << i;
    EXPECT_EQ((int64_t)p.type, types->arr[i].i) << i << " " << p.piece;
  }
}

TEST(SentencePieceModel, HostileBytesGiveErrorsNotCrashes) {
  CHIMERA_REQUIRE_SHARED(shared);
  const auto bytes = tok512(shared);
  ASSERT_FALSE(bytes.empty());
  int errors = 0;
  for (size_t n = 0; n < bytes.size(); n += 1 + n / 64) {
    auto r = parse_sentencepiece_model(bytes.data(), n);
    if (!r.is_ok()) {
      ++errors;
      EXPECT_NE(r.status().message().find("tokenizer.model"), std::string::npos);
    }
  }
  EXPECT_GT(errors, 0);
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    auto b = bytes;
    for (int k = 0; k < 1 + round % 8; ++k) b[rng() % b.size()] = (uint8_t)rng();
    (void)parse_sentencepiece_model(b.data(), b.size());
  }
  const std::vector<std::vector<uint8_t>> bad = {
      {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F},                              // piece longer than the input
      {0x0B},                                                            // start group
      {0x0A, 0x02, 0x10, 0x01},                                          // piece without text
      {0x0A, 0x05, 0x0A, 0x01, 'a', 0x18, 0x09},                         // piece type 9
      {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},  // 11-byte varint
      {0x12, 0x00},                                                      // no pieces at all
  };
  for (const auto& b : bad) EXPECT_FALSE(parse_sentencepiece_model(b.data(), b.size()).is_ok());
  const std::vector<uint8_t> one = {0x0A, 0x0A, 0x0A, 0x01, 'a', 0x15, 0x00, 0x00, 0x80, 0xBF, 0x18, 0x03};
  auto r = parse_sentencepiece_model(one.data(), one.size());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].piece, "a");
  EXPECT_EQ((*r)[0].score, -1.0f);
  EXPECT_EQ((*r)[0].type, SpmPieceType::kControl);
}

TEST(SentencePieceModel, ConvertWritesAPaddedLlamaVocabulary) {
  CHIMERA_REQUIRE_SHARED(shared);
  const fs::path dir = test::temp_path("hf-spm-vocab");
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(shared + "/models/bitnet-llama2c/tok512.model", dir / "tokenizer.model");
  const nlohmann::json config = {{"vocab_size", 520}, {"bos_token_id", 1}, {"eos_token_id", 2}};
  std::ofstream(dir / "tokenizer_config.json")
      << nlohmann::json{{"add_bos_token", true},
                        {"added_tokens_decoder",
                         {{"512", {{"content", "<|user|>"}, {"special", false}}},
                          {"513", {{"content", "\xE2\x96\x81hello"}, {"special", false}}}}}}
             .dump();
  GgufWriter w;
  ASSERT_TRUE(write_tokenizer(dir.string(), config, w).is_ok());
  const std::string out = test::temp_path("hf-spm-vocab.gguf");
  ASSERT_TRUE(w.write(out).is_ok());
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ((*g)->get_string("tokenizer.ggml.model").value_or(""), "llama");
  EXPECT_EQ((*g)->get_string("tokenizer.ggml.pre").value_or(""), "default");
  const auto* tokens = (*g)->find("tokenizer.ggml.tokens");
  const auto* types = (*g)->find("tokenizer.ggml.token_type");
  const auto* scores = (*g)->find("tokenizer.ggml.scores");
  ASSERT_TRUE(tokens && types && scores);
  ASSERT_EQ(tokens->arr.size(), 520u);
  EXPECT_EQ(tokens->arr[512].s, "<|user|>");  // shaped like a special token
  EXPECT_EQ(types->arr[512].i, 3);
  EXPECT_EQ(tokens->arr[513].s, " hello");  // user-defined: word mark -> space
  EXPECT_EQ(types->arr[513].i, 4);
  EXPECT_EQ((float)scores->arr[513].f, -1000.f);
  EXPECT_EQ(tokens->arr[519].s, "[PAD519]");
  EXPECT_EQ(types->arr[519].i, 5);
  EXPECT_EQ((float)scores->arr[519].f, -10000.f);
  EXPECT_EQ(types->arr[0].i, 2);  // <unk>
  EXPECT_EQ(types->arr[1].i, 3);  // <s>
  EXPECT_EQ(types->arr[3].i, 6);  // <0x00>
  EXPECT_EQ((*g)->get_int("tokenizer.ggml.bos_token_id").value_or(-1), 1);
  // A vocab_size below the piece count drops the rest; a corrupt model is an error naming the file.
  std::ofstream(dir / "tokenizer.model", std::ios::binary | std::ios::trunc) << "\x0a\xff\xff";
  GgufWriter w2;
  Status s = write_tokenizer(dir.string(), config, w2);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("tokenizer.model"), std::string::npos) << s.message();
  fs::remove_all(dir);
  fs::remove(out);
}

}  // namespace
}  // namespace chimera::format::hf
