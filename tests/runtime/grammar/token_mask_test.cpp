// Token masks on real vocabularies (Llama 3 and o200k via tiktoken, SPM with
// byte fallback, GPT-2 byte-level BPE): the trie walk gives exactly the
// tokens a byte-by-byte check accepts, end-of-generation tokens only once the
// grammar is complete, partial UTF-8 through byte tokens; the sampler never
// draws a masked token, greedy or not.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>

#include "grammar_test_util.h"
#include "runtime/grammar/constrained_sampling.h"
#include "runtime/sampler.h"

namespace chimera::test {
namespace {

bool bit(const std::vector<uint64_t>& bits, int32_t id) { return (bits[(size_t)id >> 6] >> (id & 63)) & 1; }

// Compares the mask after each prefix with a brute-force check of every token.
void check_masks_against_brute_force(VocabKind kind, const std::string& text) {
  auto vocab = real_vocab(kind);
  if (!vocab) GTEST_SKIP() << "shared vocabularies not found";
  auto g = CompiledGrammar::compile({GrammarSource::Kind::kJsonObject, ""}, vocab).value();
  std::vector<uint64_t> bits;
  for (size_t cut : {size_t{0}, size_t{1}, size_t{2}, text.size() / 2, text.size()}) {
    GrammarMatcher m(g);
    ASSERT_TRUE(m.accept_bytes(text.substr(0, cut))) << text.substr(0, cut);
    auto n = m.fill_mask(bits, vocab->n_vocab());
    ASSERT_TRUE(n.is_ok()) << n.status().message();
    size_t expected = 0;
    for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
      bool ok;
      if (vocab->is_eog(id)) {
        ok = m.is_complete();
      } else {
        GrammarMatcher probe = m;
        ok = !vocab->bytes(id).empty() && probe.accept_bytes(vocab->bytes(id));
      }
      expected += ok;
      ASSERT_EQ(bit(bits, id), ok) << "token " << id << " '" << vocab->bytes(id) << "' after '" << text.substr(0, cut) << "'";
    }
    EXPECT_EQ(*n, expected);
    EXPECT_GT(*n, 0u);
  }
}

const char* const kText = "{\"name\": \"Ada \xc3\xa9\", \"n\": [1.5e3, -2, true], \"o\": {}}";

TEST(TokenMask, MatchesBruteForceLlama3) { check_masks_against_brute_force(VocabKind::kLlama3, kText); }
TEST(TokenMask, MatchesBruteForceO200k) { check_masks_against_brute_force(VocabKind::kO200k, kText); }
TEST(TokenMask, MatchesBruteForceSpm) { check_masks_against_brute_force(VocabKind::kSpm, kText); }
TEST(TokenMask, MatchesBruteForceGpt2) { check_masks_against_brute_force(VocabKind::kGpt2, kText); }

TEST(TokenMask, EndOfGenerationOnlyWhenComplete) {
  auto vocab = real_vocab(VocabKind::kLlama3);
  if (!vocab) GTEST_SKIP() << "shared vocabularies not found";
  auto g = compile_gbnf("root ::= \"yes\" | \"no\"\n", vocab);
  ASSERT_TRUE(g);
  GrammarMatcher m(g);
  std::vector<uint64_t> bits;
  ASSERT_TRUE(m.fill_mask(bits, vocab->n_vocab()).is_ok());
  for (int32_t e : vocab->eog_ids()) EXPECT_FALSE(bit(bits, e));
  EXPECT_FALSE(m.accept(vocab->eog_ids()[0]).is_ok());
  ASSERT_TRUE(m.accept_bytes("ye"));
  EXPECT_FALSE(m.accept_bytes("x"));
  ASSERT_TRUE(m.accept_bytes("s"));
  auto n = m.fill_mask(bits, vocab->n_vocab());
  ASSERT_TRUE(n.is_ok());
  EXPECT_EQ(*n, vocab->eog_ids().size());  // only the end tokens remain
  for (int32_t e : vocab->eog_ids()) EXPECT_TRUE(bit(bits, e));
  ASSERT_TRUE(m.accept(vocab->eog_ids()[0]).is_ok());
  EXPECT_TRUE(m.finished());
  n = m.fill_mask(bits, vocab->n_vocab());
  EXPECT_EQ(*n, 0u);
}

TEST(TokenMask, SpmByteFallbackBuildsUtf8) {
  const tokenizer::Tokenizer* tok = real_tokenizer(VocabKind::kSpm);
  if (!tok) GTEST_SKIP() << "shared vocabularies not found";
  auto vocab = real_vocab(VocabKind::kSpm);
  auto g = compile_gbnf("root ::= \"\\\"\" [^\\x00-\\x7F]+ \"\\\"\"\n", vocab);
  ASSERT_TRUE(g);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_bytes("\""));
  std::vector<uint64_t> bits;
  ASSERT_TRUE(m.fill_mask(bits, vocab->n_vocab()).is_ok());
  const int32_t c3 = tok->find_token("<0xC3>"), a9 = tok->find_token("<0xA9>"), ff = tok->find_token("<0xFF>");
  const int32_t a = tok->find_token("a");
  ASSERT_GE(c3, 0);
  ASSERT_GE(a9, 0);
  ASSERT_GE(ff, 0);
  ASSERT_GE(a, 0);
  EXPECT_TRUE(bit(bits, c3));   // a UTF-8 lead byte
  EXPECT_FALSE(bit(bits, a9));  // a lone continuation byte
  EXPECT_FALSE(bit(bits, ff));  // never valid UTF-8
  EXPECT_FALSE(bit(bits, a));   // ASCII excluded by the class
  ASSERT_TRUE(m.accept(c3).is_ok());
  ASSERT_TRUE(m.fill_mask(bits, vocab->n_vocab()).is_ok());
  EXPECT_TRUE(bit(bits, a9));   // completes U+00E9
  EXPECT_FALSE(bit(bits, c3));
  EXPECT_FALSE(bit(bits, tok->find_token("\"") >= 0 ? tok->find_token("\"") : a));  // mid-character: no quote
  ASSERT_TRUE(m.accept(a9).is_ok());
  EXPECT_FALSE(m.accept(a).is_ok());  // rejected, state unchanged
  EXPECT_TRUE(m.accept_bytes("\""));
  EXPECT_TRUE(m.is_complete());
}

