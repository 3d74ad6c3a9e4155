// Helpers for the grammar tests: byte-level matching of a GBNF text, real
// vocabularies from ../shared (loaded once per process), and a random walk
// through a grammar's token masks that always terminates.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "format/gguf/gguf.h"
#include "runtime/grammar/gbnf_parser.h"
#include "runtime/grammar/grammar_constraint.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace chimera::test {

using runtime::grammar::CompiledGrammar;
using runtime::grammar::GrammarMatcher;
using runtime::grammar::GrammarSource;
using runtime::grammar::TokenVocab;

// A vocabulary of the 256 single bytes (enough for byte-level matching tests).
inline std::shared_ptr<const TokenVocab> byte_vocab() {
  static auto v = [] {
    std::vector<std::string> b(257);
    for (int i = 0; i < 256; ++i) b[(size_t)i] = std::string(1, (char)i);
    return TokenVocab::from_bytes(std::move(b), {256});
  }();
  return v;
}

inline std::shared_ptr<CompiledGrammar> compile_gbnf(const std::string& text,
                                                     std::shared_ptr<const TokenVocab> vocab = byte_vocab()) {
  auto r = CompiledGrammar::compile({GrammarSource::Kind::kGbnf, text}, std::move(vocab));
  EXPECT_TRUE(r.is_ok()) << r.status().message() << "\n" << text;
  return r.is_ok() ? *r : nullptr;
}

// True when `s` as a whole is accepted by the grammar (a full match).
inline bool full_match(const std::shared_ptr<CompiledGrammar>& g, const std::string& s) {
  GrammarMatcher m(g);
  return m.accept_bytes(s) && m.is_complete();
}
// True when `s` is a prefix of some accepted string.
inline bool prefix_ok(const std::shared_ptr<CompiledGrammar>& g, const std::string& s) {
  GrammarMatcher m(g);
  return m.accept_bytes(s);
}

enum class VocabKind { kLlama3, kO200k, kSpm, kGpt2 };

// A real tokenizer from ../shared; nullptr when the data is absent.
inline const tokenizer::Tokenizer* real_tokenizer(VocabKind kind) {
  static std::unique_ptr<tokenizer::Tokenizer> cache[4];
  auto& slot = cache[(int)kind];
  if (slot) return slot.get();
  const std::string shared = shared_dir();
  if (shared.empty()) return nullptr;
  if (kind == VocabKind::kLlama3 || kind == VocabKind::kO200k) {
    tokenizer::TiktokenOptions o;
    std::string file;
    if (kind == VocabKind::kLlama3) {
      o.pre = "llama3";
      o.special_tokens = {{"<|begin_of_text|>", 128000}, {"<|end_of_text|>", 128001}, {"<|eot_id|>", 128009}};
      o.bos = 128000;
      o.eos = 128001;
      file = "llama3.tiktoken";
    } else {
      o.pre = "gpt-4o";
      o.special_tokens = {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}};
      o.eos = 199999;
      file = "o200k_base.tiktoken";
    }
    auto r = tokenizer::Tokenizer::from_tiktoken(shared + "/tokenizers/tiktoken/" + file, o);
    if (!r) return nullptr;
    slot = std::move(*r);
  } else {
    const std::string name = kind == VocabKind::kSpm ? "llama-spm" : "gpt-2";
    auto g = format::GgufFile::open(shared + "/tokenizers/llama.cpp-vocab/ggml-vocab-" + name + ".gguf");
    if (!g) return nullptr;
    auto r = tokenizer::Tokenizer::from_gguf(**g);
    if (!r) return nullptr;
    slot = std::move(*r);
  }
  return slot.get();
}

inline std::shared_ptr<const TokenVocab> real_vocab(VocabKind kind) {
  static std::shared_ptr<const TokenVocab> cache[4];
  auto& slot = cache[(int)kind];
  if (!slot) {
    const tokenizer::Tokenizer* t = real_tokenizer(kind);
    if (t) slot = TokenVocab::from_tokenizer(*t);
  }
  return slot;
}

// Generates one text through the grammar: for `free_steps` tokens a uniformly
// random allowed token (random logits, argmax over the mask), then a random
// allowed "closer" (a single-byte token among " ] } or an end-of-generation
// token; else any allowed single-byte token) until the matcher finishes.
// Checks on the way that every masked-in token is accepted. Returns false
// (with a test failure) when it does not finish within max_steps.
inline bool random_generation(const std::shared_ptr<CompiledGrammar>& g, std::mt19937_64& rng, int free_steps,
                              int max_steps, std::string* out) {
  const TokenVocab& v = g->vocab();
  GrammarMatcher m(g);
  std::vector<uint64_t> bits;
  std::vector<int32_t> single(256, -1);
  for (int32_t id = 0; id < v.n_vocab(); ++id)
    if (v.bytes(id).size() == 1 && single[(uint8_t)v.bytes(id)[0]] < 0) single[(uint8_t)v.bytes(id)[0]] = id;
  auto allowed = [&](int32_t id) { return id >= 0 && ((bits[(size_t)id >> 6] >> (id & 63)) & 1); };
  out->clear();
  for (int step = 0; step < max_steps; ++step) {
    auto n = m.fill_mask(bits, v.n_vocab());
    if (!n.is_ok()) {
      ADD_FAILURE() << n.status().message();
      return false;
    }
    if (*n == 0) {
      EXPECT_TRUE(m.is_complete());
      return m.is_complete();
    }
    int32_t pick = -1;
    if (step >= free_steps) {
      for (int32_t e : v.eog_ids())
        if (allowed(e)) pick = e;
      if (pick < 0) {
        std::vector<int32_t> c;
        for (char ch : {'"', ']', '}'})
          if (allowed(single[(uint8_t)ch])) c.push_back(single[(uint8_t)ch]);
        if (c.empty())
          for (int b = 0; b < 256; ++b)
            if (allowed(single[b])) c.push_back(single[b]);
        if (!c.empty()) pick = c[rng() % c.size()];
      }
    }
    if (pick < 0) {  // the k-th allowed token, k uniform
      size_t k = rng() % *n;
      for (size_t w = 0; w < bits.size() && pick < 0; ++w) {
        const size_t pc = (size_t)__builtin_popcountll(bits[w]);
        if (k >= pc) {
          k -= pc;
          continue;
        }
        uint64_t x = bits[w];
        for (size_t j = 0; j < k; ++j) x &= x - 1;
        pick = (int32_t)(w * 64 + (size_t)__builtin_ctzll(x));
      }
    }
    if (v.is_eog(pick)) {
      EXPECT_TRUE(m.accept(pick).is_ok());
      return true;
    }
    auto st = m.accept(pick);
    if (!st.is_ok()) {
      ADD_FAILURE() << "masked-in token " << pick << " rejected: " << st.message() << " after '" << *out << "'";
      return false;
    }
    *out += v.bytes(pick);
  }
  ADD_FAILURE() << "generation did not finish in " << max_steps << " steps: '" << *out << "'";
  return false;
}

}  // namespace chimera::test
