// Internal to the K-quant matmul kernels (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K weights
// x Q8_K activations): the decoded super-block form shared by every ISA, the
// scalar decoders, and the panel driver.
//
// Every kernel first decodes a panel of R weight rows (all super-blocks of k)
// into KqDecoded: 256 unsigned levels q (0..63, natural element order), 16
// int16 scales sc (one per 16 elements; Q4_K/Q5_K's per-32 scales duplicated)
// and 16 int16 mins bc (Q2_K/Q4_K/Q5_K; Q4_K/Q5_K duplicated), plus the f32
// super-block scales d, dmin. A weight is w_e = d * sc_g * (q_e - offset) -
// dmin * bc_g (offset 4 for Q3_K, 32 for Q6_K, else 0; no min for Q3_K/Q6_K).
// Each decoded panel is reused by every activation tile of the call, so
// prefill decodes each weight once.
//
// Accumulation — exactly llama.cpp's AVX2 ggml_vec_dot_*_q8_K (the build the
// golden references come from), identical bits on every ISA here: per output
// 8 f32 lanes; lane l of super-block b gets the exact int32
//   S_l = sum over elements e with (e mod 32) / 4 == l of sc_g(e) * (q_e - offset) * a_e
// as acc_l = fma(dy * d, (float)S_l, acc_l), and y = ((acc0+acc4) + (acc2+acc6))
// + ((acc1+acc5) + (acc3+acc7)). Mins, with B_l = bc_2l * bsum_2l + bc_2l+1 *
// bsum_2l+1 and dm = -dy * dmin: Q2_K first acc_l = fma(dm, B_l, acc_l); Q4_K
// 4 lanes m_k = fma(dm, B_2k + B_2k+1, m_k), y += (m0+m2) + (m1+m3); Q5_K
// summs = fma(dm, sum B, summs), y += summs. (Matching the float order, not
// just the value, matters: the next layer's Q8_K rounding amplifies 1-ulp
// differences into visible logit changes.)
// Tolerance vs the f64 dot of dequantized operands:
//   (k/256 + 8) * 2^-23 * sum_e (|w_e| + |w0_e|) * |a_e|,  w0 = weight with q = 0.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "kernels/matmul_kquant_x16.h"
#include "kernels/type_traits.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {

struct alignas(64) KqDecoded {
  uint8_t q[256];
  int16_t sc[16];
  int16_t bc[16];
};
static_assert(sizeof(KqDecoded) == 320);

// Decodes one weight super-block (storage layout) into *out and writes its
// f32 scales dd[0] = d, dd[1] = dmin (0 for folded types).
using KqDecodeFn = void (*)(const uint8_t* blk, KqDecoded* out, float* dd);

// How a type's mins enter the f32 accumulation (see above).
enum class KqMin : uint8_t { kNone, kLanes8, kLanes4, kSum };

struct KqTypeInfo {
  size_t block_bytes = 0;
  KqMin min = KqMin::kNone;
  int offset = 0;               // subtracted from each level (Q3_K 4, Q6_K 32)
  KqDecodeFn decode = nullptr;  // scalar decoder
};
// Null for non-K-quant types.
const KqTypeInfo* kq_type_info(format::GgmlType type);

// Activation packing shared by every ISA: ggml block_q8_K layout.
size_t kq_act_bytes(int64_t k);
void kq_pack_act(const float* x, int64_t k, void* out);
// The same bytes from AVX2 code (q8k_pack_avx2.cpp; x86-64 only): the packer of
// the AVX2 and AVX-512 K-quant, IQ4_XS and TQ1_0 kernels.
void kq_pack_act_avx2(const float* x, int64_t k, void* out);

// Per-ISA providers (empty kernel for non-K-quant types / other architectures).
MatmulKernel kquant_kernel_scalar(format::GgmlType type);
MatmulKernel kquant_kernel_avx2(format::GgmlType type);
// The AVX2 kernel with the AVX-VNNI x16 GEMM (Q4_K; empty otherwise).
MatmulKernel kquant_kernel_avx2vnni(format::GgmlType type);
MatmulKernel kquant_kernel_avx512(format::GgmlType type);
MatmulKernel kquant_kernel_avx512vnni(format::GgmlType type);
// AMX: the types with an AMX x16 GEMM (Q4_K), else empty; the AVX-512 VNNI
// kernel with that GEMM as gemm_packed (the same x16 layout, layout_name).
MatmulKernel kquant_kernel_amx(format::GgmlType type);
// The fastest decoder the AVX2 unit has for `type` (SIMD for Q4_K/Q5_K/Q6_K,
// else the scalar one); bit-identical output to the scalar decoder. Also used
// by the AVX-512 kernels. Null for non-K-quant types / other architectures.
KqDecodeFn kq_decode_avx2(format::GgmlType type);

// Load-time repacked layout (matmul_kquant_repack.cpp), offered by the AVX2
// and AVX-512 kernels: rows in groups of kKqGroup, and within a group the
// super-blocks interleaved — block sb of rows 4g, 4g+1, 4g+2, 4g+3, then
// block sb+1 ... — each block byte-identical to its GGUF form. A group is one
// contiguous stream (the GEMV prefetches a fixed distance ahead in it instead
// of one stream per row) and the whole tensor is one stream across groups.
// Same bytes as storage (repack_row_bytes(k) == row bytes), same arithmetic:
// gemm_packed is bit-identical to gemm of the same ISA.
constexpr int kKqGroup = 4;
// Fills repack_rows / repack_row_bytes / repack of a K-quant kernel and sets
// gemm_packed = packed.
void kq_set_repack(format::GgmlType type, GemmFn packed, MatmulKernel& k);

