// Special tokens (parse_special on/off, BOS/EOS/SEP, EOG, Phi-3's rstrip),
// token_to_piece/decode, StreamDecoder over split multi-byte characters, and
// robustness on hostile input, using the shared vocab-only GGUF files.
#include <random>

#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace chimera::test {
namespace {

using tokenizer::StreamDecoder;
using tokenizer::TokenId;
using Ids = std::vector<int32_t>;

TEST(Special, Phi3ParseSpecialOnOff) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto tok = load_vocab("phi-3");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->find_token("<|user|>"), 32010);
  EXPECT_EQ(tok->find_token("<|end|>"), 32007);
  EXPECT_EQ(tok->find_token("no such token"), -1);
  // <|user|> eats the newline after it (rstrip), then "Hello" starts a new
  // SentencePiece fragment and gets the space prefix.
  EXPECT_EQ(tok->encode("<|user|>\nHello<|end|>", false, true), (Ids{32010, 15043, 32007}));
  EXPECT_EQ(tok->encode("<|user|>\nHello<|end|>", true, true), (Ids{1, 32010, 15043, 32007}));
  const Ids plain = tok->encode("<|user|>\nHello<|end|>", false, false);
  for (int32_t id : plain) {
    EXPECT_NE(id, 32010);
    EXPECT_NE(id, 32007);
  }
  EXPECT_EQ(tok->decode(plain, false), "<|user|>\nHello<|end|>");
  EXPECT_TRUE(tok->is_eog(32007));
  EXPECT_TRUE(tok->is_eog(32000));
  EXPECT_FALSE(tok->is_eog(32010));
  EXPECT_TRUE(tok->is_control(32010));
  EXPECT_EQ(tok->token_to_piece(32010, false), "");
  EXPECT_EQ(tok->token_to_piece(32010, true), "<|user|>");
}

TEST(Special, LlamaSpmBosAndDecode) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto tok = load_vocab("llama-spm");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_EQ(tok->encode("Hello world", true, false), (Ids{1, 15043, 3186}));
  EXPECT_EQ(tok->encode("", true, false), (Ids{1}));
  EXPECT_EQ(tok->encode("", false, false), (Ids{}));
  // "<s>" is a control token: text only when parse_special.
  EXPECT_EQ(tok->encode("<s>Hello", false, true), (Ids{1, 15043}));
  EXPECT_NE(tok->encode("<s>Hello", false, false)[0], 1);
  EXPECT_EQ(tok->decode({1, 15043, 3186}, false), "Hello world");
  EXPECT_EQ(tok->decode({1, 15043, 3186}, true), "<s> Hello world");
  EXPECT_EQ(tok->token_to_piece(13, false), "\n");  // <0x0A>
  EXPECT_EQ(tok->token_to_piece(15043, false), " Hello");
  EXPECT_EQ(tok->token_to_piece(-1, true), "");
  EXPECT_EQ(tok->token_to_piece(1 << 30, true), "");
  EXPECT_EQ(tok->decode({-5, 15043, 99999999}, true), "Hello");
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_FALSE(tok->is_eog(-1));
}

TEST(Special, Gpt2AndMpt) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto gpt2 = load_vocab("gpt-2");
  ASSERT_NE(gpt2, nullptr);
  EXPECT_FALSE(gpt2->add_bos());
  EXPECT_EQ(gpt2->encode("Hello world", true, false), (Ids{15496, 995}));
  EXPECT_EQ(gpt2->encode("<|endoftext|>", false, true), (Ids{50256}));
  EXPECT_NE(gpt2->encode("<|endoftext|>", false, false), (Ids{50256}));
  EXPECT_TRUE(gpt2->is_eog(50256));
  EXPECT_EQ(gpt2->decode(gpt2->encode(" Hello , world !", false, false), false), " Hello, world!");  // clean-up
  // MPT (GPT-NeoX vocabulary): runs of spaces are user-defined tokens, split
  // out even without parse_special.
  auto mpt = load_vocab("mpt");
  ASSERT_NE(mpt, nullptr);
  const Ids a = mpt->encode("a    b", false, false);
  EXPECT_EQ(mpt->decode(a, false), "a    b");
}

