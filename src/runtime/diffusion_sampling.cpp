// Per-step arithmetic of masked-diffusion decoding (see diffusion_sampling.h):
// token choice with float64 Gumbel noise, remasking confidences, LLaDA's
// transfer schedule and the commit selection.
#include "runtime/diffusion_sampling.h"

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <limits>
#include <numeric>

namespace chimera::runtime {

bool parse_remasking(const std::string& s, Remasking* out) {
  if (s == "low_confidence") *out = Remasking::kLowConfidence;
  else if (s == "random") *out = Remasking::kRandom;
  else if (s == "margin") *out = Remasking::kMargin;
  else if (s == "entropy") *out = Remasking::kEntropy;
  else return false;
  return true;
}

const char* remasking_name(Remasking r) {
  switch (r) {
    case Remasking::kLowConfidence: return "low_confidence";
    case Remasking::kRandom: return "random";
    case Remasking::kMargin: return "margin";
    case Remasking::kEntropy: return "entropy";
  }
  return "?";
}

double uniform01(std::mt19937_64& rng) { return ((double)(rng() >> 11) + 0.5) * 0x1.0p-53; }

RowChoice choose_token(const float* logits, int32_t n_vocab, Remasking remasking, double temperature,
                       std::mt19937_64& rng) {
  RowChoice c;
  // NaN counts as -inf so it is never chosen while a real logit exists.
  auto val = [&](int32_t v) { return std::isnan(logits[v]) ? -INFINITY : (double)logits[v]; };
  double lmax = -INFINITY;
  int32_t amax = 0;
  for (int32_t v = 0; v < n_vocab; ++v)
    if (val(v) > lmax) lmax = val(v), amax = v;
  c.token = amax;
  if (temperature > 0) {
    double best = -INFINITY;
    for (int32_t v = 0; v < n_vocab; ++v) {
      const double g = val(v) - temperature * std::log(-std::log(uniform01(rng)));
      if (g > best) best = g, c.token = v;
    }
  }
  if (remasking == Remasking::kRandom) {
    c.confidence = uniform01(rng);
    return c;
  }
  if (!std::isfinite(lmax)) {  // all -inf / NaN (or +inf): no meaningful distribution
    c.confidence = remasking == Remasking::kEntropy ? -std::log((double)n_vocab) : 0;
    return c;
  }
  double sum = 0;
  for (int32_t v = 0; v < n_vocab; ++v) sum += std::exp(val(v) - lmax);
  switch (remasking) {
    case Remasking::kLowConfidence:
      c.confidence = std::exp(val(c.token) - lmax) / sum;
      break;
    case Remasking::kMargin: {
      double second = -INFINITY;
      bool seen_max = false;
      for (int32_t v = 0; v < n_vocab; ++v) {
        if (v == amax && !seen_max) {
          seen_max = true;
          continue;
        }
        second = std::max(second, val(v));
      }
      c.confidence = (1.0 - std::exp(second - lmax)) / sum;
      break;
    }
    case Remasking::kEntropy: {
      double h = 0;  // Σ p log p
      const double log_sum = std::log(sum);
      for (int32_t v = 0; v < n_vocab; ++v) {
        const double lp = val(v) - lmax - log_sum;
        if (std::isfinite(lp)) h += std::exp(lp) * lp;
      }
      c.confidence = h;
      break;
    }
    case Remasking::kRandom:
      break;
  }
  return c;
}

std::vector<int64_t> transfer_schedule(int64_t n_masked, int64_t steps) {
  std::vector<int64_t> q((size_t)std::max<int64_t>(steps, 0), 0);
  if (steps <= 0) return q;
  const int64_t base = n_masked / steps, rem = n_masked % steps;
  for (int64_t s = 0; s < steps; ++s) q[(size_t)s] = base + (s < rem ? 1 : 0);
  return q;
}

std::vector<size_t> select_commits(const std::vector<double>& confidence, int64_t quota, double threshold) {
  std::vector<size_t> order(confidence.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Highest confidence first; NaN last; ties → lower index.
  auto key = [&](size_t i) { return std::isnan(confidence[i]) ? -INFINITY : confidence[i]; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) > key(b); });
  std::vector<size_t> out;
  if (threshold > 0) {  // everything above τ, and at least the quota (at least one)
    const size_t at_least = (size_t)std::max<int64_t>(quota, 1);
    for (size_t k = 0; k < order.size(); ++k)
      if (k < at_least || key(order[k]) > threshold) out.push_back(order[k]);
  } else {
    const size_t n = (size_t)std::clamp<int64_t>(quota, 0, (int64_t)order.size());
    out.assign(order.begin(), order.begin() + (std::ptrdiff_t)n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace chimera::runtime
