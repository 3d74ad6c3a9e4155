// Inconsistent or truncated vocabularies give clear errors (never a crash),
// both through Tokenizer::from_spec and through a GGUF file written with
// GgufWriter; every pre-tokenizer pattern compiles and splits losslessly.
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace chimera::test {
namespace {

using tokenizer::Tokenizer;
using tokenizer::VocabSpec;

VocabSpec tiny_spm() {
  VocabSpec s;
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "a", "b", "\xe2\x96\x81"};
  s.scores = {0, 0, 0, -1, -2, -3, -4};
  s.token_types = {2, 3, 3, 1, 1, 1, 1};
  return s;
}

VocabSpec tiny_bpe() {
  VocabSpec s;
  s.model = "gpt2";
  s.pre = "gpt-2";
  s.tokens = {"a", "b", "ab", "\xc4\xa0", "\xc4\xa0" "a"};  // Ġ = space
  s.merges = {"a b", "\xc4\xa0 a"};
  return s;
}

std::string error_of(const VocabSpec& s) {
  auto r = Tokenizer::from_spec(s);
  return r.is_ok() ? std::string("<ok>") : r.status().message();
}

TEST(VocabErrors, FromSpec) {
  ASSERT_TRUE(Tokenizer::from_spec(tiny_spm()).is_ok());
  ASSERT_TRUE(Tokenizer::from_spec(tiny_bpe()).is_ok());

  auto s = tiny_spm();
  s.scores.pop_back();
  EXPECT_NE(error_of(s).find("scores has 6 entries but tokenizer.ggml.tokens has 7"), std::string::npos)
      << error_of(s);
  s = tiny_spm();
  s.token_types.push_back(1);
  EXPECT_NE(error_of(s).find("token_type"), std::string::npos) << error_of(s);
  s = tiny_spm();
  s.tokens.clear();
  s.scores.clear();
  s.token_types.clear();
  EXPECT_NE(error_of(s).find("empty"), std::string::npos) << error_of(s);
  s = tiny_spm();
  s.tokens[4] = "b";
  EXPECT_NE(error_of(s).find("duplicate"), std::string::npos) << error_of(s);
  s = tiny_spm();
  s.model = "t5x";
  EXPECT_NE(error_of(s).find("t5x"), std::string::npos) << error_of(s);

  auto b = tiny_bpe();
  b.merges.push_back("nospace");
  EXPECT_NE(error_of(b).find("merges[2]"), std::string::npos) << error_of(b);
  b = tiny_bpe();
  b.merges.clear();
  EXPECT_NE(error_of(b).find("merges"), std::string::npos) << error_of(b);
  b = tiny_bpe();
  b.pre = "klingon";
  EXPECT_NE(error_of(b).find("klingon"), std::string::npos) << error_of(b);
  // Merges naming unknown tokens are skipped, not fatal; out-of-range special
  // ids fall back to the defaults (none for this tiny vocabulary).
  b = tiny_bpe();
  b.merges.push_back("zz yy");
  b.bos = 1000;
  b.eos = -7;
  auto t = Tokenizer::from_spec(b);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ((*t)->bos(), -1);
  EXPECT_EQ((*t)->encode("ab a", true, false), (std::vector<int32_t>{2, 4}));
}

TEST(VocabErrors, TinyVocabulariesTokenize) {
  auto spm = Tokenizer::from_spec(tiny_spm());
  ASSERT_TRUE(spm.is_ok());
  EXPECT_EQ((*spm)->encode("a b", true, false), (std::vector<int32_t>{1, 3, 6, 5}));
  // 'c' has no token and no byte fallback: <unk>.
  EXPECT_EQ((*spm)->encode("c", false, false), (std::vector<int32_t>{6, 0}));
  EXPECT_EQ((*spm)->decode({1, 3, 6, 5}, false), "a b");
}

TEST(VocabErrors, FromGgufFile) {
  auto build = [](auto&& edit) {
    format::GgufWriter w;
    w.set("general.architecture", format::GgufValue::from_string("llama"));
    w.set("tokenizer.ggml.model", format::GgufValue::from_string("llama"));
    w.set("tokenizer.ggml.tokens", format::GgufValue::from_strings({"<unk>", "<s>", "</s>", "a"}));
    w.set("tokenizer.ggml.scores", format::GgufValue::from_f32s({0, 0, 0, -1}));
    w.set("tokenizer.ggml.token_type", format::GgufValue::from_i32s({2, 3, 3, 1}));
    edit(w);
    const std::string path = temp_path("vocab.gguf");
    EXPECT_TRUE(w.write(path).is_ok());
    auto g = format::GgufFile::open(path);
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    auto t = Tokenizer::from_gguf(**g);
    return t.is_ok() ? std::string("<ok>") : t.status().message();
  };
  EXPECT_EQ(build([](format::GgufWriter&) {}), "<ok>");
  EXPECT_NE(build([](format::GgufWriter& w) {
              w.set("tokenizer.ggml.scores", format::GgufValue::from_f32s({0, 0}));
            }).find("scores"),
            std::string::npos);
  EXPECT_NE(build([](format::GgufWriter& w) {
              w.set("tokenizer.ggml.tokens", format::GgufValue::from_i32s({1, 2, 3, 4}));
            }).find("tokenizer.ggml.tokens must be an array of strings"),
            std::string::npos);
  EXPECT_NE(build([](format::GgufWriter& w) {
              w.set("tokenizer.ggml.model", format::GgufValue::from_u32(3));
            }).find("tokenizer.ggml.model"),
            std::string::npos);
  EXPECT_NE(build([](format::GgufWriter& w) {
              w.set("tokenizer.ggml.add_bos_token", format::GgufValue::from_string("yes"));
            }).find("add_bos_token"),
            std::string::npos);
  EXPECT_NE(build([](format::GgufWriter& w) {
              w.set("tokenizer.ggml.model", format::GgufValue::from_string("gpt2"));
            }).find("merges"),
            std::string::npos);
  // A file without any tokenizer.
  format::GgufWriter empty;
  empty.set("general.architecture", format::GgufValue::from_string("llama"));
  const std::string path = temp_path("empty.gguf");
  ASSERT_TRUE(empty.write(path).is_ok());
  auto g = format::GgufFile::open(path);
  ASSERT_TRUE(g.is_ok());
  auto t = Tokenizer::from_gguf(**g);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("tokenizer.ggml.model"), std::string::npos);
}

