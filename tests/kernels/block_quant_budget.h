// The error budget the block-quant matmul kernels state against the f64 dot
// of their dequantized operands (matmul_kquant.h, matmul_iq4xs.h,
// matmul_ternary.h): |y - ref| <= (k/256 + 8) * 2^-23 * mag, mag = sum of
// (|w| + |w0|) |a| over the dot. One check for every sweep that applies it.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace chimera::kernels {

// y, ref, mag: m activation rows x `rows` outputs (index i * rows + r).
inline ::testing::AssertionResult within_block_quant_budget(const float* y, const double* ref, const double* mag,
                                                            int64_t m, int64_t rows, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t e = i * rows + r;
      const double tol = (double)(k / 256 + 8) * std::ldexp(1.0, -23) * mag[e];
      const double err = std::fabs((double)y[e] - ref[e]);
      if (!(err <= tol)) {
        return ::testing::AssertionFailure() << "activation row " << i << ", output " << r << ": |" << y[e] << " - "
                                             << ref[e] << "| = " << err << " > " << tol;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace chimera::kernels
