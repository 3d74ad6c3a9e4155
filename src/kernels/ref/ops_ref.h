// Scalar reference implementations of the ops in kernels/ops.h: the
// specification the SIMD kernels are tested against. Never on the hot path.
//
// Numerics follow llama.cpp's ggml CPU ops so that our logits track theirs:
//   rms_norm:   sum of x*x (each product rounded to float) accumulated in double;
//               mean and scale = 1/sqrtf(mean + eps) in float; y = (x*scale)*w.
//   layer_norm: mean and biased variance accumulated in double (ggml_norm);
//               y = ((x-mean)*scale)*w + b, each step rounded to float.
//   softmax:    max in float, expf(x - max), sum in double, multiply by
//               (float)(1/sum).
//   silu:       x / (1 + expf(-x)).
//   dot:        accumulated in double (the reference is more accurate than
//               the float-accumulating SIMD kernel; tests scale the bound by
//               sum |a_i b_i|).
//   rope:       ggml_rope_ext (see rope_cache below), rotation in float.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace chimera::kernels::ref {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);
void softmax(float* x, int64_t n);
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
void relu_sqr_mul(const float* gate, const float* up, float* out, int64_t n);
void silu(float* x, int64_t n);
void add(float* y, const float* x, int64_t n);
void axpy(float a, const float* x, float* y, int64_t n);
void scale(float* x, float a, int64_t n);
float dot(const float* a, const float* b, int64_t n);
int64_t argmax(const float* x, int64_t n);

// ggml_rope_yarn_corr_dims: the [start, end] pair range over which YaRN ramps
// from extrapolation to interpolation.
void rope_yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast,
                         float beta_slow, float dims[2]);
// The per-pair (cos, sin) table ggml_rope_cache_init builds for one position:
// cs[2*i] = cos(theta_i) * mscale_i, cs[2*i+1] = sin(theta_i) * mscale_i for
// i in [0, n_rot/2). theta is advanced by repeated float multiplication by
// theta_scale = powf(freq_base, -2/n_rot), exactly as ggml does.
void rope_cache(int64_t pos, const RopeParams& p, float* cs);
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, const RopeParams& p);

}  // namespace chimera::kernels::ref
