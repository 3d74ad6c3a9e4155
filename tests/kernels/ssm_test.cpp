// State-space kernels (kernels/ssm.h) against their scalar references
// (ref/ssm_ref.h) on every ISA this CPU runs: conv1d with carried state over
// swept channel counts / widths / token counts / misalignment, chunked conv
// equal to one call, Mamba-1 and Mamba-2 scans step by step (outputs and final
// state), the chunked SSD form against the sequential recurrence on a
// 4096-token sequence, and the gated grouped RMSNorm. Tolerances are stated
// next to each check and in kernels/ssm.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/ref/ssm_ref.h"
#include "kernels/ssm.h"

namespace chimera::kernels {
namespace {

#define FOR_EACH_ISA                     \
  for (Isa isa : available_isas())       \
    if (ScopedIsa scoped_isa(isa); true) \
      if (SCOPED_TRACE(isa_name(isa)); true)

std::vector<float> rnd(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

float max_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) {
    const float d = std::fabs(a[i] - b[i]);
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return m;
}

TEST(Ssm, SoftplusMatchesGgml) {
  for (float v : {-30.f, -5.f, -0.5f, 0.f, 0.5f, 5.f, 19.99f, 20.f, 20.01f, 50.f}) {
    EXPECT_EQ(softplus(v), ref::softplus(v)) << v;
  }
  EXPECT_EQ(softplus(25.f), 25.f);
}

TEST(Ssm, Conv1dMatchesReferenceOnEveryIsa) {
  std::mt19937 rng(1);
  for (int64_t C : {1, 3, 8, 15, 16, 17, 33, 130}) {
    for (int64_t K : {1, 2, 4}) {
      for (int64_t T : {1, 2, 3, 5, 17}) {
        for (int64_t mis : {0, 1}) {
          const int64_t ldx = C + 3 + mis, ldy = C + 1;
          auto x = rnd((size_t)(T * ldx + 1), rng, -2, 2);
          auto w = rnd((size_t)(K * C), rng, -1, 1);
          auto b = rnd((size_t)C, rng, -1, 1);
          auto st0 = rnd((size_t)((K - 1) * C + 1), rng, -2, 2);
          for (bool silu : {false, true}) {
            auto sr = st0;
            std::vector<float> yr((size_t)(T * ldy));
            ref::conv1d_causal(x.data() + mis, ldx, T, w.data(), b.data(), C, K, sr.data(), yr.data(), ldy, silu, 0, C);
            FOR_EACH_ISA {
              auto s = st0;
              std::vector<float> y((size_t)(T * ldy));
              // Two ranges, as a thread pool would split the channels.
              const int64_t mid = C / 2;
              conv1d_causal(x.data() + mis, ldx, T, w.data(), b.data(), C, K, s.data(), y.data(), ldy, silu, 0, mid);
              conv1d_causal(x.data() + mis, ldx, T, w.data(), b.data(), C, K, s.data(), y.data(), ldy, silu, mid, C);
              // Bound: 4 ulp of sum |w x| + |b| (the tap sum is an FMA chain here).
              const float bound = 4 * 1.2e-7f * (4 * (float)K + 1) + 1e-6f;
              ASSERT_LE(max_diff(y.data(), yr.data(), y.size()), bound) << "C=" << C << " K=" << K << " T=" << T;
              ASSERT_EQ(max_diff(s.data(), sr.data(), s.size()), 0.f) << "state (exact copy)";
            }
          }
        }
      }
    }
  }
}

TEST(Ssm, Conv1dChunkedEqualsOneCallAndStepByStep) {
  std::mt19937 rng(2);
  const int64_t C = 37, K = 4, T = 23;
  auto x = rnd((size_t)(T * C), rng, -2, 2);
  auto w = rnd((size_t)(K * C), rng, -1, 1);
  auto b = rnd((size_t)C, rng, -1, 1);
  FOR_EACH_ISA {
    std::vector<float> s1((size_t)((K - 1) * C)), y1((size_t)(T * C));
    conv1d_causal(x.data(), C, T, w.data(), b.data(), C, K, s1.data(), y1.data(), C, true, 0, C);
    for (int64_t step : {1, 2, 5}) {
      std::vector<float> s2((size_t)((K - 1) * C)), y2((size_t)(T * C));
      for (int64_t t = 0; t < T; t += step) {
        const int64_t n = std::min(step, T - t);
        conv1d_causal(x.data() + t * C, C, n, w.data(), b.data(), C, K, s2.data(), y2.data() + t * C, C, true, 0, C);
      }
      EXPECT_EQ(max_diff(y1.data(), y2.data(), y1.size()), 0.f) << "step " << step;
      EXPECT_EQ(max_diff(s1.data(), s2.data(), s1.size()), 0.f) << "step " << step;
    }
  }
}

struct Scan1Case {
  int64_t T, D, N;
  std::vector<float> x, dt, bias, A, BC, Dk, s0;
  Scan1Case(int64_t T_, int64_t D_, int64_t N_, std::mt19937& rng) : T(T_), D(D_), N(N_) {
    x = rnd((size_t)(T * D), rng, -2, 2);
    dt = rnd((size_t)(T * D), rng, -4, 1);
    bias = rnd((size_t)D, rng, -1, 1);
    A = rnd((size_t)(D * N), rng, -3, -0.05f);
    BC = rnd((size_t)(T * 2 * N), rng, -1, 1);
    Dk = rnd((size_t)D, rng, -1, 1);
    s0 = rnd((size_t)(D * N), rng, -1, 1);
  }
  Scan1Args args(float* state, float* y) const {
    Scan1Args a;
    a.T = T, a.D = D, a.N = N;
    a.x = x.data(), a.ldx = D, a.dt = dt.data(), a.lddt = D, a.dt_bias = bias.data(), a.A = A.data();
    a.B = BC.data(), a.C = BC.data() + N, a.ldbc = 2 * N, a.d_skip = Dk.data();
    a.state = state, a.y = y, a.ldy = D;
    return a;
  }
};

TEST(Ssm, Scan1MatchesReferenceOnEveryIsa) {
  std::mt19937 rng(3);
  for (int64_t N : {1, 4, 15, 16, 17, 33}) {
    for (int64_t D : {1, 5, 16}) {
      for (int64_t T : {1, 7, 40}) {
        Scan1Case c(T, D, N, rng);
        auto sr = c.s0;
        std::vector<float> yr((size_t)(T * D));
        ref::ssm_scan1(c.args(sr.data(), yr.data()), 0, D);
        const float ys = std::max(1.f, max_abs(yr)), ss = std::max(1.f, max_abs(sr));
        FOR_EACH_ISA {
          auto s = c.s0;
          std::vector<float> y((size_t)(T * D));
          ssm_scan1(c.args(s.data(), y.data()), 0, D / 2);
          ssm_scan1(c.args(s.data(), y.data()), D / 2, D);
          EXPECT_LE(max_diff(y.data(), yr.data(), y.size()), 1e-5f * ys) << "N=" << N << " D=" << D << " T=" << T;
          EXPECT_LE(max_diff(s.data(), sr.data(), s.size()), 1e-5f * ss) << "state N=" << N << " D=" << D;
        }
      }
    }
  }
}

struct Scan2Case {
  int64_t T, H, P, N, G;
  std::vector<float> x, dt, bias, A, BC, Dk, s0;
  Scan2Case(int64_t T_, int64_t H_, int64_t P_, int64_t N_, int64_t G_, std::mt19937& rng)
      : T(T_), H(H_), P(P_), N(N_), G(G_) {
    x = rnd((size_t)(T * H * P), rng, -2, 2);
    dt = rnd((size_t)(T * H), rng, -4, 1);
    bias = rnd((size_t)H, rng, -1, 1);
    A = rnd((size_t)H, rng, -3, -0.05f);
    BC = rnd((size_t)(T * 2 * G * N), rng, -1, 1);
    Dk = rnd((size_t)H, rng, -1, 1);
    s0 = rnd((size_t)(H * P * N), rng, -1, 1);
  }
  Scan2Args args(float* state, float* y, int64_t t0 = 0, int64_t n = -1) const {
    Scan2Args a;
    a.T = n < 0 ? T : n, a.H = H, a.P = P, a.N = N, a.G = G;
    a.x = x.data() + t0 * H * P, a.ldx = H * P, a.dt = dt.data() + t0 * H, a.lddt = H, a.dt_bias = bias.data();
    a.A = A.data(), a.B = BC.data() + t0 * 2 * G * N, a.C = a.B + G * N, a.ldbc = 2 * G * N, a.d_skip = Dk.data();
    a.state = state, a.y = y + t0 * H * P, a.ldy = H * P;
    return a;
  }
};

TEST(Ssm, Scan2MatchesReferenceOnEveryIsa) {
  std::mt19937 rng(4);
  for (int64_t G : {1, 2}) {
    for (int64_t N : {1, 15, 16, 17, 32}) {
      for (int64_t P : {1, 3, 8, 17}) {
        for (int64_t T : {1, 9, 33}) {
          Scan2Case c(T, 4, P, N, G, rng);
          auto sr = c.s0;
          std::vector<float> yr((size_t)(T * 4 * P));
          ref::ssm_scan2(c.args(sr.data(), yr.data()), 0, 4);
          const float ys = std::max(1.f, max_abs(yr)), ss = std::max(1.f, max_abs(sr));
          FOR_EACH_ISA {
            auto s = c.s0;
            std::vector<float> y(yr.size());
            ssm_scan2(c.args(s.data(), y.data()), 0, 1);
            ssm_scan2(c.args(s.data(), y.data()), 1, 4);
            EXPECT_LE(max_diff(y.data(), yr.data(), y.size()), 1e-5f * ys) << "G=" << G << " N=" << N << " P=" << P;
            EXPECT_LE(max_diff(s.data(), sr.data(), s.size()), 1e-5f * ss) << "state G=" << G << " N=" << N;
          }
        }
      }
    }
  }
}

// The scan steps four state rows of a head together (independent chains for
// speed) and the rest one at a time; both must give the same bits. One head
// of P rows (four-row groups plus a rest) against P one-row heads sharing its
// dt, bias, A and D: the same values in the same layout through the other loop.
TEST(Ssm, Scan2FourRowStepMatchesOneRowStepBits) {
  std::mt19937 rng(7);
  for (int64_t N : {15, 16, 33}) {
    for (int64_t P : {4, 5, 9}) {
      for (int64_t T : {1, 3}) {
        Scan2Case c(T, 1, P, N, 1, rng);
        std::vector<float> dt((size_t)(T * P)), bias((size_t)P, c.bias[0]), A((size_t)P, c.A[0]);
        std::vector<float> Dk((size_t)P, c.Dk[0]);
        for (int64_t t = 0; t < T; ++t)
          for (int64_t h = 0; h < P; ++h) dt[(size_t)(t * P + h)] = c.dt[(size_t)t];
        FOR_EACH_ISA {
          auto s4 = c.s0, s1 = c.s0;
          std::vector<float> y4((size_t)(T * P)), y1((size_t)(T * P));
          ssm_scan2(c.args(s4.data(), y4.data()), 0, 1);
          Scan2Args a = c.args(s1.data(), y1.data());
          a.H = P, a.P = 1, a.dt = dt.data(), a.lddt = P, a.dt_bias = bias.data(), a.A = A.data(), a.d_skip = Dk.data();
          ssm_scan2(a, 0, P);
          EXPECT_EQ(y4, y1) << "N=" << N << " P=" << P << " T=" << T;
          EXPECT_EQ(s4, s1) << "state N=" << N << " P=" << P << " T=" << T;
        }
      }
    }
  }
}

// Decode steps (T = 1, as the server's fused steps run) against one
// multi-token call over the same tokens: identical outputs and final state,
// bit for bit, with the heads split over two ranges as a pool would.
TEST(Ssm, Scan2DecodeStepsMatchOneCallBits) {
  std::mt19937 rng(8);
  for (int64_t N : {7, 16, 128}) {
    for (int64_t P : {1, 6, 64}) {
      const int64_t T = 5, H = 3;
      Scan2Case c(T, H, P, N, 1, rng);
      FOR_EACH_ISA {
        auto sa = c.s0, sb = c.s0;
        std::vector<float> ya((size_t)(T * H * P)), yb(ya.size());
        ssm_scan2(c.args(sa.data(), ya.data()), 0, H);
        for (int64_t t = 0; t < T; ++t) {
          ssm_scan2(c.args(sb.data(), yb.data(), t, 1), 0, 1);
          ssm_scan2(c.args(sb.data(), yb.data(), t, 1), 1, H);
        }
        EXPECT_EQ(ya, yb) << "N=" << N << " P=" << P;
        EXPECT_EQ(sa, sb) << "state N=" << N << " P=" << P;
      }
    }
  }
}

TEST(Ssm, SsdMatchesItsReferenceOnEveryIsa) {
  std::mt19937 rng(5);
  // Chunk and head-dim sizes cover the GEMM tile tails: rows (chunk not a
  // multiple of 4), columns (P below, at and past one and two vectors).
  for (int64_t chunk : {1, 4, 16, 37, 64}) {
    for (int64_t P : {1, 5, 16, 40}) {
      for (int64_t N : {3, 16, 17}) {
        Scan2Case c(70, 4, P, N, 2, rng);
        auto sr = c.s0;
        std::vector<float> yr((size_t)(c.T * 4 * P));
        ref::ssd_chunked(c.args(sr.data(), yr.data()), chunk, 0, 4);
        const float ys = std::max(1.f, max_abs(yr)), ss = std::max(1.f, max_abs(sr));
        FOR_EACH_ISA {
          auto s = c.s0;
          std::vector<float> y(yr.size());
          ssd_chunked(c.args(s.data(), y.data()), chunk, 0, 3);
          ssd_chunked(c.args(s.data(), y.data()), chunk, 3, 4);
          EXPECT_LE(max_diff(y.data(), yr.data(), y.size()), 2e-5f * ys) << "chunk=" << chunk << " P=" << P;
          EXPECT_LE(max_diff(s.data(), sr.data(), s.size()), 2e-5f * ss) << "state chunk=" << chunk << " P=" << P;
        }
      }
    }
  }
}

// The acceptance check: the chunked SSD prefill and the sequential
// recurrence agree on a >= 4096-token sequence, outputs and final state, within
// kRel relative to the largest magnitude: a few times the measured error
// (outputs 1.7e-7, final state 8.7e-8 relative, the same on every ISA).
TEST(Ssm, SsdAgreesWithSequentialScanOn4096Tokens) {
  std::mt19937 rng(6);
  const int64_t T = 4100, H = 4, P = 16, N = 16, G = 2;
  Scan2Case c(T, H, P, N, G, rng);
  // Realistic decays: Δ = softplus(dt + bias) in ~[0.01, 1.3]; A in [-3, -0.05].
  auto sr = c.s0;
  std::vector<float> yr((size_t)(T * H * P));
  ref::ssm_scan2(c.args(sr.data(), yr.data()), 0, H);
  const float ys = std::max(1.f, max_abs(yr)), ss = std::max(1.f, max_abs(sr));
  constexpr float kRel = 1e-6f;
  FOR_EACH_ISA {
    for (int64_t chunk : {64, 256}) {
      auto s = c.s0;
      std::vector<float> y(yr.size());
      ssd_chunked(c.args(s.data(), y.data()), chunk, 0, H);
      const float dy = max_diff(y.data(), yr.data(), y.size()), ds = max_diff(s.data(), sr.data(), s.size());
      RecordProperty("ssd_vs_scan_chunk" + std::to_string(chunk) + "_" + isa_name(isa),
                     std::to_string(dy / ys) + " / " + std::to_string(ds / ss));
      EXPECT_LE(dy, kRel * ys) << "outputs, chunk " << chunk << " (max|y| " << ys << ")";
      EXPECT_LE(ds, kRel * ss) << "final state, chunk " << chunk << " (max|h| " << ss << ")";
      {
        std::printf("[ssd-vs-scan %s] T=%lld chunk=%lld: max|dy| %.3g (max|y| %.3g), max|dh| %.3g (max|h| %.3g)\n",
                    isa_name(isa), (long long)T, (long long)chunk, dy, ys, ds, ss);
      }
    }
    // Prefill split into uneven calls (state carried) lands on the same state.
    auto s2 = c.s0;
    std::vector<float> y2(yr.size());
    for (int64_t t0 = 0, n = 1; t0 < T; t0 += n, n = std::min<int64_t>(n * 3 + 1, 700)) {
      n = std::min(n, T - t0);
      ssd_chunked(c.args(s2.data(), y2.data(), t0, n), 64, 0, H);
    }
    EXPECT_LE(max_diff(y2.data(), yr.data(), y2.size()), kRel * ys);
    EXPECT_LE(max_diff(s2.data(), sr.data(), s2.size()), kRel * ss);
  }
}

TEST(Ssm, GatedGroupRmsNormMatchesReferenceOnEveryIsa) {
  std::mt19937 rng(7);
  for (int64_t gs : {1, 7, 16, 64, 65}) {
    for (int64_t ng : {1, 2, 3}) {
      const int64_t n = gs * ng;
      auto y0 = rnd((size_t)n, rng, -3, 3);
      auto z = rnd((size_t)n, rng, -4, 4);
      auto w = rnd((size_t)n, rng, -1, 1);
      for (bool gate : {false, true}) {
        auto yr = y0;
        ref::gated_group_rms_norm(yr.data(), gate ? z.data() : nullptr, w.data(), n, gs, 1e-5f);
        FOR_EACH_ISA {
          auto y = y0;
          gated_group_rms_norm(y.data(), gate ? z.data() : nullptr, w.data(), n, gs, 1e-5f);
          EXPECT_LE(max_diff(y.data(), yr.data(), y.size()), 1e-5f * std::max(1.f, max_abs(yr)));
        }
      }
    }
  }
}

}  // namespace
}  // namespace chimera::kernels
