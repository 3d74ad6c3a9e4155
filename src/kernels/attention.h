// Scaled dot-product attention over a float32 KV cache, with grouped KV heads.
//
// Layout: q has n_q rows of n_head*head_dim floats (row stride ldq); the cache
// holds n_kv key rows and value rows of n_head_kv*head_dim floats (strides ldk,
// ldv); key row j is the token at absolute position j. Query row i sits at
// absolute position q_pos0 + i. Head h reads KV head h / (n_head / n_head_kv).
//   causal:      query at position p sees keys 0..p (and < n_kv)
//   window > 0:  additionally only keys p-window+1..p
//   non-causal:  all n_kv keys (diffusion LMs)
// out has n_q rows of n_head*head_dim (stride ldo). Softmax in float32 with max
// subtraction; work is split over (query, head) pairs, each computed by one
// thread in a fixed order, so results do not depend on the thread count.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace chimera::kernels {

struct AttentionParams {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  float scale = 1.f;     // usually 1/sqrt(head_dim)
  bool causal = true;
  int64_t window = 0;    // 0 = unlimited
  float softcap = 0.f;   // 0 = none; else scores = softcap * tanh(scores / softcap)
};

void attention(const AttentionParams& p, const float* q, int64_t n_q, int64_t ldq, int64_t q_pos0,
               const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t n_kv, float* out,
               int64_t ldo, ThreadPool* pool);

}  // namespace chimera::kernels
