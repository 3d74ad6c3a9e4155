// Grammar-constrained sampling cost per token: the token mask of a JSON-schema
// grammar on the o200k (200k ids) and Llama 3 (128k ids) vocabularies in three
// typical states — right after `{"` (a key must follow), inside a string,
// inside a number — measured three ways:
//   first: a fresh grammar (transitions and mask computed from scratch),
//   walk:  transitions known, mask cache cleared (the trie walk alone),
//   cached: the state's mask cached (what a recurring state costs);
// plus the sampler step with and without the mask applied.
// Reads the rank files from $CHIMERA_SHARED/tokenizers/tiktoken (default
// ../shared); skips with a message when they are absent.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "runtime/grammar/grammar_constraint.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace {

using chimera::runtime::grammar::CompiledGrammar;
using chimera::runtime::grammar::GrammarMatcher;
using chimera::runtime::grammar::GrammarSource;
using chimera::runtime::grammar::TokenVocab;

const char* const kSchema =
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":64},)"
    R"("age":{"type":"integer","minimum":0,"maximum":150},"score":{"type":"number"},)"
    R"("tags":{"type":"array","items":{"type":"string"}}},"required":["name","age","score","tags"],)"
    R"("additionalProperties":false})";

const char* const kStates[] = {"{\"", "{\"name\": \"Ada Lov", "{\"name\": \"Ada\", \"age\": 3, \"score\": 12.5"};
const char* const kStateNames[] = {"after_open_quote", "inside_string", "inside_number"};

std::shared_ptr<const TokenVocab> vocab(int which) {
  static std::shared_ptr<const TokenVocab> cache[2];
  if (cache[which]) return cache[which];
  const char* env = std::getenv("CHIMERA_SHARED");
  const std::string dir = std::string(env && *env ? env : "../shared") + "/tokenizers/tiktoken/";
  chimera::tokenizer::TiktokenOptions o;
  std::string file;
  if (which == 0) {
    o.pre = "gpt-4o";
    o.special_tokens = {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}};
    o.eos = 199999;
    file = "o200k_base.tiktoken";
  } else {
    o.pre = "llama3";
    o.special_tokens = {{"<|begin_of_text|>", 128000}, {"<|end_of_text|>", 128001}, {"<|eot_id|>", 128009}};
    o.eos = 128001;
    file = "llama3.tiktoken";
  }
  auto t = chimera::tokenizer::Tokenizer::from_tiktoken(dir + file, o);
  if (!t) return nullptr;
  cache[which] = TokenVocab::from_tokenizer(**t);
  return cache[which];
}

std::shared_ptr<CompiledGrammar> compile(const std::shared_ptr<const TokenVocab>& v) {
  return CompiledGrammar::compile({GrammarSource::Kind::kJsonSchema, kSchema}, v).value();
}

// mode 0 = first, 1 = walk, 2 = cached.
void BM_GrammarMask(benchmark::State& st) {
  const int which = (int)st.range(0), state = (int)st.range(1), mode = (int)st.range(2);
  auto v = vocab(which);
  if (!v) {
    st.SkipWithError("tiktoken files not found (set CHIMERA_SHARED)");
    return;
  }
  st.SetLabel(std::string(which == 0 ? "o200k" : "llama3") + "/" + kStateNames[state] + "/" +
              (mode == 0 ? "first" : mode == 1 ? "walk" : "cached"));
  auto g = compile(v);
  std::vector<uint64_t> bits;
  size_t allowed = 0;
  if (mode != 0) {  // warm the transitions (walk) and the mask cache (cached) outside the timing
    GrammarMatcher m(g);
    if (m.accept_bytes(kStates[state])) (void)m.fill_mask(bits, v->n_vocab());
  }
  for (auto _ : st) {
    if (mode == 0) {
      st.PauseTiming();
      g = compile(v);
      st.ResumeTiming();
    } else if (mode == 1) {
      g->clear_mask_cache();
    }
    GrammarMatcher m(g);
    if (!m.accept_bytes(kStates[state])) {
      st.SkipWithError("state text rejected");
      return;
    }
    allowed = m.fill_mask(bits, v->n_vocab()).value();
    benchmark::DoNotOptimize(bits.data());
  }
  st.counters["allowed"] = (double)allowed;
  st.counters["trie_nodes"] = (double)v->trie().n_nodes();
}
BENCHMARK(BM_GrammarMask)
    ->ArgsProduct({{0, 1}, {0, 1, 2}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);

// The sampler step on the full row, unmasked (arg 0) or masked inside a string (arg 1).
void BM_SampleMasked(benchmark::State& st) {
  auto v = vocab(0);
  if (!v) {
    st.SkipWithError("tiktoken files not found (set CHIMERA_SHARED)");
    return;
  }
  auto g = compile(v);
  GrammarMatcher m(g);
  (void)m.accept_bytes(kStates[1]);
  std::vector<uint64_t> bits;
  (void)m.fill_mask(bits, v->n_vocab());
  std::vector<float> logits((size_t)v->n_vocab());
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 3);
  for (auto& x : logits) x = nd(rng);
  chimera::runtime::SamplingParams p;
  chimera::runtime::Sampler s(p);
  for (auto _ : st) benchmark::DoNotOptimize(s.sample(logits.data(), v->n_vocab(), st.range(0) ? bits.data() : nullptr));
  st.SetLabel(st.range(0) ? "o200k masked" : "o200k unmasked");
}
BENCHMARK(BM_SampleMasked)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_TokenVocabBuild(benchmark::State& st) {
  const char* env = std::getenv("CHIMERA_SHARED");
  const std::string dir = std::string(env && *env ? env : "../shared") + "/tokenizers/tiktoken/";
  chimera::tokenizer::TiktokenOptions o;
  o.pre = "gpt-4o";
  auto t = chimera::tokenizer::Tokenizer::from_tiktoken(dir + "o200k_base.tiktoken", o);
  if (!t) {
    st.SkipWithError("tiktoken files not found (set CHIMERA_SHARED)");
    return;
  }
  for (auto _ : st) benchmark::DoNotOptimize(TokenVocab::from_tokenizer(**t));
  st.SetLabel("o200k token bytes + trie, once per model");
}
BENCHMARK(BM_TokenVocabBuild)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
