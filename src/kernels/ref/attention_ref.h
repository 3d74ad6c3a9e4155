// Scalar reference of kernels::attention (the specification). Per query row i
// (absolute position p = q_pos0 + i) and head h (KV head h / (n_head/n_head_kv)):
//   visible keys j: j < n_kv; causal => j <= p; window > 0 => p - j < window
//     (llama.cpp's standard SWA rule; in non-causal mode it only bounds keys
//     from below);
//   s_j = scale * dot(q, k_j) (dot accumulated in double here);
//   softcap > 0 => s_j = softcap * tanhf(s_j / softcap);
//   p_j = expf(s_j - max) / sum (sum in double, as ggml's soft_max);
//   out = sum_j p_j v_j (double accumulation). A row that sees no key gets 0.
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace chimera::kernels::ref {

void attention(const AttentionParams& p, const float* q, int64_t n_q, int64_t ldq, int64_t q_pos0,
               const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t n_kv, float* out,
               int64_t ldo);

// The visible key range [*lo, *hi) of a query at absolute position pos.
void attention_key_range(const AttentionParams& p, int64_t pos, int64_t n_kv, int64_t* lo, int64_t* hi);

}  // namespace chimera::kernels::ref
