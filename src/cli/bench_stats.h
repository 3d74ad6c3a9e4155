// Mean and sample standard deviation of repeated benchmark measurements
// (shared by the `bench` variants).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace chimera::cli {

struct Stat {
  double mean = 0, sd = 0;
};

inline Stat stats(const std::vector<double>& v) {
  Stat s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= (double)v.size();
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / (double)(v.size() - 1)) : 0;
  return s;
}

// Median (the mean of the middle two for an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace chimera::cli
