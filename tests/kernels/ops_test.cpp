// Tests every op in kernels/ops.h against its scalar reference (ref/ops_ref.h)
// on every ISA this CPU runs, over swept sizes, misaligned pointers, large
// magnitudes and zeros; rope also against an independent double-precision
// transcription of ggml_rope_ext's formula. Tolerances are stated per test and
// match the ones documented in src/kernels/ops.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ref/ops_ref.h"

namespace chimera::kernels {
namespace {

const int64_t kSizes[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 4099};
constexpr float kUlp = 1.0f / (1 << 23);  // relative size of one ulp (upper bound)
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A buffer whose data() is offset by `misalign` floats from a 64-byte boundary.
struct Buf {
  std::vector<float> storage;
  float* p;
  Buf(int64_t n, int misalign) : storage((size_t)n + 32) {
    uintptr_t a = (uintptr_t)storage.data();
    size_t skip = ((64 - a % 64) % 64) / sizeof(float);
    p = storage.data() + skip + misalign;
  }
  float* data() { return p; }
  float& operator[](int64_t i) { return p[i]; }
};

void fill(float* x, int64_t n, std::mt19937& rng, float mag) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < n; ++i) x[i] = u(rng) * mag;
}

// |got - want| <= atol + rel * |want| everywhere (NaN matches NaN).
::testing::AssertionResult close(const float* got, const float* want, int64_t n, float atol, float rel) {
  int bad = 0;
  std::string msg;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    const float tol = atol + rel * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol) && !(got[i] == want[i])) {
      if (bad++ < 4) {
        msg += " [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " want " + std::to_string(want[i]) +
               " tol " + std::to_string(tol) + ";";
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " mismatches:" << msg;
}

#define FOR_EACH_ISA                          \
  for (Isa isa : available_isas())            \
    if (ScopedIsa scoped_isa(isa); true)      \
      if (SCOPED_TRACE(isa_name(isa)); true)

TEST(Ops, DispatchFollowsActiveIsa) {
  for (Isa isa : available_isas()) {
    ScopedIsa s(isa);
    const std::string t = ops_simd_target();
    switch (isa) {
      case Isa::kScalar: EXPECT_TRUE(t == "EMU128" || t == "SCALAR") << t; break;
      case Isa::kAvx2:
      case Isa::kAvx2Vnni: EXPECT_EQ(t, "AVX2"); break;
      case Isa::kAvx512: EXPECT_EQ(t, "AVX3"); break;
      case Isa::kAvx512Vnni:
      case Isa::kAmx: EXPECT_EQ(t, "AVX3_DL"); break;
      case Isa::kNeon: EXPECT_EQ(t, "NEON"); break;
    }
  }
}

// rms_norm: sum of squares in double on both sides, so only the float steps
// can differ: |err| <= 4 ulp * |ref|.
TEST(Ops, RmsNorm) {
  std::mt19937 rng(1);
  FOR_EACH_ISA {
    for (int64_t n : kSizes) {
      if (n == 0) continue;
      for (float mag : {1.f, 1e-3f, 3e4f}) {
        for (int mis : {0, 1}) {
          Buf x(n, mis), w(n, mis), y(n, 0), want(n, 0);
          fill(x.data(), n, rng, mag);
          fill(w.data(), n, rng, 2.f);
          for (const float* wp : {(const float*)nullptr, (const float*)w.data()}) {
            ref::rms_norm(x.data(), wp, want.data(), n, 1e-6f);
            rms_norm(x.data(), wp, y.data(), n, 1e-6f);
            ASSERT_TRUE(close(y.data(), want.data(), n, 1e-37f, 4 * kUlp)) << "n=" << n << " mag=" << mag;
          }
          // In place (y aliases x).
          ref::rms_norm(x.data(), w.data(), want.data(), n, 1e-5f);
          rms_norm(x.data(), w.data(), x.data(), n, 1e-5f);
          ASSERT_TRUE(close(x.data(), want.data(), n, 1e-37f, 4 * kUlp)) << "in place n=" << n;
        }
      }
      Buf z(n, 1), y(n, 1);
      for (int64_t i = 0; i < n; ++i) z[i] = 0.f;
      rms_norm(z.data(), nullptr, y.data(), n, 1e-6f);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 0.f);
    }
  }
}

