// Activation packers of the SIMD ternary kernels (layouts: matmul_ternary.h).
// Each 256-element block is quantized with the llama.cpp-exact Q8_K quantizer
// (blocks are independent, so per-block calls give the row's bytes) and then
// permuted; the per-lane-class corrections come from the Q8_K block sums.
#include <cstring>

#include "kernels/matmul_ternary.h"

namespace chimera::kernels {
namespace {

namespace q = chimera::quant;

void corr_from_bsums(const q::block_q8_K& b, int32_t* corr) {
  for (int l = 0; l < 8; ++l) corr[l] = (int32_t)b.bsums[2 * l] + (int32_t)b.bsums[2 * l + 1];
}

}  // namespace

size_t tq_act8_bytes(int64_t k) { return (size_t)(k / q::kQK_K) * sizeof(TqAct8); }

void tq_pack_act8(const float* x, int64_t k, void* out) {
  auto* o = static_cast<TqAct8*>(out);
  for (int64_t b = 0; b < k / q::kQK_K; ++b) {
    q::block_q8_K y;
    q::quantize_row_q8_K(x + b * q::kQK_K, &y, q::kQK_K);
    TqAct8& a = o[b];
    // Chunk n = [32n..32n+31 | 128+32n..128+32n+31].
    for (int n = 0; n < 4; ++n) {
      std::memcpy(a.qs + 64 * n, y.qs + 32 * n, 32);
      std::memcpy(a.qs + 64 * n + 32, y.qs + 128 + 32 * n, 32);
    }
    corr_from_bsums(y, a.corr);
    a.d = y.d;
  }
}

size_t tq_act16_bytes(int64_t k) { return (size_t)(k / q::kQK_K) * sizeof(TqAct16); }

void tq_pack_act16(const float* x, int64_t k, void* out) {
  auto* o = static_cast<TqAct16*>(out);
  for (int64_t b = 0; b < k / q::kQK_K; ++b) {
    q::block_q8_K y;
    q::quantize_row_q8_K(x + b * q::kQK_K, &y, q::kQK_K);
    TqAct16& a = o[b];
    std::memset(a.qs, 0, sizeof(a.qs));
    // Elements 0..239 in place; 240..255 in the upper half of chunk 8.
    for (int e = 0; e < 240; ++e) a.qs[e] = y.qs[e];
    for (int e = 240; e < 256; ++e) a.qs[e + 32] = y.qs[e];
    corr_from_bsums(y, a.corr);
    a.d = y.d;
  }
}

}  // namespace chimera::kernels