namespace detail {

// Thread-local decoded-panel scratch (grows, never shrinks: steady-state calls
// do not allocate).
struct KqPanel {
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> mem;
  size_t cap = 0;
  KqDecoded* dec = nullptr;
  float* dd = nullptr;
  void reserve(int64_t rows, int64_t nsb) {
    const size_t dec_bytes = (size_t)(rows * nsb) * sizeof(KqDecoded);
    const size_t bytes = dec_bytes + (size_t)(rows * nsb) * 2 * sizeof(float) + 64;
    if (bytes > cap) {
      const size_t n = (std::max(bytes, cap * 2) + 63) / 64 * 64;
      void* p = std::aligned_alloc(64, n);
      if (!p) throw std::bad_alloc();
      mem.reset(static_cast<uint8_t*>(p));
      cap = n;
    }
    dec = reinterpret_cast<KqDecoded*>(mem.get());
    dd = reinterpret_cast<float*>(mem.get() + dec_bytes);
  }
};

inline KqPanel& kq_panel() {
  thread_local KqPanel p;
  return p;
}

// Final reduction of one output's lanes (fixed order, see above).
inline float kq_finish(const float* acc8, const float* accm4, float summs, KqMin min) {
  float y = ((acc8[0] + acc8[4]) + (acc8[2] + acc8[6])) + ((acc8[1] + acc8[5]) + (acc8[3] + acc8[7]));
  if (min == KqMin::kLanes4) y = y + ((accm4[0] + accm4[2]) + (accm4[1] + accm4[3]));
  else if (min == KqMin::kSum) y = y + summs;
  return y;
}

// Tile function: R weight rows (decoded panel dec[rr * nsb + sb]) x M
// activation rows starting at act row i; writes y.
using KqTileFn = void (*)(const KqDecoded* dec, const float* dd, int64_t nsb, const KqTypeInfo& t,
                          const GemmArgs& g, int64_t r, int64_t i);

template <int kMaxRows, int kMaxActs>
struct KqTiles {
  KqTileFn fn[kMaxRows][kMaxActs];
  int rows_for[kMaxActs + 1];
};

// Weight layouts: storage, the kKqGroup-row interleaved repacking (above),
// the x16 one (matmul_kquant_x16.h; own kernels, not the panel driver).
enum class KqLayout : uint8_t { kStorage, kGroup4, kX16 };

// Address of weight super-block sb of row `row` in the storage or kGroup4
// layout.
template <KqLayout L>
inline const uint8_t* kq_block(const GemmArgs& g, int64_t row, int64_t sb, size_t block_bytes) {
  if constexpr (L == KqLayout::kGroup4) {
    return g.w + (size_t)(row & ~(int64_t)(kKqGroup - 1)) * g.w_stride +
           ((size_t)sb * kKqGroup + (size_t)(row & (kKqGroup - 1))) * block_bytes;
  } else {
    return g.w + (size_t)row * g.w_stride + (size_t)sb * block_bytes;
  }
}

// Panel driver: decodes rows [r, r+rr) once per activation block and runs the
// tiles over the block's activations. Results do not depend on the blocking.
// L is kStorage or kGroup4 (the x16 layout has kernels of its own).
template <int kMaxRows, int kMaxActs, KqLayout L = KqLayout::kStorage>
void kq_gemm(const KqTiles<kMaxRows, kMaxActs>& ts, const KqTypeInfo& t, KqDecodeFn decode, const GemmArgs& g,
             int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static_assert(L != KqLayout::kX16);
  const size_t block_bytes = t.block_bytes;
  const int64_t nsb = g.k / quant::kQK_K;
  KqPanel& p = kq_panel();
  p.reserve(kMaxRows, nsb);
  // Activation rows per block: keep the packed activations L2-resident.
  const int64_t ib_rows = std::max<int64_t>(1, (int64_t)(256 * 1024 / std::max<size_t>(g.a_stride, 1)) / kMaxActs) *
                          kMaxActs;
  for (int64_t ib = i0; ib < i1; ib += ib_rows) {
    const int64_t ie = std::min(i1, ib + ib_rows);
    const int rows = ts.rows_for[(int)std::min<int64_t>(kMaxActs, ie - ib)];
    for (int64_t r = r0; r < r1; r += rows) {
      const int rr = (int)std::min<int64_t>(rows, r1 - r);
      for (int k = 0; k < rr; ++k) {
        // Decode streams weights from DRAM (GEMV): prefetch the next panel's
        // row into L2 (read, moderate locality = T1).
        for (int64_t sb = 0; sb < nsb; ++sb) {
          const uint8_t* pf = kq_block<L>(g, r + k + rows, sb, block_bytes);
          for (size_t o = 0; o < block_bytes; o += 64) __builtin_prefetch(pf + o, 0, 2);
          decode(kq_block<L>(g, r + k, sb, block_bytes), &p.dec[k * nsb + sb], &p.dd[(k * nsb + sb) * 2]);
        }
      }
      for (int64_t i = ib; i < ie; i += kMaxActs) {
        const int mm = (int)std::min<int64_t>(kMaxActs, ie - i);
        ts.fn[rr - 1][mm - 1](p.dec, p.dd, nsb, t, g, r, i);
      }
    }
  }
}

}  // namespace detail
}  // namespace chimera::kernels
