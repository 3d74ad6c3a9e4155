// Scalar reference ops (the specification; see ops_ref.h for the numerics).
// Plain loops, no intrinsics; the build uses ISO C++ so no FMA contraction
// happens here (GCC's -ffp-contract=off in -std=c++20 mode).
#include "kernels/ref/ops_ref.h"

#include <cmath>

namespace chimera::kernels::ref {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += (double)(x[i] * x[i]);
  const float mean = (float)(sum / (double)n);
  const float s = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = w ? (x[i] * s) * w[i] : x[i] * s;
}

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += (double)x[i];
  const float mean = (float)(sum / (double)n);
  double sum2 = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] - mean;
    sum2 += (double)(v * v);
  }
  const float var = (float)(sum2 / (double)n);
  const float s = 1.0f / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) {
    float v = (x[i] - mean) * s;
    if (w) v = v * w[i];
    if (b) v = v + b[i];
    y[i] = v;
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::fmax(mx, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(x[i] - mx);
    x[i] = e;
    sum += (double)e;
  }
  const float inv = (float)(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

static inline float silu1(float v) { return v / (1.0f + std::exp(-v)); }

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu1(gate[i]) * up[i];
}

void relu_sqr_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float r = gate[i] > 0.f ? gate[i] : 0.f;  // NaN and -0 give +0
    out[i] = r * r * up[i];
  }
}

void silu(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = silu1(x[i]);
}

void add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void scale(float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

float dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += (double)a[i] * (double)b[i];
  return (float)s;
}

int64_t argmax(const float* x, int64_t n) {
  if (n <= 0) return -1;
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    if (best < 0 || x[i] > x[best]) best = i;
  }
  return best < 0 ? 0 : best;
}

// ggml_rope_yarn_corr_dim: the pair index at which a frequency completes
// n_rot_turns rotations over the original context.
static float corr_dim(int64_t n_dims, int64_t n_ctx_orig, float n_turns, float base) {
  return (float)n_dims * std::log((float)n_ctx_orig / (n_turns * 2 * (float)M_PI)) / (2 * std::log(base));
}

void rope_yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast,
                         float beta_slow, float dims[2]) {
  const float start = std::floor(corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
  const float end = std::ceil(corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
  dims[0] = std::fmax(0.0f, start);
  dims[1] = std::fmin((float)(n_rot - 1), end);
}

void rope_cache(int64_t pos, const RopeParams& p, float* cs) {
  const int64_t n_rot = p.n_rot;
  const float theta_scale = std::pow(p.freq_base, -2.0f / (float)n_rot);
  float corr[2] = {0.f, 0.f};
  if (p.ext_factor != 0.0f) rope_yarn_corr_dims(n_rot, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow, corr);
  float theta = (float)pos;
  for (int64_t i0 = 0; i0 < n_rot; i0 += 2) {
    const float ff = p.freq_factors ? p.freq_factors[i0 / 2] : 1.0f;
    // rope_yarn(theta / ff, ...)
    const float theta_extrap = theta / ff;
    const float theta_interp = p.freq_scale * theta_extrap;
    float th = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      // rope_yarn_ramp(low, high, i0): i0/2 is the pair index (integer division).
      const float y = (float)(i0 / 2 - corr[0]) / std::fmax(0.001f, corr[1] - corr[0]);
      const float ramp = 1.0f - std::fmin(1.0f, std::fmax(0.0f, y));
      const float ramp_mix = ramp * p.ext_factor;
      th = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cs[i0 + 0] = std::cos(th) * mscale;
    cs[i0 + 1] = std::sin(th) * mscale;
    theta *= theta_scale;
  }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, const RopeParams& p) {
  const int64_t n_rot = p.n_rot;
  if (n_rot <= 0) return;
  float cs[4096];
  if (n_rot > 4096) return;  // reference limit; the kernel has none
  ref::rope_cache(pos, p, cs);
  const bool neox = p.mode == RopeMode::kNeox;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    for (int64_t i0 = 0; i0 < n_rot; i0 += 2) {
      const float c = cs[i0], s = cs[i0 + 1];
      // kNorm: pair (i0, i0+1); kNeox: pair (i0/2, i0/2 + n_rot/2).
      const int64_t a = neox ? i0 / 2 : i0;
      const int64_t b = neox ? i0 / 2 + n_rot / 2 : i0 + 1;
      const float x0 = xh[a], x1 = xh[b];
      xh[a] = x0 * c - x1 * s;
      xh[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace chimera::kernels::ref
