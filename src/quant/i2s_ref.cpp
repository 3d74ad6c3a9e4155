// Scalar reference for I2_S (layout: i2s.h): tensor-scale lookup, row
// dequantization and bitnet.cpp's quantizer. The quantizer compares in double
// as bitnet.cpp does (max |x| in double, stored as f32).
#include <cmath>
#include <cstring>

#include "quant/i2s.h"

namespace chimera::quant {

float i2s_tensor_scale(const uint8_t* tensor, int64_t rows, int64_t k) {
  float s;
  std::memcpy(&s, tensor + (size_t)rows * (size_t)(k / 4), sizeof(s));
  return s;
}

void dequantize_row_i2s(const uint8_t* row, float scale, float* y, int64_t k) {
  for (int64_t j = 0; j < k; ++j) y[j] = (float)(i2s_code(row, j) - 1) * scale;
}

void quantize_i2s(const float* x, int64_t rows, int64_t k, uint8_t* out) {
  const int64_t n = rows * k;
  double max = 0;
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, std::fabs((double)x[i]));
  std::memset(out, 0, (size_t)(n / 4) + kI2sTailBytes);
  for (int64_t i = 0; i < n; ++i) {
    const double v = (double)x[i];
    const int c = std::fabs(v) < 1e-6 ? 1 : (v * max > 0 ? 2 : 0);
    i2s_set_code(out, i, c);  // the tensor is one row-major run of blocks
  }
  const float s = (float)max;
  std::memcpy(out + n / 4, &s, sizeof(s));
}

}  // namespace chimera::quant