TEST(TokenMask, SamplerDrawsOnlyAllowedTokens) {
  auto vocab = real_vocab(VocabKind::kLlama3);
  if (!vocab) GTEST_SKIP() << "shared vocabularies not found";
  auto g = compile_gbnf("root ::= [0-9]+\n", vocab);
  ASSERT_TRUE(g);
  GrammarMatcher m(g);
  std::vector<uint64_t> bits;
  auto n = m.fill_mask(bits, vocab->n_vocab());
  ASSERT_TRUE(n.is_ok());
  ASSERT_GT(*n, 10u);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> logits((size_t)vocab->n_vocab());
  for (auto& x : logits) x = nd(rng);
  // Greedy: the best allowed token.
  int32_t best = -1;
  for (int32_t id = 0; id < vocab->n_vocab(); ++id)
    if (bit(bits, id) && (best < 0 || logits[(size_t)id] > logits[(size_t)best])) best = id;
  runtime::SamplingParams greedy;
  greedy.temperature = 0;
  runtime::Sampler gs(greedy);
  EXPECT_EQ(gs.sample(logits.data(), vocab->n_vocab(), bits.data()), best);
  // Stochastic, with top-k/top-p/min-p: always allowed.
  runtime::SamplingParams p;
  p.temperature = 1.5f;
  p.seed = 11;
  runtime::Sampler s(p);
  for (int i = 0; i < 300; ++i) {
    const int32_t t = s.sample(logits.data(), vocab->n_vocab(), bits.data());
    ASSERT_TRUE(t >= 0 && bit(bits, t)) << t;
  }
  auto dist = s.distribution(logits.data(), vocab->n_vocab(), bits.data());
  for (const auto& tp : dist) {
    if (tp.p > 0) {
      EXPECT_TRUE(bit(bits, tp.id));
    }
  }
  // Every allowed token at -inf: still an allowed token, never a masked one.
  for (int32_t id = 0; id < vocab->n_vocab(); ++id)
    if (bit(bits, id)) logits[(size_t)id] = -std::numeric_limits<float>::infinity();
  EXPECT_TRUE(bit(bits, gs.sample(logits.data(), vocab->n_vocab(), bits.data())));
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(bit(bits, s.sample(logits.data(), vocab->n_vocab(), bits.data())));
}

