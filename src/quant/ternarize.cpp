// Absmean ternarization into TQ1_0 / TQ2_0 (semantics and precision: ternarize.h).
// Each row is ternarized into a 256-float scratch block by block and handed to
// the byte-exact reference quantizers of ternary_ref.cpp.
#include "quant/ternarize.h"

#include <cmath>
#include <string>

#include "quant/ternary_blocks.h"

namespace chimera::quant {

Status ternarize_tensor(format::GgmlType type, const float* w, int64_t n_rows, int64_t n_cols, void* out,
                        size_t out_bytes, float* scale_out) {
  using format::GgmlType;
  if (type != GgmlType::TQ1_0 && type != GgmlType::TQ2_0)
    return invalid_argument("ternarize: target type must be TQ1_0 or TQ2_0");
  if (n_rows < 0 || n_cols <= 0 || n_cols % kQK_K != 0)
    return invalid_argument("ternarize: row length " + std::to_string(n_cols) + " is not a multiple of 256");
  const size_t bsz = type == GgmlType::TQ1_0 ? sizeof(block_tq1_0) : sizeof(block_tq2_0);
  const size_t need = (size_t)(n_rows * (n_cols / kQK_K)) * bsz;
  if (out_bytes < need) return invalid_argument("ternarize: output buffer too small");
  double sum = 0;
  const int64_t n = n_rows * n_cols;
  // Already ternary (every non-zero |w| the same a, e.g. a BitNet GGUF or a
  // converted BitNet checkpoint): s = a keeps every weight. The absmean of
  // such a tensor is a times the non-zero fraction, so ternarizing it again
  // would shrink every weight by that fraction.
  float a = 0.f;
  bool ternary = true;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(w[i])) return invalid_argument("ternarize: non-finite weight at index " + std::to_string(i));
    const float m = std::fabs(w[i]);
    sum += (double)m;
    if (m != 0.f) {
      if (a == 0.f) a = m;
      ternary = ternary && m == a;
    }
  }
  const float s = ternary && a > 0.f ? a : std::fmax((float)(n > 0 ? sum / (double)n : 0.0), 1e-5f);
  if (scale_out) *scale_out = s;
  float tmp[kQK_K];
  uint8_t* o = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    for (int e = 0; e < kQK_K; ++e) {
      const float c = std::nearbyint(w[b * kQK_K + e] / s);  // round half to even (default mode)
      tmp[e] = std::fmin(1.f, std::fmax(-1.f, c)) * s;
    }
    if (type == GgmlType::TQ1_0)
      quantize_row_tq1_0(tmp, reinterpret_cast<block_tq1_0*>(o + (size_t)b * bsz), kQK_K);
    else
      quantize_row_tq2_0(tmp, reinterpret_cast<block_tq2_0*>(o + (size_t)b * bsz), kQK_K);
  }
  return Status::ok();
}

}  // namespace chimera::quant
