// Tests kernels::diff_attention_pair (fused differential attention for one
// query head pair) against the double reference (ref/diff_attention_ref.h) on
// every ISA: head sizes that do and do not fill a vector (odd tails), 1 … 700
// keys, padded strides and misaligned pointers, the keys split into 1, 2 or 3
// runs (ring wrap + chunk) — which must give bit-identical results — and a
// query with no key (zeros).
//
// Tolerance: q, k, v uniform in [-1, 1], scale 1/sqrt(hd), λ in [0.2, 0.9]:
// |out − ref| ≤ 5e-5 · max|ref| + 5e-5 (float dots and float Σ w·v against
// double; the sub-norm makes the output scale-free, hence the relative term).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/diff_attention.h"
#include "kernels/dispatch.h"
#include "kernels/ref/diff_attention_ref.h"

namespace chimera::kernels {
namespace {

struct Case {
  int64_t hd, n, ldk, ldv;
  std::vector<float> q, k, v, g;
};

Case make(int64_t hd, int64_t n, std::mt19937& rng) {
  Case c;
  c.hd = hd;
  c.n = n;
  c.ldk = 2 * hd + 3;  // padded and odd: rows misaligned
  c.ldv = 2 * hd + 5;
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto gen = [&](size_t m) {
    std::vector<float> x(m);
    for (auto& e : x) e = u(rng);
    return x;
  };
  c.q = gen((size_t)(2 * hd + 1));
  c.k = gen((size_t)(std::max<int64_t>(n, 1) * c.ldk + 1));
  c.v = gen((size_t)(std::max<int64_t>(n, 1) * c.ldv + 1));
  c.g = gen((size_t)(2 * hd));
  for (auto& e : c.g) e = 0.5f + 0.5f * e;  // sub-norm gains in [0, 1]
  return c;
}

// The n keys of c split at the given cut points into runs.
std::vector<KvRun> split(const Case& c, std::vector<int64_t> cuts) {
  std::vector<KvRun> runs;
  int64_t at = 0;
  cuts.push_back(c.n);
  for (int64_t e : cuts) {
    KvRun r;
    r.k = c.k.data() + 1 + at * c.ldk;
    r.v = c.v.data() + 1 + at * c.ldv;
    r.ldk = c.ldk;
    r.ldv = c.ldv;
    r.n = e - at;
    runs.push_back(r);
    at = e;
  }
  return runs;
}

DiffAttentionParams params(const Case& c, float lambda) {
  DiffAttentionParams p;
  p.head_dim = c.hd;
  p.scale = 1.f / std::sqrt((float)c.hd);
  p.lambda = lambda;
  p.eps = 1e-5f;
  p.out_scale = 0.7f;
  p.sub_norm = c.g.data();
  return p;
}

constexpr float kSentinel = 12345.f;

std::vector<float> run(const DiffAttentionParams& p, const Case& c, const std::vector<KvRun>& runs) {
  std::vector<float> scores((size_t)(2 * c.n + 1), kSentinel);
  std::vector<float> out((size_t)(2 * c.hd + 2), kSentinel);
  diff_attention_pair(p, c.q.data() + 1, runs.data(), (int)runs.size(), scores.data(), out.data() + 1);
  EXPECT_EQ(out[0], kSentinel);
  EXPECT_EQ(out.back(), kSentinel) << "wrote past 2·hd";
  return out;
}

TEST(DiffAttentionKernel, SweepIsasShapesAndRunSplits) {
  std::mt19937 rng(7);
  for (Isa isa : available_isas()) {
    ScopedIsa si(isa);
    SCOPED_TRACE(isa_name(isa));
    for (int64_t hd : {1, 3, 4, 5, 8, 12, 16, 20, 64, 80, 128}) {
      for (int64_t n : {1, 2, 7, 33, 257, 700}) {
        SCOPED_TRACE("hd=" + std::to_string(hd) + " n=" + std::to_string(n));
        const Case c = make(hd, n, rng);
        const float lambda = 0.2f + 0.7f * (float)((hd + n) % 8) / 7.f;
        const DiffAttentionParams p = params(c, lambda);
        std::vector<float> want((size_t)(2 * hd));
        const auto one = split(c, {});
        ref::diff_attention_pair(p, c.q.data() + 1, one.data(), 1, want.data());
        const auto got = run(p, c, one);
        float mx = 0;
        for (float x : want) mx = std::max(mx, std::fabs(x));
        const float tol = 5e-5f * mx + 5e-5f;
        int bad = 0;
        for (int64_t i = 0; i < 2 * hd; ++i) {
          const float g = got[(size_t)(i + 1)], w = want[(size_t)i];
          if (!(std::fabs(g - w) <= tol) && bad++ < 3) ADD_FAILURE() << "col " << i << " got " << g << " want " << w;
        }
        ASSERT_EQ(bad, 0);
        // Any split of the same keys into runs gives the same bits.
        std::vector<std::vector<int64_t>> splits = {{n / 2}, {n / 3, (2 * n) / 3}, {0, n}};
        for (const auto& cuts : splits) {
          const auto other = run(p, c, split(c, cuts));
          ASSERT_EQ(0, std::memcmp(other.data(), got.data(), got.size() * sizeof(float))) << "split changes result";
        }
      }
    }
  }
}

TEST(DiffAttentionKernel, NoKeysGivesZeros) {
  std::mt19937 rng(3);
  for (Isa isa : available_isas()) {
    ScopedIsa si(isa);
    Case c = make(8, 0, rng);
    const auto got = run(params(c, 0.5f), c, split(c, {}));
    for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(got[(size_t)(i + 1)], 0.f);
  }
}

// λ = 0 with one key: A1 = A2 = 1, so out = RMSNorm(v)·g·out_scale exactly as
// the formula (a hand check independent of the reference code).
TEST(DiffAttentionKernel, SingleKeyIsNormalisedValue) {
  std::mt19937 rng(5);
  Case c = make(16, 1, rng);
  DiffAttentionParams p = params(c, 0.f);
  const auto got = run(p, c, split(c, {}));
  const float* v = c.v.data() + 1;
  double ss = 0;
  for (int i = 0; i < 32; ++i) ss += (double)v[i] * v[i];
  const double inv = 1.0 / std::sqrt(ss / 32 + 1e-5);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(got[(size_t)(i + 1)], v[i] * inv * c.g[(size_t)i] * 0.7, 1e-5);
}

}  // namespace
}  // namespace chimera::kernels