TEST(TokenMask, RepeatedStatesHitTheCache) {
  auto vocab = real_vocab(VocabKind::kO200k);
  if (!vocab) GTEST_SKIP() << "shared vocabularies not found";
  auto g = CompiledGrammar::compile({GrammarSource::Kind::kJsonObject, ""}, vocab).value();
  GrammarMatcher m(g);
  std::vector<uint64_t> bits;
  ASSERT_TRUE(m.accept_bytes("{\"k\": \"a"));
  ASSERT_TRUE(m.fill_mask(bits, vocab->n_vocab()).is_ok());
  const size_t misses = g->mask_cache_misses();
  ASSERT_TRUE(m.accept_bytes("bcdef"));  // still inside the same string: the same state
  ASSERT_TRUE(m.fill_mask(bits, vocab->n_vocab()).is_ok());
  EXPECT_EQ(g->mask_cache_misses(), misses);
  EXPECT_GE(g->mask_cache_hits(), 1u);
  // A model with more logits than tokens: the extra ids stay masked.
  auto n = m.fill_mask(bits, vocab->n_vocab() + 100);
  ASSERT_TRUE(n.is_ok());
  for (int32_t id = vocab->n_vocab(); id < vocab->n_vocab() + 100; ++id) EXPECT_FALSE(bit(bits, id));
}

TEST(TokenMask, GreedyFastPathEqualsMaskedArgmax) {
  // sample_constrained's greedy shortcut (keep the unmasked argmax when the
  // grammar accepts it) must pick exactly what masking first would, including
  // steps where the favourite token is not allowed.
  auto vocab = real_vocab(VocabKind::kLlama3);
  if (!vocab) GTEST_SKIP() << "shared vocabularies not found";
  auto g = CompiledGrammar::compile({GrammarSource::Kind::kJsonObject, ""}, vocab).value();
  runtime::SamplingParams greedy;
  greedy.temperature = 0;
  runtime::Sampler fast(greedy), slow(greedy);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits((size_t)vocab->n_vocab());
  GrammarMatcher a(g), b(g);
  std::vector<uint64_t> scratch, bits;
  const int32_t brace = vocab->n_vocab() > 90 ? 90 : 0;  // some id; boosted below at times
  int shortcut_steps = 0;
  for (int step = 0; step < 60; ++step) {
    for (auto& x : logits) x = nd(rng);
    if (step % 3 == 0) logits[(size_t)brace] = 50.0f;  // a favourite that is usually not allowed
    auto ta = runtime::grammar::sample_constrained(fast, a, logits.data(), vocab->n_vocab(), scratch);
    ASSERT_TRUE(ta.is_ok()) << ta.status().message();
    auto n = b.fill_mask(bits, vocab->n_vocab());
    ASSERT_TRUE(n.is_ok());
    if (*n == 0) {
      EXPECT_EQ(*ta, -1);
      break;
    }
    const int32_t tb = slow.sample(logits.data(), vocab->n_vocab(), bits.data());
    ASSERT_EQ(*ta, tb) << "step " << step;
    ASSERT_TRUE(b.accept(tb).is_ok());
    shortcut_steps += g->mask_cache_misses() + g->mask_cache_hits() < (size_t)(2 * (step + 1));
    if (b.finished()) break;
  }
  EXPECT_GT(shortcut_steps, 0);
}

TEST(TokenMask, StateLimitsGiveErrorsNotHangs) {
  // Deep nesting under a small state budget: a clear error from the matcher.
  runtime::grammar::GrammarOptions opts;
  opts.limits.max_states = 50;
  auto g = CompiledGrammar::compile({GrammarSource::Kind::kGbnf, "root ::= \"(\" root \")\" | \"x\"\n"}, byte_vocab(), opts);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  GrammarMatcher m(*g);
  std::vector<uint64_t> bits;
  bool failed = false;
  for (int i = 0; i < 200 && !failed; ++i) {
    auto n = m.fill_mask(bits, 257);
    if (!n.is_ok()) {
      EXPECT_NE(n.status().message().find("matcher states"), std::string::npos) << n.status().message();
      failed = true;
      break;
    }
    if (!m.accept_bytes("(")) failed = true;
  }
  EXPECT_TRUE(failed);
}

}  // namespace
}  // namespace chimera::test
