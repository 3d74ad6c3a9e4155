// Element-wise and row-wise ops on float32 vectors. Each op has a scalar
// reference in ref/ops_ref.h (the specification) and a SIMD version dispatched
// on the active ISA; tolerances are stated in tests/kernels next to each op.
#pragma once

#include <cstdint>

namespace chimera::kernels {

// y = x / sqrt(mean(x^2) + eps) * w   (w may be null => 1). y may alias x.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
// y = (x - mean) / sqrt(var + eps) * w + b  (biased variance; w, b nullable).
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);
// In-place softmax over n values (max-subtracted, float accumulation).
void softmax(float* x, int64_t n);
// out = silu(gate) * up. out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// out = max(gate, 0)^2 * up, evaluated as (r * r) * up (BitNet's squared-ReLU
// GLU). out may alias gate or up.
void relu_sqr_mul(const float* gate, const float* up, float* out, int64_t n);
// x = silu(x).
void silu(float* x, int64_t n);
// y += x.
void add(float* y, const float* x, int64_t n);
// y += a * x.
void axpy(float a, const float* x, float* y, int64_t n);
// x *= a.
void scale(float* x, float a, int64_t n);
// sum_i a[i] * b[i], float accumulation.
float dot(const float* a, const float* b, int64_t n);
// Index of the largest value; the lowest index on ties. NaN never wins.
int64_t argmax(const float* x, int64_t n);

// Rotary position embedding, as ggml_rope_ext defines it.
enum class RopeMode {
  kNorm = 0,  // rotate adjacent pairs (x[2i], x[2i+1]) — llama.cpp LLAMA_ROPE_TYPE_NORM
  kNeox = 2,  // rotate halves (x[i], x[i + n_rot/2]) — LLAMA_ROPE_TYPE_NEOX
};

struct RopeParams {
  RopeMode mode = RopeMode::kNorm;
  int64_t n_rot = 0;          // rotated dims per head (<= head_dim, even); the rest pass through
  float freq_base = 10000.f;  // theta
  float freq_scale = 1.f;     // 1 / linear scaling factor
  // YaRN (ext_factor 0 disables ramp mixing): see ggml rope_yarn.
  float ext_factor = 0.f;
  float attn_factor = 1.f;
  float beta_fast = 32.f;
  float beta_slow = 1.f;
  int64_t n_ctx_orig = 0;     // original training context (YaRN)
  const float* freq_factors = nullptr;  // optional [n_rot/2] divisors of theta (llama3 / longrope)
};

// Rotates `n_heads` heads of `head_dim` floats each, laid out contiguously in x,
// for one token at position pos.
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, const RopeParams& p);

// --- additions (rope split into its two halves, so Q and K of one token, or
// several calls at one position, can share the table) ---
// The table rope() applies at `pos`, exactly as ggml_rope_cache_init builds it
// (scalar cosf/sinf per pair, theta advanced by repeated float multiplication):
// cs[2i] = cos(theta_i) * mscale, cs[2i+1] = sin(theta_i) * mscale, i < n_rot/2.
void rope_cache(int64_t pos, const RopeParams& p, float* cs);
// Applies a table from rope_cache (only p.mode and p.n_rot are read).
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, const float* cs, const RopeParams& p);
// Name of the Highway target the ops dispatch to under the active ISA (diagnostics).
const char* ops_simd_target();

}  // namespace chimera::kernels
