// Sampler implementation (see sampler.h for the chain and the odd-input rules).
// Invariants: cand_ holds (logit, id) pairs with no NaN after loading; every
// ordering uses a total order (logit descending, then id ascending) so
// nth_element / partial_sort give the same result on every standard library;
// probabilities are computed in double with det_exp(), built only from IEEE
// +,-,*,/ and ldexp, so draws are bit-identical across platforms. Nothing here
// sorts the whole vocabulary when top-k is set; top-p without top-k sorts only
// a growing prefix until the cumulative mass is reached.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace chimera::runtime {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// exp(x) for x <= 0 (larger x is clamped to 0), identical on every platform.
// Range reduction x = k ln2 + r, |r| <= ln2/2, then a degree-13 Taylor
// polynomial (truncation error < 1e-17 relative) and an exact scaling by 2^k.
double det_exp(double x) {
  if (!(x > -745.2)) return 0.0;  // underflow, -inf and NaN
  if (x >= 0.0) return 1.0;
  constexpr double kInvLn2 = 1.44269504088896338700e+00;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // low bits zero: k * hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  const double kf = std::floor(x * kInvLn2 + 0.5);
  const double r = (x - kf * kLn2Hi) - kf * kLn2Lo;
  double poly = 1.0 / 6227020800.0;  // 1/13!
  constexpr double kInvFact[] = {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
                                 1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,      1.0 / 120.0,
                                 1.0 / 24.0,        1.0 / 6.0,        1.0 / 2.0,        1.0,
                                 1.0};
  for (double c : kInvFact) poly = poly * r + c;
  return std::ldexp(poly, static_cast<int>(kf));
}

// Weight of a logit relative to the maximum; handles +-inf without NaN.
inline double rel_weight(float logit, float max_logit, double inv_temp) {
  if (logit == max_logit) return 1.0;
  return det_exp((static_cast<double>(logit) - static_cast<double>(max_logit)) * inv_temp);
}

inline bool better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// Uniform double in [0, 1) from the top 53 bits: exact on every platform.
inline double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

SamplingParams sanitize(SamplingParams p) {
  if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty)) p.repeat_penalty = 1.0f;
  if (!std::isfinite(p.presence_penalty)) p.presence_penalty = 0.0f;
  if (!std::isfinite(p.frequency_penalty)) p.frequency_penalty = 0.0f;
  if (!(p.top_p < 1.0f)) p.top_p = 1.0f;  // NaN too
  if (!(p.min_p > 0.0f)) p.min_p = 0.0f;
  if (!(p.temperature > 0.0f)) p.temperature = 0.0f;
  if (p.penalty_last_n < -1) p.penalty_last_n = -1;
  return p;
}

}  // namespace

Sampler::Sampler(const SamplingParams& p) : p_(sanitize(p)), rng_(p_.seed) {}

void Sampler::reset() {
  history_.clear();
  rng_.seed(p_.seed);
}

void Sampler::accept(int32_t token) {
  if (p_.penalty_last_n == 0) return;
  history_.push_back(token);
  if (p_.penalty_last_n > 0) {
    while (history_.size() > static_cast<size_t>(p_.penalty_last_n)) history_.pop_front();
  }
}

void Sampler::apply_penalties(int32_t n_vocab) {
  if (p_.penalty_last_n == 0 || history_.empty()) return;
  if (p_.repeat_penalty == 1.0f && p_.frequency_penalty == 0.0f && p_.presence_penalty == 0.0f) return;
  // cand_ is still in id order here, so cand_[id] is token id.
  window_.assign(history_.begin(), history_.end());
  std::sort(window_.begin(), window_.end());
  for (size_t i = 0; i < window_.size();) {
    const int32_t id = window_[i];
    size_t j = i;
    while (j < window_.size() && window_[j] == id) ++j;
    const float count = static_cast<float>(j - i);
    i = j;
    if (id < 0 || id >= n_vocab) continue;
    float& logit = cand_[static_cast<size_t>(id)].first;
    if (logit <= 0.0f) {
      logit *= p_.repeat_penalty;
    } else {
      logit /= p_.repeat_penalty;
    }
    logit -= count * p_.frequency_penalty + p_.presence_penalty;  // count > 0 always here
    if (std::isnan(logit)) logit = kNegInf;  // -inf * 0 style corner cases
  }
}

