// Token sampling: a fixed chain of optional stages applied to one row of
// logits, then a draw. Order (as llama.cpp's default chain): penalties
// (repetition / presence / frequency over the last `penalty_last_n` tokens) ->
// top-k -> top-p -> min-p -> temperature -> draw from the softmax with a seeded
// RNG. temperature <= 0 is greedy: argmax, the lowest id on ties.
// The same seed and inputs always give the same tokens on any machine: the
// RNG is std::mt19937_64 (fully specified by the standard), the uniform draw
// and exp() are our own code using only IEEE-exact operations, and ties are
// broken by token id.
//
// Odd inputs never crash: NaN logits count as -inf (never drawn while any other
// token is left); +inf logits share all probability equally; if every logit is
// -inf/NaN the draw is uniform over the candidates left (greedy: id 0).
// Parameters out of range are treated as "disabled" (a NaN or non-positive
// repeat_penalty acts as 1, a NaN top_p as 1, ...). sample() returns -1 only for
// an empty row (n_vocab <= 0 or null logits). History tokens outside
// [0, n_vocab) are ignored by the penalties.
//
// Constrained steps (grammars, runtime/grammar/grammar_constraint.h): an
// `allowed` bitset (bit id of word id / 64; ceil(n_vocab / 64) words) masks
// the row before every stage: tokens outside it are never drawn, greedy or
// not; allowed tokens whose logit is -inf/NaN stay drawable (below every
// finite one), so a non-empty mask always yields an allowed token. The caller
// must not pass an empty mask (nothing can follow: stop instead).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <utility>
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

// One candidate of the final distribution (see Sampler::distribution).
struct TokenProb {
  int32_t id = 0;
  double p = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // Picks a token from logits[0..n_vocab) (restricted to `allowed` when
  // given). Does not record it.
  int32_t sample(const float* logits, int32_t n_vocab, const uint64_t* allowed = nullptr);
  // The candidates a draw would choose from after every stage, with their
  // probabilities (summing to 1), in draw order. Consumes no randomness.
  // Greedy gives the single argmax with p = 1. Empty for an empty row.
  std::vector<TokenProb> distribution(const float* logits, int32_t n_vocab, const uint64_t* allowed = nullptr);
  // Records a token in the penalty history (prompt tokens and generated ones).
  void accept(int32_t token);
  // Clears the history and restarts the RNG from the seed.
  void reset();
  const SamplingParams& params() const { return p_; }

 private:
  // Runs penalties and the filters; leaves the survivors in cand_[0..n) and
  // their unnormalised weights in weight_[0..n); returns n (0 for empty input).
  size_t prepare(const float* logits, int32_t n_vocab, const uint64_t* allowed, double* total);
  void apply_penalties(int32_t n_vocab);
  void apply_mask(const uint64_t* allowed, size_t nv);
  void select_top_k(size_t k);
  size_t top_p_sorted(size_t n);
  size_t top_p_unsorted(size_t n);
  size_t apply_min_p(size_t n);

  SamplingParams p_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;
  std::vector<float> vals_;                      // scratch: penalised logits by id
  std::vector<std::pair<float, int32_t>> cand_;  // scratch: (logit, id)
  std::vector<double> weight_;                   // scratch: softmax numerators
  std::vector<uint64_t> wfix_;                   // scratch: fixed-point weights by id (top-p)
  std::vector<uint16_t> bucket_of_;              // scratch: top-p bucket by id
  std::vector<uint64_t> bucket_mass_;            // scratch: top-p mass per bucket
  std::vector<std::pair<float, int32_t>> edge_;  // scratch: top-p boundary bucket
  std::vector<int32_t> window_;                  // scratch: penalty window, sorted
};

}  // namespace chimera::runtime
