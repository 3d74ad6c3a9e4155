// The per-step arithmetic of masked-diffusion decoding, separate from the
// generator so it can be tested on hand-made logits:
//   * choose_token: x̂ = argmax(logits − T·log(−log U)) — LLaDA's Gumbel-max
//     exp(l)/(−log U)^T taken in the log domain, all in float64 (the reference
//     computes it in float64 too); T <= 0 is the plain argmax (ties → lowest id);
//     and the remasking confidence of that row (low_confidence: softmax(l)[x̂]
//     of the noise-free logits; random: U(0,1); margin: p1 − p2; entropy: Σ p log p);
//   * transfer_schedule: LLaDA's per-step quota ⌊n/steps⌋ (+1 for the first
//     n mod steps steps);
//   * select_commits: the top-q candidates by confidence (ties → lowest
//     position), or with a threshold τ > 0 every candidate above τ and at least
//     the top max(q, 1) (Fast-dLLM's parallel decoding; with the schedule's
//     quota as the floor it never takes more steps than the schedule, and with
//     one token per step it is exactly Fast-dLLM's rule);
//   * shifted rows: with diffusion.shift_logits the prediction for canvas
//     position p is model output row p − 1 (Dream), row p otherwise (LLaDA).
// The RNG is std::mt19937_64 (fully specified), uniforms are (k + 0.5)·2⁻⁵³,
// so a seed gives the same tokens on every machine.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/diffusion_options.h"

namespace chimera::runtime {

struct RowChoice {
  int32_t token = 0;
  double confidence = 0;
};

// Uniform in the open interval (0, 1).
double uniform01(std::mt19937_64& rng);

// Token and confidence for one canvas position from its logits row.
RowChoice choose_token(const float* logits, int32_t n_vocab, Remasking remasking, double temperature,
                       std::mt19937_64& rng);

// Tokens to commit at each of `steps` steps so that n_masked are committed.
std::vector<int64_t> transfer_schedule(int64_t n_masked, int64_t steps);

// Indices into `confidence` to commit: the `quota` highest (threshold <= 0), or
// all above `threshold` and at least the max(quota, 1) highest. Ties → lower index.
// Returned in increasing index order.
std::vector<size_t> select_commits(const std::vector<double>& confidence, int64_t quota, double threshold);

// The model output row that predicts canvas position `pos`.
inline int64_t prediction_row(int64_t pos, bool shift_logits) {
  return shift_logits && pos > 0 ? pos - 1 : pos;
}

}  // namespace chimera::runtime