// layer_norm: sums in double on both sides; |err| <= 1e-6 + 4 ulp * |ref|
// (outputs are O(1) by construction, the bias can cancel them).
TEST(Ops, LayerNorm) {
  std::mt19937 rng(2);
  FOR_EACH_ISA {
    for (int64_t n : kSizes) {
      if (n == 0) continue;
      for (float mag : {1.f, 1e4f}) {
        Buf x(n, 1), w(n, 0), b(n, 3), y(n, 1), want(n, 0);
        fill(x.data(), n, rng, mag);
        for (int64_t i = 0; i < n; ++i) x[i] += 5.f * mag;  // non-zero mean
        fill(w.data(), n, rng, 2.f);
        fill(b.data(), n, rng, 1.f);
        for (int c = 0; c < 4; ++c) {
          const float* wp = (c & 1) ? w.data() : nullptr;
          const float* bp = (c & 2) ? b.data() : nullptr;
          ref::layer_norm(x.data(), wp, bp, want.data(), n, 1e-5f);
          layer_norm(x.data(), wp, bp, y.data(), n, 1e-5f);
          ASSERT_TRUE(close(y.data(), want.data(), n, 1e-6f, 4 * kUlp)) << "n=" << n << " case " << c;
        }
      }
      Buf z(n, 0), y(n, 0);
      for (int64_t i = 0; i < n; ++i) z[i] = 3.f;  // constant row: zero variance
      layer_norm(z.data(), nullptr, nullptr, y.data(), n, 1e-5f);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 0.f);
    }
  }
}

// softmax: hwy Exp (1 ulp) vs expf, sums in double; |err| <= 1e-37 + 8 ulp * |ref|.
TEST(Ops, Softmax) {
  std::mt19937 rng(3);
  FOR_EACH_ISA {
    for (int64_t n : kSizes) {
      if (n == 0) continue;
      for (float mag : {1.f, 30.f, 1000.f}) {
        Buf x(n, 1), want(n, 0);
        fill(x.data(), n, rng, mag);
        if (n > 2) x[n / 2] = -kInf;  // masked logit
        std::copy_n(x.data(), n, want.data());
        ref::softmax(want.data(), n);
        softmax(x.data(), n);
        ASSERT_TRUE(close(x.data(), want.data(), n, 1e-37f, 8 * kUlp)) << "n=" << n << " mag=" << mag;
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += x[i];
        ASSERT_NEAR(sum, 1.0, 1e-5);
        if (n > 2) {
          ASSERT_EQ(x[n / 2], 0.f);
        }
      }
    }
  }
}

std::vector<float> silu_inputs(int64_t n, std::mt19937& rng) {
  std::vector<float> v((size_t)n);
  fill(v.data(), n, rng, 12.f);
  const float special[] = {0.f, -0.f, 1e-30f, -1e-30f, 88.f, -88.f, 88.8f, -88.8f, 95.f, -95.f,
                           120.f, -120.f, 1e4f, -1e4f, 3e38f, -3e38f};
  for (size_t i = 0; i < v.size(); i += 3) v[i] = special[(i / 3) % 16];
  return v;
}

// silu / silu_mul: |err| <= 1e-36 + 8 ulp * |ref| (hwy Exp <= 1 ulp, one division).
TEST(Ops, Silu) {
  std::mt19937 rng(4);
  FOR_EACH_ISA {
    for (int64_t n : kSizes) {
      for (int mis : {0, 1}) {
        auto in = silu_inputs(n, rng);
        Buf x(n, mis), want(n, 0), up(n, 0), out(n, 1), want2(n, 0);
        std::copy_n(in.data(), n, x.data());
        std::copy_n(in.data(), n, want.data());
        fill(up.data(), n, rng, 3.f);
        ref::silu_mul(x.data(), up.data(), want2.data(), n);
        silu_mul(x.data(), up.data(), out.data(), n);
        ASSERT_TRUE(close(out.data(), want2.data(), n, 1e-36f, 8 * kUlp)) << "silu_mul n=" << n;
        silu_mul(x.data(), up.data(), up.data(), n);  // out aliases up
        ASSERT_TRUE(close(up.data(), want2.data(), n, 1e-36f, 8 * kUlp)) << "aliased n=" << n;
        ref::silu(want.data(), n);
        silu(x.data(), n);
        ASSERT_TRUE(close(x.data(), want.data(), n, 1e-36f, 8 * kUlp)) << "silu n=" << n;
      }
    }
    float nan1[1] = {kNaN};
    silu(nan1, 1);
    EXPECT_TRUE(std::isnan(nan1[0]));
  }
}

