// The x16 K-quant layout (matmul_kquant_x16.h): load-time repacking from the
// GGUF storage layout and the inverse (one row's super-block back in storage
// form, for the panel-decoding GEMM path). Both are plain byte permutations
// plus the lossless 6-bit scale re-arrangement.
#include "kernels/matmul_kquant_x16.h"

#include <cstring>

#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

constexpr size_t kQ4GroupBlock = kX16Rows * sizeof(q::block_q4_K);  // 2304
constexpr size_t kQ4Scales = 64, kQ4Qs = 256;

// Byte of plane t holding value 4t + u of row r (see the header).
constexpr size_t plane_byte(int r, int u) { return 16 * (size_t)(r / 4) + 4 * (size_t)(r % 4) + (size_t)u; }

// The 16 six-bit values of a Q4_K row's scale bytes: sc0..7, m0..7.
void k4_values(const uint8_t* s12, uint8_t v[16]) {
  for (int j = 0; j < 8; ++j) q::get_scale_min_k4(j, s12, &v[j], &v[8 + j]);
}

// Inverse of k4_values (the 96 bits hold exactly the 16 values).
void k4_bytes(const uint8_t v[16], uint8_t s12[12]) {
  for (int j = 0; j < 4; ++j) {
    const uint8_t sc_hi = v[j + 4], m_hi = v[8 + j + 4];
    s12[j] = (uint8_t)(v[j] | ((sc_hi >> 4) << 6));
    s12[j + 4] = (uint8_t)(v[8 + j] | ((m_hi >> 4) << 6));
    s12[j + 8] = (uint8_t)((sc_hi & 0xF) | ((m_hi & 0xF) << 4));
  }
}

size_t q4_row_bytes(int64_t k) { return (size_t)(k / q::kQK_K) * sizeof(q::block_q4_K); }

void q4_repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst) {
  const int64_t nsb = k / q::kQK_K;
  for (int64_t r0 = 0; r0 < n; r0 += kX16Rows) {
    for (int64_t sb = 0; sb < nsb; ++sb, dst += kQ4GroupBlock) {
      uint8_t planes[4][64];
      for (int r = 0; r < kX16Rows; ++r) {
        const uint8_t* b = src + (size_t)(r0 + r) * src_stride + (size_t)sb * sizeof(q::block_q4_K);
        std::memcpy(dst + 2 * r, b + offsetof(q::block_q4_K, d), 2);
        std::memcpy(dst + 32 + 2 * r, b + offsetof(q::block_q4_K, dmin), 2);
        uint8_t v[16];
        k4_values(b + offsetof(q::block_q4_K, scales), v);
        for (int t = 0; t < 4; ++t) {
          for (int u = 0; u < 4; ++u) planes[t][plane_byte(r, u)] = v[4 * t + u];
        }
        const uint8_t* qs = b + offsetof(q::block_q4_K, qs);
        for (int ch = 0; ch < 32; ++ch) std::memcpy(dst + kQ4Qs + 64 * (size_t)ch + 4 * (size_t)r, qs + 4 * ch, 4);
      }
      for (int t = 0; t < 3; ++t) {
        for (int i = 0; i < 64; ++i) {
          dst[kQ4Scales + 64 * (size_t)t + (size_t)i] = (uint8_t)(planes[t][i] | (((planes[3][i] >> (2 * t)) & 3) << 6));
        }
      }
    }
  }
}

void q4_unpack(const uint8_t* group, int rr, int64_t sb, uint8_t* out) {
  const uint8_t* gb = group + (size_t)sb * kQ4GroupBlock;
  std::memcpy(out + offsetof(q::block_q4_K, d), gb + 2 * rr, 2);
  std::memcpy(out + offsetof(q::block_q4_K, dmin), gb + 32 + 2 * rr, 2);
  uint8_t v[16];
  for (int u = 0; u < 4; ++u) {
    uint8_t top = 0;
    for (int t = 0; t < 3; ++t) {
      const uint8_t x = gb[kQ4Scales + 64 * (size_t)t + plane_byte(rr, u)];
      v[4 * t + u] = x & 63;
      top = (uint8_t)(top | ((x >> 6) << (2 * t)));
    }
    v[12 + u] = top;
  }
  k4_bytes(v, out + offsetof(q::block_q4_K, scales));
  uint8_t* qs = out + offsetof(q::block_q4_K, qs);
  for (int ch = 0; ch < 32; ++ch) std::memcpy(qs + 4 * ch, gb + kQ4Qs + 64 * (size_t)ch + 4 * (size_t)rr, 4);
}

constexpr KqX16Layout kQ4Layout{sizeof(q::block_q4_K), q4_unpack};

}  // namespace

const KqX16Layout* kq_x16_layout(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_K: return &kQ4Layout;
    default: return nullptr;
  }
}

void kq_x16_set_repack(GgmlType type, GemmFn packed, MatmulKernel& k) {
  if (!packed) return;
  switch (type) {
    case GgmlType::Q4_K:
      k.repack_rows = kX16Rows;
      k.repack_row_bytes = q4_row_bytes;
      k.repack = q4_repack;
      k.gemm_packed = packed;
      break;
    default: break;
  }
}

}  // namespace chimera::kernels
