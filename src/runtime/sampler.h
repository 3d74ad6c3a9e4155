// Token sampling: a fixed chain of optional stages applied to one row of
// logits, then a draw. Order (as llama.cpp's default chain): penalties
// (repetition / presence / frequency over the last `penalty_last_n` tokens) ->
// top-k -> top-p -> min-p -> temperature -> draw from the softmax with a seeded
// RNG. temperature <= 0 is greedy: argmax, the lowest id on ties.
// The same seed and inputs always give the same tokens on any machine.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace chimera::runtime {

struct SamplingParams {
  float temperature = 0.8f;
  int32_t top_k = 40;        // <= 0: disabled
  float top_p = 0.95f;       // >= 1: disabled
  float min_p = 0.05f;       // <= 0: disabled
  float repeat_penalty = 1.0f;   // 1: disabled
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;   // 0: disabled, -1: whole history
  uint64_t seed = 0xC41AE7A;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // Picks a token from logits[0..n_vocab). Does not record it.
  int32_t sample(const float* logits, int32_t n_vocab);
  // Records a token in the penalty history (prompt tokens and generated ones).
  void accept(int32_t token);
  void reset();
  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;
  std::vector<std::pair<float, int32_t>> cand_;  // scratch
};

}  // namespace chimera::runtime
