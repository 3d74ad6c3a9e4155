// Fused differential attention for one query head pair (Phi-4-mini-flash /
// SambaY, ARCHITECTURES.md §1.4), Highway SIMD with runtime dispatch:
//   s1_j = scale·q1·k1_j,  s2_j = scale·q2·k2_j       over the visible keys j
//   A1 = softmax(s1), A2 = softmax(s2)                 (two softmax passes)
//   o  = Σ_j (A1_j − λ·A2_j) · v_j                     (one pass over V, 2·hd wide)
//   out = RMSNorm(o; sub_norm, eps) · out_scale        (out_scale = 1 − λ_init)
// q holds [q1 | q2] (2·hd floats). The keys come in position order as a few
// contiguous runs (a ring cache that wraps, then the rows of the current chunk):
// key row r of a run has k1 at k + r·ldk, k2 right after it (hd floats each),
// and v (2·hd floats) at v + r·ldv. `scores` is scratch for 2·(Σ n) floats.
// No visible key: out = 0.
//
// Invariants: the result depends only on q, the key sequence and the
// parameters — not on how the keys are split into runs — so batch, chunked and
// step-by-step prefill agree bit for bit. Precision vs ref::diff_attention_pair
// (double): see tests/kernels/diff_attention_test.cpp.
#pragma once

#include <cstdint>

namespace chimera::kernels {

struct DiffAttentionParams {
  int64_t head_dim = 0;             // hd
  float scale = 1.f;                // usually 1/sqrt(hd)
  float lambda = 0.f;               // λ
  float eps = 1e-5f;                // sub-norm epsilon
  float out_scale = 1.f;            // 1 − λ_init
  const float* sub_norm = nullptr;  // [2·hd] RMSNorm weight
};

struct KvRun {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t ldk = 0, ldv = 0;
  int64_t n = 0;  // key rows in this run
};

void diff_attention_pair(const DiffAttentionParams& p, const float* q, const KvRun* runs, int n_runs, float* scores,
                         float* out);

}  // namespace chimera::kernels