// relu_sqr_mul: exact (bit for bit), signed zeros, NaN and huge gates included.
TEST(Ops, ReluSqrMul) {
  std::mt19937 rng(41);
  FOR_EACH_ISA {
    for (int64_t n : kSizes) {
      for (int mis : {0, 1}) {
        Buf g(n, mis), up(n, 0), out(n, 1), want(n, 0);
        fill(g.data(), n, rng, 8.f);
        fill(up.data(), n, rng, 3.f);
        const float special[] = {0.f, -0.f, kNaN, -kNaN, 1e-30f, -1e-30f, 3e38f, -3e38f, 1e20f};
        for (int64_t i = 0; i < n; i += 4) g[i] = special[(i / 4) % 9];
        ref::relu_sqr_mul(g.data(), up.data(), want.data(), n);
        relu_sqr_mul(g.data(), up.data(), out.data(), n);
        ASSERT_EQ(0, std::memcmp(out.data(), want.data(), n * sizeof(float))) << "n=" << n;
        relu_sqr_mul(g.data(), up.data(), g.data(), n);  // out aliases gate
        ASSERT_EQ(0, std::memcmp(g.data(), want.data(), n * sizeof(float))) << "aliased n=" << n;
      }
    }
  }
}

// add, scale: exact. axpy: fused vs unfused, |err| <= 1 ulp * (|a*x| + |y|).
TEST(Ops, AddAxpyScale) {
  std::mt19937 rng(5);
  FOR_EACH_ISA {
    for (int64_t n : kSizes) {
      for (float mag : {1.f, 1e20f}) {
        Buf x(n, 1), y(n, 3), want(n, 0);
        fill(x.data(), n, rng, mag);
        fill(y.data(), n, rng, mag);
        if (n > 0) x[0] = 0.f;
        std::copy_n(y.data(), n, want.data());
        ref::add(want.data(), x.data(), n);
        add(y.data(), x.data(), n);
        ASSERT_EQ(0, std::memcmp(y.data(), want.data(), n * sizeof(float))) << "add n=" << n;
        ref::scale(want.data(), -0.37f, n);
        scale(y.data(), -0.37f, n);
        ASSERT_EQ(0, std::memcmp(y.data(), want.data(), n * sizeof(float))) << "scale n=" << n;
        std::vector<float> tol((size_t)n);
        for (int64_t i = 0; i < n; ++i) tol[i] = kUlp * (std::fabs(1.7f * x[i]) + std::fabs(y[i]));
        ref::axpy(1.7f, x.data(), want.data(), n);
        axpy(1.7f, x.data(), y.data(), n);
        for (int64_t i = 0; i < n; ++i) ASSERT_LE(std::fabs(y[i] - want[i]), tol[i]) << "axpy n=" << n << " i=" << i;
      }
    }
  }
}

// dot: float accumulation; |err| <= (n/8 + 32) * 2^-24 * sum |a_i b_i|.
TEST(Ops, Dot) {
  std::mt19937 rng(6);
  FOR_EACH_ISA {
    for (int64_t n : kSizes) {
      for (float mag : {1.f, 1e10f}) {
        for (int mis : {0, 1}) {
          Buf a(n, mis), b(n, 2);
          fill(a.data(), n, rng, mag);
          fill(b.data(), n, rng, 1.f);
          double abs_sum = 0;
          for (int64_t i = 0; i < n; ++i) abs_sum += std::fabs((double)a[i] * b[i]);
          const double tol = (n / 8.0 + 32) * (kUlp / 2) * abs_sum;
          const float want = ref::dot(a.data(), b.data(), n);
          ASSERT_LE(std::fabs((double)dot(a.data(), b.data(), n) - want), tol) << "n=" << n;
        }
      }
    }
    // One element out of place must be seen (the tail is not dropped).
    std::vector<float> a(4099, 1.f), b(4099, 1.f);
    EXPECT_EQ(dot(a.data(), b.data(), 4099), 4099.f);
    b[4098] = 0.f;
    EXPECT_EQ(dot(a.data(), b.data(), 4099), 4098.f);
  }
}

