// Load-time repacking of TQ2_0 (and TQ1_0, re-encoded to 2 bits) weights into the grouped layout of
// matmul_ternary.h (kTqGroup rows interleaved per 256-element block, scales
// gathered per group). Scalar code: the layout is the same for every ISA that
// packs; only the byte order changes, the values are copied unchanged.
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "kernels/matmul_ternary.h"

namespace chimera::kernels {

namespace q = chimera::quant;

bool tq1_as_2bit() {
  const char* e = std::getenv("CHIMERA_TQ1_2BIT");
  return !(e && e[0] == '0');
}

size_t tq_packed_scale_bytes(int64_t k) {
  const size_t raw = (size_t)kTqGroup * (size_t)(k / q::kQK_K) * 2;
  return (raw + 63) / 64 * 64;
}

size_t tq_packed_row_bytes(int64_t k) {
  return (size_t)(k / q::kQK_K) * 64 + tq_packed_scale_bytes(k) / kTqGroup;
}

namespace {

// The packed groups, filled block by block: put(storage block, packed qs slot)
// writes the block's 64 code bytes in TQ2_0 order and returns its f16 d.
template <class PutBlock>
void repack_groups(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, size_t block_bytes, uint8_t* dst,
                   PutBlock put) {
  const int64_t nsb = k / q::kQK_K;
  const size_t sc_bytes = tq_packed_scale_bytes(k);
  const size_t group_bytes = (size_t)kTqGroup * tq_packed_row_bytes(k);
  for (int64_t g = 0; g < n / kTqGroup; ++g) {
    uint8_t* out = dst + (size_t)g * group_bytes;
    std::memset(out, 0, sc_bytes);
    auto* sc = reinterpret_cast<uint16_t*>(out);
    uint8_t* qs = out + sc_bytes;
    for (int j = 0; j < kTqGroup; ++j) {
      const uint8_t* row = src + (size_t)(g * kTqGroup + j) * src_stride;
      for (int64_t sb = 0; sb < nsb; ++sb)
        sc[sb * kTqGroup + j] = put(row + (size_t)sb * block_bytes, qs + (size_t)(sb * kTqGroup + j) * 64);
    }
  }
}

}  // namespace

void tq2_0_repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst) {
  repack_groups(src, src_stride, n, k, sizeof(q::block_tq2_0), dst, [](const uint8_t* blk, uint8_t* qs) {
    q::block_tq2_0 b;
    std::memcpy(&b, blk, sizeof(b));
    std::memcpy(qs, b.qs, 64);
    uint16_t d;
    std::memcpy(&d, &b.d, 2);
    return d;
  });
}

uint16_t tq1_0_to_tq2_qs(const uint8_t* blk, uint8_t* qs) {
  TqDecoded t;
  tq1_0_decode(blk, &t);
  // TQ2_0 qs order: element 128h + 32n + m -> byte 32h + m, bits 2n.
  for (int b = 0; b < 64; ++b) {
    const int h = b / 32, m = b % 32;
    uint8_t x = 0;
    for (int nn = 0; nn < 4; ++nn) x |= (uint8_t)(t.t[128 * h + 32 * nn + m] << (2 * nn));
    qs[b] = x;
  }
  uint16_t d;
  std::memcpy(&d, blk + offsetof(q::block_tq1_0, d), 2);
  return d;
}

void tq1_0_repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst) {
  repack_groups(src, src_stride, n, k, sizeof(q::block_tq1_0), dst, tq1_0_to_tq2_qs);
}

}  // namespace chimera::kernels
