// Sampler implementation (see sampler.h for the chain and the odd-input rules).
//
// Determinism: every ordering uses a total order (logit descending, then id
// ascending), so the *set* chosen by nth_element / partial selections is the
// same on every standard library; wherever the resulting *order* could depend
// on the library, the candidates are put back into a canonical order (sorted
// by that total order, or by id) before anything order-sensitive (floating
// sums, the draw) runs. Probabilities use det_exp(), built only from IEEE
// +,-,* and bit operations; the top-p mass of an unsorted vocabulary is
// summed in fixed point (integer addition is associative). The file must not
// be compiled with -ffast-math or FMA contraction (see the pragma below).
//
// Cost for a vocabulary of n: O(n) to copy and penalise; top-k by a bounded
// heap (small k) or nth_element, then a sort of k; top-p without top-k by
// bucketing on the logit distance (linear passes, only the boundary bucket is
// sorted) instead of a full sort.
#include "runtime/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>

// No fused multiply-add contraction: det_exp's rounding must be the same on
// every target (GCC in ISO C++ mode already does not contract).
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace chimera::runtime {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr size_t kHeapTopKMax = 1024;  // larger k: nth_element

// exp(x) for x <= 0 (x >= 0 gives 1; x <= -708 gives 0, i.e. below 1e-307
// relative), identical on every platform. x = k ln2 + r with |r| <= ln2/2,
// a degree-9 Taylor polynomial (relative error < 1e-11, far below float
// logit precision), times 2^k built from its bits.
inline double det_exp(double x) {
  if (!(x > -708.0)) return 0.0;  // also -inf and NaN
  if (x >= 0.0) return 1.0;
  constexpr double kInvLn2 = 1.44269504088896338700e+00;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // low bits zero: k * hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kShifter = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const double kf = (x * kInvLn2 + kShifter) - kShifter;
  const double r = (x - kf * kLn2Hi) - kf * kLn2Lo;
  // Estrin's scheme: a short dependency chain, so calls overlap in the pipeline.
  const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  const double p01 = 1.0 + r, p23 = 0.5 + r * (1.0 / 6.0), p45 = 1.0 / 24.0 + r * (1.0 / 120.0);
  const double p67 = 1.0 / 720.0 + r * (1.0 / 5040.0), p89 = 1.0 / 40320.0 + r * (1.0 / 362880.0);
  const double p = (p01 + r2 * p23) + r4 * (p45 + r2 * p67) + r8 * p89;
  const auto k = static_cast<int64_t>(kf);  // in [-1022, 0]
  return p * std::bit_cast<double>(static_cast<uint64_t>(k + 1023) << 52);
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

float max_of(const std::vector<std::pair<float, int32_t>>& c, size_t n) {
  float m = c[0].first;
  for (size_t i = 1; i < n; ++i) m = std::max(m, c[i].first);
  return m;
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

// llama.cpp's penalties on vals_ (indexed by id): for each distinct token of
// the window, logit <= 0 ? logit * r : logit / r, then
// logit -= count * frequency + presence.
void Sampler::apply_penalties(int32_t n_vocab) {
  if (p_.penalty_last_n == 0 || history_.empty()) return;
  if (p_.repeat_penalty == 1.0f && p_.frequency_penalty == 0.0f && p_.presence_penalty == 0.0f) return;
  window_.assign(history_.begin(), history_.end());
  std::sort(window_.begin(), window_.end());
  for (size_t i = 0; i < window_.size();) {
    const int32_t id = window_[i];
    size_t j = i;
    while (j < window_.size() && window_[j] == id) ++j;
    const float count = static_cast<float>(j - i);
    i = j;
    if (id < 0 || id >= n_vocab) continue;
    float& logit = vals_[static_cast<size_t>(id)];
    if (logit <= 0.0f) {
      logit *= p_.repeat_penalty;
    } else {
      logit /= p_.repeat_penalty;
    }
    logit -= count * p_.frequency_penalty + p_.presence_penalty;
    if (std::isnan(logit)) logit = kNegInf;
  }
}

// The k best of vals_ into cand_[0..k), sorted by `better`.
void Sampler::select_top_k(size_t k) {
  const size_t n = vals_.size();
  if (k <= kHeapTopKMax) {
    // Bounded heap whose front is the worst kept candidate: one compare per
    // token, about k log(n/k) heap updates for typical logits.
    cand_.resize(k);
    for (size_t i = 0; i < k; ++i) cand_[i] = {vals_[i], static_cast<int32_t>(i)};
    std::make_heap(cand_.begin(), cand_.end(), better);
    for (size_t i = k; i < n; ++i) {
      const std::pair<float, int32_t> c{vals_[i], static_cast<int32_t>(i)};
      if (better(c, cand_.front())) {
        std::pop_heap(cand_.begin(), cand_.end(), better);
        cand_.back() = c;
        std::push_heap(cand_.begin(), cand_.end(), better);
      }
    }
  } else {
    cand_.resize(n);
    for (size_t i = 0; i < n; ++i) cand_[i] = {vals_[i], static_cast<int32_t>(i)};
    std::nth_element(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(k - 1), cand_.end(), better);
    cand_.resize(k);
  }
  std::sort(cand_.begin(), cand_.end(), better);
}

// Top-p on cand_[0..n) sorted by `better`: the shortest prefix whose
// probability mass reaches top_p (at least one token).
size_t Sampler::top_p_sorted(size_t n) {
  const float max_logit = cand_[0].first;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += rel_weight(cand_[i].first, max_logit, 1.0);
  const double target = static_cast<double>(p_.top_p) * total;
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += rel_weight(cand_[i].first, max_logit, 1.0);
    if (cum >= target) return i + 1;
  }
  return n;
}

// Top-p on the whole vocabulary, cand_[i] == (vals_[i], i), without sorting
// it: masses are fixed-point integers (sums independent of order), tokens are
// bucketed by their distance to the best logit, the buckets are walked from
// the top until the target mass is reached, and only the boundary bucket is
// sorted to find the exact cut. The kept set comes out in a canonical order:
// the tokens above the boundary bucket by id, then the boundary bucket's by
// `better`.
size_t Sampler::top_p_unsorted(size_t n) {
  constexpr size_t kBuckets = 1024;
  const float max_logit = max_of(cand_, n);
  int bits = 0;
  while (bits < 40 && (uint64_t{1} << bits) < n) ++bits;
  const int frac_bits = 62 - bits;  // total <= n * 2^frac_bits <= 2^62
  const double scale = std::ldexp(1.0, frac_bits);
  // Weights below 2^-frac_bits are 0 in fixed point, so they are never needed:
  // distances beyond frac_bits * ln2 all land in the last bucket.
  const double inv_width = static_cast<double>(kBuckets) / (frac_bits * 0.6931471805599453 + 1.0);
  wfix_.resize(n);
  bucket_of_.resize(n);
  bucket_mass_.assign(kBuckets, 0);
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t w = static_cast<uint64_t>(rel_weight(cand_[i].first, max_logit, 1.0) * scale);
    wfix_[i] = w;
    total += w;
    const double dist = static_cast<double>(max_logit) - static_cast<double>(cand_[i].first);
    const double b = dist * inv_width;  // NaN when both are +inf: bucket 0
    const uint16_t bucket = !(b > 0.0) ? uint16_t{0}
                            : b < static_cast<double>(kBuckets - 1) ? static_cast<uint16_t>(b)
                                                                   : static_cast<uint16_t>(kBuckets - 1);
    bucket_of_[i] = bucket;
    bucket_mass_[bucket] += w;
  }
  const double target = static_cast<double>(p_.top_p) * static_cast<double>(total);
  uint64_t acc = 0;
  size_t boundary = kBuckets - 1;
  for (size_t b = 0; b < kBuckets; ++b) {
    if (static_cast<double>(acc + bucket_mass_[b]) >= target) {
      boundary = b;
      break;
    }
    acc += bucket_mass_[b];
  }
  // Tokens above the boundary, in id order; the boundary bucket's go to the tail.
  size_t kept = 0;
  edge_.clear();
  for (size_t i = 0; i < n; ++i) {
    if (bucket_of_[i] < boundary) {
      cand_[kept++] = {vals_[i], static_cast<int32_t>(i)};
    } else if (bucket_of_[i] == boundary) {
      edge_.push_back({vals_[i], static_cast<int32_t>(i)});
    }
  }
  std::sort(edge_.begin(), edge_.end(), better);
  for (const auto& c : edge_) {
    cand_[kept++] = c;
    acc += wfix_[static_cast<size_t>(c.second)];
    if (static_cast<double>(acc) >= target) break;
  }
  return std::max<size_t>(kept, 1);
}

// p_i >= min_p * p_max  <=>  exp(l_i - l_max) >= min_p; order is preserved.
size_t Sampler::apply_min_p(size_t n) {
  const float max_logit = max_of(cand_, n);
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

size_t Sampler::prepare(const float* logits, int32_t n_vocab, const uint64_t* allowed, double* total) {
  *total = 0.0;
  if (logits == nullptr || n_vocab <= 0) return 0;
  const size_t nv = static_cast<size_t>(n_vocab);
  vals_.resize(nv);
  for (size_t i = 0; i < nv; ++i) vals_[i] = std::isnan(logits[i]) ? kNegInf : logits[i];
  apply_penalties(n_vocab);
  if (allowed != nullptr) apply_mask(allowed, nv);

  if (p_.temperature <= 0.0f) {
    size_t best = 0;
    for (size_t i = 1; i < nv; ++i)
      if (vals_[i] > vals_[best]) best = i;  // strict: lowest id wins ties
    cand_.assign(1, {vals_[best], static_cast<int32_t>(best)});
    weight_.assign(1, 1.0);
    *total = 1.0;
    return 1;
  }

  size_t n = nv;
  bool sorted = false;
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < nv) {
    n = static_cast<size_t>(p_.top_k);
    select_top_k(n);
    sorted = true;
  } else {
    cand_.resize(nv);
    for (size_t i = 0; i < nv; ++i) cand_[i] = {vals_[i], static_cast<int32_t>(i)};
  }
  if (p_.top_p < 1.0f && n > 1) n = sorted ? top_p_sorted(n) : top_p_unsorted(n);
  if (p_.min_p > 0.0f && n > 1) n = apply_min_p(n);

  const float max_logit = max_of(cand_, n);
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

// Masked tokens become -inf (weight 0: never drawn, last in every order);
// allowed ones at -inf are lifted to the lowest finite value so they still
// win over every masked token.
void Sampler::apply_mask(const uint64_t* allowed, size_t nv) {
  constexpr float kLowest = std::numeric_limits<float>::lowest();
  float* v = vals_.data();
  const size_t full = nv / 64;
  for (size_t w = 0; w < full; ++w) {  // whole words: fixed-length loops the compiler vectorizes
    const uint64_t bits = allowed[w];
    float* x = v + w * 64;
    if (bits == ~uint64_t{0}) {
      for (size_t j = 0; j < 64; ++j) x[j] = x[j] == kNegInf ? kLowest : x[j];
    } else if (bits == 0) {
      for (size_t j = 0; j < 64; ++j) x[j] = kNegInf;
    } else {
      for (size_t j = 0; j < 64; ++j) {
        const bool ok = (bits >> j) & 1u;
        x[j] = ok ? (x[j] == kNegInf ? kLowest : x[j]) : kNegInf;
      }
    }
  }
  for (size_t i = full * 64; i < nv; ++i) {
    if ((allowed[full] >> (i & 63)) & 1u) {
      if (v[i] == kNegInf) v[i] = kLowest;
    } else {
      v[i] = kNegInf;
    }
  }
}

int32_t Sampler::sample(const float* logits, int32_t n_vocab, const uint64_t* allowed) {
  double total = 0.0;
  const size_t n = prepare(logits, n_vocab, allowed, &total);
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

std::vector<TokenProb> Sampler::distribution(const float* logits, int32_t n_vocab, const uint64_t* allowed) {
  double total = 0.0;
  const size_t n = prepare(logits, n_vocab, allowed, &total);
  std::vector<TokenProb> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back({cand_[i].second, weight_[i] / total});
  return out;
}

}  // namespace chimera::runtime