TEST(PreTokenizer, EveryPatternCompilesAndSplitsLosslessly) {
  const std::string text =
      "Hello, y'all! How're you 😁 ?我想在apple工作1314151天～ \n\n  \t x  1234567 \xff\xc3 é ΆΈ ｡ <sentinel:12>";
  const std::string clean = tokenizer::utf8_sanitize(text);
  for (const std::string& name : tokenizer::known_pre_tokenizers()) {
    auto spec = tokenizer::pre_tokenizer_spec(name);
    ASSERT_TRUE(spec.is_ok()) << name;
    auto sp = tokenizer::RegexSplitter::create(spec->regexes);
    ASSERT_TRUE(sp.is_ok()) << name << ": " << sp.status().message();
    std::string joined;
    for (const auto& piece : sp->split(text)) {
      EXPECT_FALSE(piece.empty()) << name;
      joined += piece;
    }
    EXPECT_EQ(joined, clean) << name;
  }
  EXPECT_FALSE(tokenizer::pre_tokenizer_spec("nope").is_ok());
  EXPECT_EQ(tokenizer::pre_tokenizer_spec("").value().name, "default");
}

TEST(PreTokenizer, Llama3DigitsAndContractions) {
  auto spec = tokenizer::pre_tokenizer_spec("llama3");
  auto sp = tokenizer::RegexSplitter::create(spec->regexes);
  ASSERT_TRUE(sp.is_ok());
  EXPECT_EQ(sp->split("1234567 I'M"), (std::vector<std::string>{"123", "456", "7", " I", "'M"}));
  auto sc = tokenizer::RegexSplitter::create(tokenizer::pre_tokenizer_spec("starcoder")->regexes);
  EXPECT_EQ(sc->split("x 12"), (std::vector<std::string>{"x", " ", "1", "2"}));
}

TEST(Unicode, Utf8AndTables) {
  using namespace tokenizer;
  size_t pos = 0;
  uint32_t cp = 0;
  EXPECT_FALSE(utf8_next("\xC0\x80", pos, cp));  // overlong
  pos = 0;
  EXPECT_FALSE(utf8_next("\xED\xA0\x80", pos, cp));  // surrogate
  pos = 0;
  EXPECT_TRUE(utf8_next("\xF0\x9F\xA6\x99", pos, cp));
  EXPECT_EQ(cp, 0x1F999u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xF0\x9F\xA6\x99"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xE2"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xE0\x80"), 0u);  // can never complete
  EXPECT_EQ(utf8_sanitize("a\xFF" "b\xE2\x96"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  for (int b = 0; b < 256; ++b) {
    const std::string raw(1, (char)b);
    EXPECT_EQ(bytelevel_decode(bytelevel_encode(raw)), raw);
  }
  EXPECT_EQ(bytelevel_encode(" "), "\xC4\xA0");  // Ġ
  EXPECT_TRUE(is_letter(0x4E16));                 // 世
  EXPECT_TRUE(is_number('7'));
  EXPECT_TRUE(is_punctuation(0x3002));  // 。
  EXPECT_TRUE(is_whitespace(0x3000));
  EXPECT_EQ(to_lower(0x0411), 0x0431u);  // Б -> б
  EXPECT_EQ(nfd_base(0x00E9), (uint32_t)'e');
  EXPECT_EQ(nfd_base(0xAC00), 0xAC00u);  // Hangul stays whole
}

}  // namespace
}  // namespace chimera::test
