// Scalar matmul reference: plain loops in double over fp16.h's conversions.
// Deliberately independent of the kernel table so it can check it.
#include "kernels/ref/matmul_ref.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"

namespace chimera::kernels::ref {

using format::GgmlType;

void round_activation_ref(GgmlType type, const float* x, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    switch (type) {
      case GgmlType::F16: out[j] = f16_to_f32(f32_to_f16(x[j])); break;
      default: out[j] = x[j]; break;
    }
  }
}

void weight_row_to_f32_ref(const WeightView& w, int64_t r, float* out) {
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + (size_t)r * w.row_bytes;
  for (int64_t j = 0; j < w.cols; ++j) {
    uint16_t h;
    switch (w.type) {
      case GgmlType::F16:
        std::memcpy(&h, row + j * 2, 2);
        out[j] = f16_to_f32(h);
        break;
      case GgmlType::BF16:
        std::memcpy(&h, row + j * 2, 2);
        out[j] = bf16_to_f32(h);
        break;
      default: std::memcpy(&out[j], row + j * 4, 4); break;
    }
  }
}

void matmul_ref(const WeightView& w, const float* x, int64_t m, int64_t ldx, double* y, int64_t ldy,
                double* abs_dot) {
  std::vector<float> wr((size_t)w.cols), xr((size_t)w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    weight_row_to_f32_ref(w, r, wr.data());
    for (int64_t i = 0; i < m; ++i) {
      round_activation_ref(w.type, x + i * ldx, xr.data(), w.cols);
      double s = 0, sa = 0;
      for (int64_t j = 0; j < w.cols; ++j) {
        s += (double)wr[j] * (double)xr[j];
        sa += std::fabs((double)wr[j] * (double)xr[j]);
      }
      y[i * ldy + r] = s;
      if (abs_dot) abs_dot[i * ldy + r] = sa;
    }
  }
}

}  // namespace chimera::kernels::ref
