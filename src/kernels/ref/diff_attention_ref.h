// Scalar reference of kernels::diff_attention_pair (the specification): dots,
// softmax sums, the V accumulation and the sub-norm in double; exp in double.
#pragma once

#include "kernels/diff_attention.h"

namespace chimera::kernels::ref {

void diff_attention_pair(const DiffAttentionParams& p, const float* q, const KvRun* runs, int n_runs, float* out);

}  // namespace chimera::kernels::ref