TEST(Special, BertAddsClsSep) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto tok = load_vocab("bert-bge");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("Hello world!", true, false), (Ids{101, 7592, 2088, 999, 102}));
  EXPECT_EQ(tok->encode("[CLS] hi", false, true)[0], 101);
  EXPECT_EQ(tok->decode(tok->encode("Hello, world!", false, false), false), "hello, world!");
  EXPECT_EQ(tok->encode(std::string(150, 'a'), false, false), (Ids{100}));  // over-long word -> [UNK]
}

TEST(StreamDecoderTest, SpmByteFallbackEmoji) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto tok = load_vocab("llama-spm");
  ASSERT_NE(tok, nullptr);
  // " 🦙" -> ▁ then four byte tokens <0xF0> <0x9F> <0xA6> <0x99>.
  const Ids ids = tok->encode("a🦙b", false, false);
  StreamDecoder dec(*tok, false);
  std::string all;
  int empty_pushes = 0;
  for (int32_t id : ids) {
    const std::string piece = dec.push(id);
    EXPECT_TRUE(tokenizer::utf8_is_valid(piece));
    if (piece.empty()) ++empty_pushes;
    all += piece;
  }
  all += dec.flush();
  EXPECT_GE(empty_pushes, 3);  // three of the four emoji bytes were held back
  EXPECT_EQ(all, " a🦙b");       // the stream keeps the leading space by default
  StreamDecoder strip(*tok, false, /*strip_leading_space=*/true);
  std::string s;
  for (int32_t id : ids) s += strip.push(id);
  EXPECT_EQ(s + strip.flush(), "a🦙b");
}

TEST(StreamDecoderTest, IncompleteAndInvalidBytes) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto tok = load_vocab("llama-spm");
  ASSERT_NE(tok, nullptr);
  const TokenId b_f0 = tok->find_token("<0xF0>"), b_9f = tok->find_token("<0x9F>"), b_ff = tok->find_token("<0xFF>");
  ASSERT_GE(b_f0, 0);
  StreamDecoder dec(*tok, false);
  EXPECT_EQ(dec.push(b_f0), "");
  EXPECT_EQ(dec.push(b_9f), "");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD");  // incomplete tail -> U+FFFD
  EXPECT_EQ(dec.push(b_ff), "\xEF\xBF\xBD");  // never valid -> replaced at once
  EXPECT_EQ(dec.push(tok->find_token("<0x41>")), "A");
  // A lead byte followed by ASCII: the lead is invalid, the ASCII survives.
  EXPECT_EQ(dec.push(b_f0), "");
  EXPECT_EQ(dec.push(tok->find_token("<0x41>")), "\xEF\xBF\xBD" "A");
  EXPECT_EQ(dec.flush(), "");
}

TEST(StreamDecoderTest, ByteLevelBpeSplitsCharacters) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto tok = load_vocab("gpt-2");
  ASSERT_NE(tok, nullptr);
  const std::string text = "héllo 🦙 世界 ok";
  const Ids ids = tok->encode(text, false, false);
  StreamDecoder dec(*tok, false);
  std::string all;
  for (int32_t id : ids) {
    const std::string p = dec.push(id);
    EXPECT_TRUE(tokenizer::utf8_is_valid(p)) << id;
    all += p;
  }
  EXPECT_EQ(all + dec.flush(), text);
}

TEST(Robustness, HostileInputNeverCrashes) {
  CHIMERA_REQUIRE_SHARED(shared);
  std::mt19937 rng(1234);
  for (const char* name : {"llama-spm", "gpt-2", "deepseek-llm", "falcon", "bert-bge", "phi-3"}) {
    auto tok = load_vocab(name);
    ASSERT_NE(tok, nullptr);
    for (int iter = 0; iter < 50; ++iter) {
      std::string s(rng() % 200, '\0');
      for (auto& c : s) c = (char)(rng() & 0xFF);
      const Ids ids = tok->encode(s, true, true);
      for (int32_t id : ids) EXPECT_TRUE(tok->valid_id(id)) << name;
      (void)tok->decode(ids, true);
      StreamDecoder dec(*tok, true);
      std::string out;
      for (int32_t id : ids) out += dec.push(id);
      out += dec.flush();
      EXPECT_TRUE(tokenizer::utf8_is_valid(out)) << name;
    }
    // Long runs that stress the regexes and merge loops.
    (void)tok->encode(std::string(20000, ' ') + "x", false, false);
    (void)tok->encode(std::string(20000, 'a'), false, false);
    std::string digits(5000, '7');
    EXPECT_FALSE(tok->encode(digits, false, false).empty()) << name;
  }
}

}  // namespace
}  // namespace chimera::test