size_t Sampler::apply_top_p(size_t n, bool sorted) {
  // Smallest prefix (in descending logit order) whose probability mass
  // reaches top_p; at least one token.
  float max_logit = cand_[0].first;
  if (!sorted) {
    for (size_t i = 1; i < n; ++i) max_logit = std::max(max_logit, cand_[i].first);
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += rel_weight(cand_[i].first, max_logit, 1.0);
  const double target = static_cast<double>(p_.top_p) * total;
  auto first = cand_.begin();
  double cum = 0.0;
  size_t done = 0;                            // prefix already accumulated
  size_t k = sorted ? n : std::min<size_t>(n, 64);  // prefix known to be sorted
  while (true) {
    if (!sorted) std::partial_sort(first, first + static_cast<std::ptrdiff_t>(k), first + static_cast<std::ptrdiff_t>(n), better);
    for (; done < k; ++done) {
      cum += rel_weight(cand_[done].first, max_logit, 1.0);
      if (cum >= target) return done + 1;
    }
    if (k == n) return n;
    k = std::min(n, k * 8);
  }
}

size_t Sampler::apply_min_p(size_t n, bool sorted) {
  // p_i >= min_p * p_max  <=>  exp(l_i - l_max) >= min_p; order is preserved.
  float max_logit = cand_[0].first;
  if (!sorted) {
    for (size_t i = 1; i < n; ++i) max_logit = std::max(max_logit, cand_[i].first);
  }
  const double min_p = p_.min_p;
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (rel_weight(cand_[i].first, max_logit, 1.0) >= min_p) cand_[kept++] = cand_[i];
  }
  if (kept == 0) {  // min_p > 1: keep the best token (lowest id among equals)
    size_t best = 0;
    for (size_t i = 1; i < n; ++i)
      if (better(cand_[i], cand_[best])) best = i;
    cand_[0] = cand_[best];
    kept = 1;
  }
  return kept;
}

size_t Sampler::prepare(const float* logits, int32_t n_vocab, double* total) {
  *total = 0.0;
  if (logits == nullptr || n_vocab <= 0) return 0;
  const size_t nv = static_cast<size_t>(n_vocab);
  cand_.resize(nv);
  for (size_t i = 0; i < nv; ++i) {
    const float l = logits[i];
    cand_[i] = {std::isnan(l) ? kNegInf : l, static_cast<int32_t>(i)};
  }
  apply_penalties(n_vocab);

  if (p_.temperature <= 0.0f) {
    size_t best = 0;
    for (size_t i = 1; i < nv; ++i)
      if (cand_[i].first > cand_[best].first) best = i;  // strict: lowest id wins ties
    cand_[0] = cand_[best];
    weight_.assign(1, 1.0);
    *total = 1.0;
    return 1;
  }

  size_t n = nv;
  bool sorted = false;
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    const auto k = static_cast<std::ptrdiff_t>(p_.top_k);
    std::nth_element(cand_.begin(), cand_.begin() + k - 1, cand_.end(), better);
    std::sort(cand_.begin(), cand_.begin() + k, better);
    n = static_cast<size_t>(k);
    sorted = true;
  }
  if (p_.top_p < 1.0f && n > 1) {
    n = apply_top_p(n, sorted);
    sorted = true;  // apply_top_p leaves the kept prefix sorted
  }
  if (p_.min_p > 0.0f && n > 1) n = apply_min_p(n, sorted);

  float max_logit = cand_[0].first;
  for (size_t i = 1; i < n; ++i) max_logit = std::max(max_logit, cand_[i].first);
  const double inv_temp = 1.0 / static_cast<double>(p_.temperature);
  weight_.resize(n);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    weight_[i] = rel_weight(cand_[i].first, max_logit, inv_temp);
    sum += weight_[i];
  }
  *total = sum;  // >= 1: the maximum contributes exactly 1
  return n;
}

int32_t Sampler::sample(const float* logits, int32_t n_vocab) {
  double total = 0.0;
  const size_t n = prepare(logits, n_vocab, &total);
  if (n == 0) return -1;
  if (n == 1) return cand_[0].second;
  const double target = uniform01(rng_) * total;
  double cum = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < n; ++i) {
    if (weight_[i] <= 0.0) continue;
    cum += weight_[i];
    last_positive = i;
    if (target < cum) return cand_[i].second;
  }
  return cand_[last_positive].second;  // rounding left target just past the sum
}

std::vector<TokenProb> Sampler::distribution(const float* logits, int32_t n_vocab) {
  double total = 0.0;
  const size_t n = prepare(logits, n_vocab, &total);
  std::vector<TokenProb> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back({cand_[i].second, weight_[i] / total});
  return out;
}

}  // namespace chimera::runtime
