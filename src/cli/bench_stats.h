// Mean and sample standard deviation of repeated benchmark measurements
// (shared by the `bench` variants).
#pragma once

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

}  // namespace chimera::cli