// argmax: exact; lowest index on ties, NaN never wins, 0 if all NaN, -1 if n == 0.
TEST(Ops, Argmax) {
  std::mt19937 rng(7);
  FOR_EACH_ISA {
    EXPECT_EQ(argmax(nullptr, 0), -1);
    for (int64_t n : kSizes) {
      if (n == 0) continue;
      Buf x(n, 1);
      fill(x.data(), n, rng, 100.f);
      ASSERT_EQ(argmax(x.data(), n), ref::argmax(x.data(), n)) << "n=" << n;
      // Maximum at each position, duplicated later (lowest index wins), NaN around it.
      for (int64_t pos : {int64_t(0), n / 2, n - 1}) {
        fill(x.data(), n, rng, 100.f);
        x[pos] = 1000.f;
        if (pos + 3 < n) x[pos + 3] = 1000.f;
        if (pos + 1 < n) x[pos + 1] = kNaN;
        if (pos > 0) x[pos - 1] = kNaN;
        ASSERT_EQ(argmax(x.data(), n), pos) << "n=" << n;
        ASSERT_EQ(ref::argmax(x.data(), n), pos);
      }
      for (int64_t i = 0; i < n; ++i) x[i] = -kInf;
      ASSERT_EQ(argmax(x.data(), n), 0);
      for (int64_t i = 0; i < n; ++i) x[i] = kNaN;
      ASSERT_EQ(argmax(x.data(), n), 0) << "all NaN";
      x[n - 1] = -kInf;
      ASSERT_EQ(argmax(x.data(), n), n - 1) << "only non-NaN is -inf";
      for (int64_t i = 0; i < n; ++i) x[i] = 0.f;
      x[n - 1] = -0.f;
      ASSERT_EQ(argmax(x.data(), n), 0) << "all zero";
      if (n >= 2) {
        x[0] = kNaN;
        x[n - 1] = kInf;
        ASSERT_EQ(argmax(x.data(), n), n - 1);
      }
    }
  }
}

// ---------------------------------------------------------------- rope
// Independent double transcription of ggml_rope_ext (rope_yarn, corr dims).
void rope_double(std::vector<double>& x, int64_t n_heads, int64_t head_dim, int64_t pos, const RopeParams& p) {
  const int64_t n_rot = p.n_rot;
  double lo = 0, hi = 0;
  if (p.ext_factor != 0) {
    auto corr = [&](double beta) {
      return n_rot * std::log(p.n_ctx_orig / (beta * 2 * M_PI)) / (2 * std::log((double)p.freq_base));
    };
    lo = std::max(0.0, std::floor(corr(p.beta_fast)));
    hi = std::min((double)(n_rot - 1), std::ceil(corr(p.beta_slow)));
  }
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    double extrap = pos * std::pow((double)p.freq_base, -2.0 * i / n_rot);
    if (p.freq_factors) extrap /= p.freq_factors[i];
    const double interp = p.freq_scale * extrap;
    double th = interp, msc = p.attn_factor;
    if (p.ext_factor != 0) {
      const double ramp = 1 - std::min(1.0, std::max(0.0, (i - lo) / std::max(0.001, hi - lo)));
      const double mix = ramp * p.ext_factor;
      th = interp * (1 - mix) + extrap * mix;
      msc *= 1 + 0.1 * std::log(1.0 / p.freq_scale);
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      double* xh = x.data() + h * head_dim;
      const int64_t a = p.mode == RopeMode::kNeox ? i : 2 * i;
      const int64_t b = p.mode == RopeMode::kNeox ? i + n_rot / 2 : 2 * i + 1;
      const double x0 = xh[a], x1 = xh[b];
      xh[a] = (x0 * std::cos(th) - x1 * std::sin(th)) * msc;
      xh[b] = (x0 * std::sin(th) + x1 * std::cos(th)) * msc;
    }
  }
}

struct RopeCase {
  const char* name;
  int64_t head_dim, n_rot;
  float freq_base, freq_scale, ext_factor, attn_factor;
  int64_t n_ctx_orig;
  bool use_ff;
};

