// Load-time repacking of K-quant weights (layout: matmul_kquant.h, kKqGroup):
// a pure permutation of whole super-blocks, so every ISA's decoder reads the
// packed blocks unchanged and gemm_packed is bit-identical to gemm.
#include <cstring>

#include "kernels/matmul_kquant.h"

namespace chimera::kernels {
namespace {

template <size_t kBlockBytes>
size_t kq_packed_row_bytes(int64_t k) {
  return (size_t)(k / quant::kQK_K) * kBlockBytes;
}

template <size_t kBlockBytes>
void kq_repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst) {
  const int64_t nsb = k / quant::kQK_K;
  for (int64_t r0 = 0; r0 < n; r0 += kKqGroup) {
    for (int64_t sb = 0; sb < nsb; ++sb) {
      for (int rr = 0; rr < kKqGroup; ++rr) {
        std::memcpy(dst, src + (size_t)(r0 + rr) * src_stride + (size_t)sb * kBlockBytes, kBlockBytes);
        dst += kBlockBytes;
      }
    }
  }
}

template <size_t kBlockBytes>
void set(GemmFn packed, MatmulKernel& k) {
  k.repack_rows = kKqGroup;
  k.repack_row_bytes = kq_packed_row_bytes<kBlockBytes>;
  k.repack = kq_repack<kBlockBytes>;
  k.gemm_packed = packed;
}

}  // namespace

void kq_set_repack(format::GgmlType type, GemmFn packed, MatmulKernel& k) {
  const KqTypeInfo* t = kq_type_info(type);
  if (!t || !packed) return;
  switch (t->block_bytes) {
    case sizeof(quant::block_q2_K): set<sizeof(quant::block_q2_K)>(packed, k); break;
    case sizeof(quant::block_q3_K): set<sizeof(quant::block_q3_K)>(packed, k); break;
    case sizeof(quant::block_q4_K): set<sizeof(quant::block_q4_K)>(packed, k); break;
    case sizeof(quant::block_q5_K): set<sizeof(quant::block_q5_K)>(packed, k); break;
    case sizeof(quant::block_q6_K): set<sizeof(quant::block_q6_K)>(packed, k); break;
    default: break;
  }
}

}  // namespace chimera::kernels
