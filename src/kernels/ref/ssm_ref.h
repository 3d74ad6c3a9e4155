// Scalar reference implementations of the state-space kernels in
// kernels/ssm.h: the specification the SIMD kernels are tested against, never
// on the hot path. Plain loops in the op order of llama.cpp's ggml_ssm_conv /
// ggml_ssm_scan (see ssm.h); the build uses ISO C++ so no FMA contraction
// happens here. ssd_chunked is the chunked matrix form written as plainly as
// possible (cumulative decays in double, then exp of differences in float).
#pragma once

#include <cstdint>

#include "kernels/ssm.h"

namespace chimera::kernels::ref {

float softplus(float v);
void conv1d_causal(const float* x, int64_t ldx, int64_t T, const float* w, const float* b, int64_t C, int64_t K,
                   float* state, float* y, int64_t ldy, bool silu, int64_t c0, int64_t c1);
void ssm_scan1(const Scan1Args& a, int64_t d0, int64_t d1);
void ssm_scan2(const Scan2Args& a, int64_t h0, int64_t h1);
void ssd_chunked(const Scan2Args& a, int64_t chunk, int64_t h0, int64_t h1);
void gated_group_rms_norm(float* y, const float* z, const float* w, int64_t n, int64_t group_size, float eps);

}  // namespace chimera::kernels::ref
