// Shared by the quantization tests: a model's logits for a fixed token
// sequence and their relative error against a reference model's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "models/context.h"
#include "models/model.h"

namespace chimera::test {

// Logits of `ids` at every position (n_vocab per position, written to
// *n_vocab when given); empty when the model does not load.
inline std::vector<float> all_logits(const std::string& path, const std::vector<int32_t>& ids,
                                     int64_t* n_vocab = nullptr) {
  auto m = models::load_model(path);
  EXPECT_TRUE(m.is_ok()) << path << ": " << m.status().message();
  if (!m) return {};
  models::Context ctx = (*m)->new_context();
  auto st = ctx.new_state(64);
  const int64_t nv = (*m)->info().n_vocab;
  if (n_vocab) *n_vocab = nv;
  std::vector<float> out(ids.size() * (size_t)nv);
  Status s = ctx.forward(*st, ids.data(), (int64_t)ids.size(), models::Logits::kAll, out.data(), &global_thread_pool());
  EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

// {max |a - b|, RMS(a - b)} / RMS(a).
inline std::pair<double, double> relative_errors(const std::vector<float>& a, const std::vector<float>& b) {
  double mx = 0, ss = 0, se = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs((double)a[i] - b[i]);
    mx = std::max(mx, d);
    se += d * d;
    ss += (double)a[i] * a[i];
  }
  return {mx / std::sqrt(ss / (double)std::max<size_t>(1, a.size())), std::sqrt(se / std::max(ss, 1e-30))};
}

}  // namespace chimera::test
