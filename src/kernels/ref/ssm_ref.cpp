// Scalar reference state-space kernels (the specification; see ssm_ref.h and
// kernels/ssm.h for layouts and numerics). Plain loops, no intrinsics.
#include "kernels/ref/ssm_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ref/ops_ref.h"

namespace chimera::kernels::ref {

float softplus(float v) { return v > 20.0f ? v : std::log(1.0f + std::exp(v)); }

static inline float silu1(float v) { return v / (1.0f + std::exp(-v)); }

void conv1d_causal(const float* x, int64_t ldx, int64_t T, const float* w, const float* b, int64_t C, int64_t K,
                   float* state, float* y, int64_t ldy, bool silu, int64_t c0, int64_t c1) {
  const int64_t S = K - 1;  // state rows
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t t = 0; t < T; ++t) {
      float acc = 0.0f;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t r = t + j;  // row of the window [state ; x]
        const float v = r < S ? state[r * C + c] : x[(r - S) * ldx + c];
        acc += v * w[j * C + c];
      }
      if (b) acc = acc + b[c];
      y[t * ldy + c] = silu ? silu1(acc) : acc;
    }
    // New state: the last S rows of the window (ascending order reads rows not yet overwritten).
    for (int64_t r = 0; r < S; ++r) {
      const int64_t src = r + T;
      state[r * C + c] = src < S ? state[src * C + c] : x[(src - S) * ldx + c];
    }
  }
}

void ssm_scan1(const Scan1Args& a, int64_t d0, int64_t d1) {
  const int64_t N = a.N;
  for (int64_t t = 0; t < a.T; ++t) {
    const float* B = a.B + t * a.ldbc;
    const float* Cv = a.C + t * a.ldbc;
    for (int64_t d = d0; d < d1; ++d) {
      float dtv = a.dt[t * a.lddt + d];
      if (a.dt_bias) dtv = dtv + a.dt_bias[d];
      const float dsp = softplus(dtv);
      const float xv = a.x[t * a.ldx + d];
      const float x_dt = xv * dsp;
      float* s = a.state + d * N;
      const float* A = a.A + d * N;
      float sum = 0.0f;
      for (int64_t n = 0; n < N; ++n) {
        const float st = s[n] * std::exp(dsp * A[n]) + B[n] * x_dt;
        sum += st * Cv[n];
        s[n] = st;
      }
      if (a.d_skip) sum = sum + xv * a.d_skip[d];
      a.y[t * a.ldy + d] = sum;
    }
  }
}

void ssm_scan2(const Scan2Args& a, int64_t h0, int64_t h1) {
  const int64_t N = a.N, P = a.P, hpg = a.H / a.G;
  for (int64_t t = 0; t < a.T; ++t) {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t g = h / hpg;
      const float* B = a.B + t * a.ldbc + g * N;
      const float* Cv = a.C + t * a.ldbc + g * N;
      float dtv = a.dt[t * a.lddt + h];
      if (a.dt_bias) dtv = dtv + a.dt_bias[h];
      const float dsp = softplus(dtv);
      const float dA = std::exp(dsp * a.A[h]);
      for (int64_t p = 0; p < P; ++p) {
        const float xv = a.x[t * a.ldx + h * P + p];
        const float x_dt = xv * dsp;
        float* s = a.state + (h * P + p) * N;
        float sum = 0.0f;
        for (int64_t n = 0; n < N; ++n) {
          const float st = s[n] * dA + B[n] * x_dt;
          sum += st * Cv[n];
          s[n] = st;
        }
        if (a.d_skip) sum = sum + xv * a.d_skip[h];
        a.y[t * a.ldy + h * P + p] = sum;
      }
    }
  }
}

void ssd_chunked(const Scan2Args& a, int64_t chunk, int64_t h0, int64_t h1) {
  const int64_t N = a.N, P = a.P, hpg = a.H / a.G;
  if (chunk < 1) chunk = 1;
  std::vector<double> lam((size_t)chunk);
  std::vector<float> dts((size_t)chunk), yrow((size_t)P);
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t g = h / hpg;
    float* H = a.state + h * P * N;
    for (int64_t t0 = 0; t0 < a.T; t0 += chunk) {
      const int64_t L = std::min(chunk, a.T - t0);
      double cum = 0.0;
      for (int64_t l = 0; l < L; ++l) {
        float dtv = a.dt[(t0 + l) * a.lddt + h];
        if (a.dt_bias) dtv = dtv + a.dt_bias[h];
        dts[(size_t)l] = softplus(dtv);
        cum += (double)(dts[(size_t)l] * a.A[h]);
        lam[(size_t)l] = cum;
      }
      auto xrow = [&](int64_t l) { return a.x + (t0 + l) * a.ldx + h * P; };
      auto brow = [&](int64_t l) { return a.B + (t0 + l) * a.ldbc + g * N; };
      auto crow = [&](int64_t l) { return a.C + (t0 + l) * a.ldbc + g * N; };
      // Outputs: intra-chunk (diagonal block) + carried state (off-diagonal) + D skip.
      for (int64_t l = 0; l < L; ++l) {
        for (int64_t p = 0; p < P; ++p) yrow[(size_t)p] = 0.0f;
        for (int64_t s = 0; s <= l; ++s) {
          float cb = 0.0f;
          for (int64_t n = 0; n < N; ++n) cb += crow(l)[n] * brow(s)[n];
          const float m = cb * std::exp((float)(lam[(size_t)l] - lam[(size_t)s])) * dts[(size_t)s];
          for (int64_t p = 0; p < P; ++p) yrow[(size_t)p] += m * xrow(s)[p];
        }
        const float eo = std::exp((float)lam[(size_t)l]);
        for (int64_t p = 0; p < P; ++p) {
          float off = 0.0f;
          for (int64_t n = 0; n < N; ++n) off += H[p * N + n] * crow(l)[n];
          float v = yrow[(size_t)p] + eo * off;
          if (a.d_skip) v = v + xrow(l)[p] * a.d_skip[h];
          a.y[(t0 + l) * a.ldy + h * P + p] = v;
        }
      }
      // Chunk state and inter-chunk recurrence.
      const float dend = std::exp((float)lam[(size_t)(L - 1)]);
      for (int64_t i = 0; i < P * N; ++i) H[i] *= dend;
      for (int64_t s = 0; s < L; ++s) {
        const float w = std::exp((float)(lam[(size_t)(L - 1)] - lam[(size_t)s])) * dts[(size_t)s];
        for (int64_t p = 0; p < P; ++p) {
          const float u = w * xrow(s)[p];
          for (int64_t n = 0; n < N; ++n) H[p * N + n] += u * brow(s)[n];
        }
      }
    }
  }
}

void gated_group_rms_norm(float* y, const float* z, const float* w, int64_t n, int64_t group_size, float eps) {
  if (z) silu_mul(z, y, y, n);
  for (int64_t g0 = 0; g0 + group_size <= n; g0 += group_size)
    rms_norm(y + g0, w ? w + g0 : nullptr, y + g0, group_size, eps);
}

}  // namespace chimera::kernels::ref
