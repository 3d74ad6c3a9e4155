// Q4_0 load-time repacking (layout in matmul_q4_0_repack.h): the packer and
// the scalar reference of the packed gemm.
#include "kernels/matmul_q4_0_repack.h"

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/matmul_q_legacy.h"

namespace chimera::kernels::legacy::q4r {

void repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst) {
  const int64_t nb = k / 32;
  const size_t group_bytes = (size_t)kGroup * row_bytes(k);
  for (int64_t g = 0; g < n / kGroup; ++g) {
    uint8_t* d = dst + (size_t)g * group_bytes;
    uint8_t* codes = d + codes_offset(nb);
    for (int r = 0; r < kGroup; ++r) {
      const uint8_t* row = src + (size_t)(g * kGroup + r) * src_stride;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + b * 18;
        std::memcpy(d + (size_t)b * 16 + 2 * r, blk, 2);
        uint8_t* cb = codes + (size_t)b * 128;
        for (int c = 0; c < 4; ++c) std::memcpy(cb + 32 * c + 4 * r, blk + 2 + 4 * c, 4);
      }
    }
  }
}

void gemm_packed_scalar(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  gemm_packed_groups_scalar(g, r0, r1, i0, i1, 128, [](const uint8_t* cb, int rr, const int8_t* q) {
    int32_t sumi = 0;
    for (int c = 0; c < 4; ++c) {
      for (int j = 0; j < 4; ++j) {
        const uint8_t v = cb[32 * c + 4 * rr + j];
        sumi += ((int)(v & 15) - 8) * q[4 * c + j] + ((int)(v >> 4) - 8) * q[16 + 4 * c + j];
      }
    }
    return sumi;
  });
}

}  // namespace chimera::kernels::legacy::q4r