// Kernel vs reference: the same float table (compared bit for bit) and the same
// rotation ops, so |err| <= 2 ulp * max|x|. Reference vs the double formula:
// theta in float drifts by ~(i+4) ulp over pair i (repeated multiplication), so
// |err| <= 4 * |x| * mscale * (theta_i * (i + 4) * 2^-23 + 2^-22) per pair.
TEST(Ops, Rope) {
  const RopeCase cases[] = {
      {"plain", 128, 128, 10000.f, 1.f, 0.f, 1.f, 0, false},
      {"partial", 64, 32, 10000.f, 1.f, 0.f, 1.f, 0, false},
      {"odd_pairs", 80, 46, 500000.f, 1.f, 0.f, 1.f, 0, false},
      {"linear", 64, 64, 10000.f, 0.25f, 0.f, 1.f, 0, false},
      {"freq_factors", 128, 128, 500000.f, 1.f, 0.f, 1.f, 0, true},
      {"yarn", 128, 128, 10000.f, 0.25f, 1.f, 1.f, 4096, false},
      {"yarn_partial_attn", 96, 64, 1000000.f, 0.125f, 1.f, 0.9f, 8192, true},
  };
  std::mt19937 rng(8);
  FOR_EACH_ISA {
    for (const auto& c : cases) {
      SCOPED_TRACE(c.name);
      std::vector<float> ff((size_t)c.n_rot / 2);
      for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.f + (float)(i % 7) * 1.5f;
      for (RopeMode mode : {RopeMode::kNorm, RopeMode::kNeox}) {
        RopeParams p;
        p.mode = mode;
        p.n_rot = c.n_rot;
        p.freq_base = c.freq_base;
        p.freq_scale = c.freq_scale;
        p.ext_factor = c.ext_factor;
        p.attn_factor = c.attn_factor;
        p.n_ctx_orig = c.n_ctx_orig;
        p.freq_factors = c.use_ff ? ff.data() : nullptr;
        for (int64_t pos : {0, 1, 17, 1000, 4095}) {
          for (int64_t n_heads : {1, 3, 8}) {
            const int64_t n = n_heads * c.head_dim;
            Buf x(n, 1), want(n, 0);
            fill(x.data(), n, rng, 2.f);
            std::vector<float> orig(x.data(), x.data() + n);
            std::vector<double> dbl(orig.begin(), orig.end());
            std::copy_n(x.data(), n, want.data());
            ref::rope(want.data(), n_heads, c.head_dim, pos, p);
            rope(x.data(), n_heads, c.head_dim, pos, p);
            ASSERT_TRUE(close(x.data(), want.data(), n, 2 * kUlp * 2.f * 1.2f, 0.f)) << "pos=" << pos;
            rope_double(dbl, n_heads, c.head_dim, pos, p);
            const double msc = c.attn_factor * (c.ext_factor != 0 ? 1 + 0.1 * std::log(1.0 / c.freq_scale) : 1.0);
            for (int64_t h = 0; h < n_heads; ++h) {
              for (int64_t d = c.n_rot; d < c.head_dim; ++d) {
                const int64_t k = h * c.head_dim + d;
                ASSERT_EQ(x[k], orig[(size_t)k]) << "pass-through dim " << d;
              }
              for (int64_t i = 0; i < c.n_rot / 2; ++i) {
                const int64_t a = h * c.head_dim + (mode == RopeMode::kNeox ? i : 2 * i);
                const int64_t b = h * c.head_dim + (mode == RopeMode::kNeox ? i + c.n_rot / 2 : 2 * i + 1);
                const double theta = (double)pos * std::pow((double)c.freq_base, -2.0 * i / c.n_rot);
                const double mag = std::fabs(orig[(size_t)a]) + std::fabs(orig[(size_t)b]);
                const double tol = 4 * mag * msc * (theta * (i + 4) * kUlp + 2 * kUlp);
                ASSERT_NEAR(x[a], dbl[(size_t)a], tol) << "pos=" << pos << " pair " << i;
                ASSERT_NEAR(x[b], dbl[(size_t)b], tol) << "pos=" << pos << " pair " << i;
              }
            }
          }
          // The kernel's table equals the reference's bit for bit.
          std::vector<float> t1((size_t)c.n_rot), t2((size_t)c.n_rot);
          rope_cache(pos, p, t1.data());
          ref::rope_cache(pos, p, t2.data());
          ASSERT_EQ(0, std::memcmp(t1.data(), t2.data(), t1.size() * sizeof(float))) << "table pos=" << pos;
        }
      }
    }
  }
}

TEST(Ops, RopeCorrDims) {
  // Hand-computed: n_rot 128, ctx 4096, base 10000, beta 32/1 -> floor(20.94)=20, ceil(45.03)=46.
  float dims[2];
  ref::rope_yarn_corr_dims(128, 4096, 10000.f, 32.f, 1.f, dims);
  EXPECT_EQ(dims[0], 20.f);
  EXPECT_EQ(dims[1], 46.f);
}

}  // namespace
}  // namespace chimera::kernels
