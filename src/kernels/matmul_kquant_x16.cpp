// The x16 K-quant layout (matmul_kquant_x16.h): load-time repacking from the
// GGUF storage layout and the inverse (one row's super-block back in storage
// form: the layout's definition, checked by round-trip tests). Both are byte
// permutations plus lossless bit re-arrangements (Q4_K / Q5_K's 6-bit
// scales, Q6_K's 6-bit levels, Q3_K's 3-bit levels); Q2_K and IQ4_XS are
// byte permutations only.
#include "kernels/matmul_kquant_x16.h"

#include <cstring>

#include "quant/iq4xs_blocks.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {

namespace {

using format::GgmlType;
namespace q = chimera::quant;

// Q4_K / Q5_K group blocks (Block = q::block_q4_K or q::block_q5_K): d,
// dmin, the scale planes, Q5_K's qh chunks, the qs chunks (see the header).
template <class Block>
struct K45 {
  static constexpr bool kQ5 = sizeof(Block) == sizeof(q::block_q5_K);
  static constexpr size_t kGroupBlock = kX16Rows * sizeof(Block);  // 2304 / 2816
  static constexpr size_t kScales = 64, kQh = 256, kQs = kQ5 ? 768 : 256;
};

// Byte of plane t holding value 4t + u of row r (see the header).
constexpr size_t plane_byte(int r, int u) { return 16 * (size_t)(r / 4) + 4 * (size_t)(r % 4) + (size_t)u; }

// The 16 six-bit values of a Q4_K / Q5_K row's scale bytes: sc0..7, m0..7.
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

template <class Block>
size_t k45_row_bytes(int64_t k) {
  return (size_t)(k / q::kQK_K) * sizeof(Block);
}

// Scatters a byte array of a row (n_chunks x 4 bytes) into chunks of 16 rows.
void to_chunks(const uint8_t* row_bytes, int n_chunks, int r, uint8_t* chunks) {
  for (int ch = 0; ch < n_chunks; ++ch) std::memcpy(chunks + 64 * (size_t)ch + 4 * (size_t)r, row_bytes + 4 * ch, 4);
}
void from_chunks(const uint8_t* chunks, int n_chunks, int r, uint8_t* row_bytes) {
  for (int ch = 0; ch < n_chunks; ++ch) std::memcpy(row_bytes + 4 * ch, chunks + 64 * (size_t)ch + 4 * (size_t)r, 4);
}

template <class Block>
void k45_repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst) {
  using L = K45<Block>;
  const int64_t nsb = k / q::kQK_K;
  for (int64_t r0 = 0; r0 < n; r0 += kX16Rows) {
    for (int64_t sb = 0; sb < nsb; ++sb, dst += L::kGroupBlock) {
      uint8_t planes[4][64];
      for (int r = 0; r < kX16Rows; ++r) {
        const uint8_t* b = src + (size_t)(r0 + r) * src_stride + (size_t)sb * sizeof(Block);
        std::memcpy(dst + 2 * r, b + offsetof(Block, d), 2);
        std::memcpy(dst + 32 + 2 * r, b + offsetof(Block, dmin), 2);
        uint8_t v[16];
        k4_values(b + offsetof(Block, scales), v);
        for (int t = 0; t < 4; ++t) {
          for (int u = 0; u < 4; ++u) planes[t][plane_byte(r, u)] = v[4 * t + u];
        }
        if constexpr (L::kQ5) to_chunks(b + offsetof(q::block_q5_K, qh), 8, r, dst + L::kQh);
        to_chunks(b + offsetof(Block, qs), 32, r, dst + L::kQs);
      }
      for (int t = 0; t < 3; ++t) {
        for (int i = 0; i < 64; ++i) {
          dst[L::kScales + 64 * (size_t)t + (size_t)i] =
              (uint8_t)(planes[t][i] | (((planes[3][i] >> (2 * t)) & 3) << 6));
        }
      }
    }
  }
}

template <class Block>
void k45_unpack(const uint8_t* group, int rr, int64_t sb, uint8_t* out) {
  using L = K45<Block>;
  const uint8_t* gb = group + (size_t)sb * L::kGroupBlock;
  std::memcpy(out + offsetof(Block, d), gb + 2 * rr, 2);
  std::memcpy(out + offsetof(Block, dmin), gb + 32 + 2 * rr, 2);
  uint8_t v[16];
  for (int u = 0; u < 4; ++u) {
    uint8_t top = 0;
    for (int t = 0; t < 3; ++t) {
      const uint8_t x = gb[L::kScales + 64 * (size_t)t + plane_byte(rr, u)];
      v[4 * t + u] = x & 63;
      top = (uint8_t)(top | ((x >> 6) << (2 * t)));
    }
    v[12 + u] = top;
  }
  k4_bytes(v, out + offsetof(Block, scales));
  if constexpr (L::kQ5) from_chunks(gb + L::kQh, 8, rr, out + offsetof(q::block_q5_K, qh));
  from_chunks(gb + L::kQs, 32, rr, out + offsetof(Block, qs));
}

constexpr KqX16Layout kQ4Layout{sizeof(q::block_q4_K), k45_unpack<q::block_q4_K>};
constexpr KqX16Layout kQ5Layout{sizeof(q::block_q5_K), k45_unpack<q::block_q5_K>};

// ---------------------------------------------------------------- Q6_K
constexpr size_t kQ6GroupBlock = kX16Rows * sizeof(q::block_q6_K);  // 3360
constexpr size_t kQ6D = 0, kQ6Scales = 32, kQ6Levels = 288;

size_t q6_row_bytes(int64_t k) { return (size_t)(k / q::kQK_K) * sizeof(q::block_q6_K); }

// The 256 six-bit levels of a storage block (decode_q6_K's element order).
void q6_levels(const uint8_t* blk, uint8_t lv[256]) {
  const uint8_t* ql = blk + offsetof(q::block_q6_K, ql);
  const uint8_t* qh = blk + offsetof(q::block_q6_K, qh);
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t a = ql[64 * h + l], b = ql[64 * h + 32 + l], c = qh[32 * h + l];
      lv[128 * h + l] = (uint8_t)((a & 0xF) | ((c & 3) << 4));
      lv[128 * h + 32 + l] = (uint8_t)((b & 0xF) | (((c >> 2) & 3) << 4));
      lv[128 * h + 64 + l] = (uint8_t)((a >> 4) | (((c >> 4) & 3) << 4));
      lv[128 * h + 96 + l] = (uint8_t)((b >> 4) | (((c >> 6) & 3) << 4));
    }
  }
}

// Inverse of q6_levels: the storage ql / qh bytes of 256 six-bit levels.
void q6_store_levels(const uint8_t lv[256], uint8_t* blk) {
  uint8_t* ql = blk + offsetof(q::block_q6_K, ql);
  uint8_t* qh = blk + offsetof(q::block_q6_K, qh);
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* e = lv + 128 * h + l;  // quarters t at e[32t]
      ql[64 * h + l] = (uint8_t)((e[0] & 0xF) | (e[64] & 0xF) << 4);
      ql[64 * h + 32 + l] = (uint8_t)((e[32] & 0xF) | (e[96] & 0xF) << 4);
      qh[32 * h + l] = (uint8_t)((e[0] >> 4) | (e[32] >> 4) << 2 | (e[64] >> 4) << 4 | (e[96] >> 4) << 6);
    }
  }
}

// Offset in a group block of byte u of row r in level chunk X_c (c = 0..2)
// of scale group g (see the header).
constexpr size_t q6_level_byte(int r, int g, int c, int u) {
  return kQ6Levels + 64 * (size_t)(3 * g + c) + 4 * (size_t)r + (size_t)u;
}

void q6_repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst) {
  const int64_t nsb = k / q::kQK_K;
  for (int64_t r0 = 0; r0 < n; r0 += kX16Rows) {
    for (int64_t sb = 0; sb < nsb; ++sb, dst += kQ6GroupBlock) {
      for (int r = 0; r < kX16Rows; ++r) {
        const uint8_t* b = src + (size_t)(r0 + r) * src_stride + (size_t)sb * sizeof(q::block_q6_K);
        std::memcpy(dst + kQ6D + 2 * r, b + offsetof(q::block_q6_K, d), 2);
        const uint8_t* sc = b + offsetof(q::block_q6_K, scales);
        for (int g = 0; g < 16; ++g) dst[kQ6Scales + 64 * (size_t)(g / 4) + plane_byte(r, g % 4)] = sc[g];
        uint8_t lv[256];
        q6_levels(b, lv);
        for (int g = 0; g < 16; ++g) {
          for (int u = 0; u < 4; ++u) {
            const uint8_t* e = lv + 16 * g + u;  // dword c of the group at e[4c]
            for (int c = 0; c < 3; ++c) {
              dst[q6_level_byte(r, g, c, u)] = (uint8_t)(e[4 * c] | ((e[12] >> (2 * c)) & 3) << 6);
            }
          }
        }
      }
    }
  }
}

void q6_unpack(const uint8_t* group, int rr, int64_t sb, uint8_t* out) {
  const uint8_t* gb = group + (size_t)sb * kQ6GroupBlock;
  std::memcpy(out + offsetof(q::block_q6_K, d), gb + kQ6D + 2 * rr, 2);
  for (int k = 0; k < 4; ++k) {
    std::memcpy(out + offsetof(q::block_q6_K, scales) + 4 * k, gb + kQ6Scales + 64 * (size_t)k + plane_byte(rr, 0), 4);
  }
  uint8_t lv[256];
  for (int g = 0; g < 16; ++g) {
    for (int u = 0; u < 4; ++u) {
      uint8_t top = 0;
      for (int c = 0; c < 3; ++c) {
        const uint8_t x = gb[q6_level_byte(rr, g, c, u)];
        lv[16 * g + 4 * c + u] = x & 63;
        top = (uint8_t)(top | (x >> 6) << (2 * c));
      }
      lv[16 * g + 12 + u] = top;
    }
  }
  q6_store_levels(lv, out);
}

constexpr KqX16Layout kQ6Layout{sizeof(q::block_q6_K), q6_unpack};

// ---------------------------------------------------------------- Q2_K, Q3_K
// Group blocks made of the storage fields as they are: f16 fields as arrays
// of 16 (row r at 2r), byte fields in 64-byte chunks of the same 4 bytes of
// every row (to_chunks). Geometry in the header.
struct ChunkedType {
  size_t block_bytes;
  int n_f16;
  size_t f16_src[2], f16_dst[2];
  int n_fields;
  size_t src[3], dst[3];  // byte field offsets: storage block, group block
  int chunks[3];          // 4-byte chunks of each field
};
constexpr ChunkedType kQ2Chunked{sizeof(q::block_q2_K),
                                 2,
                                 {offsetof(q::block_q2_K, d), offsetof(q::block_q2_K, dmin)},
                                 {0, 32},
                                 2,
                                 {offsetof(q::block_q2_K, scales), offsetof(q::block_q2_K, qs), 0},
                                 {64, 320, 0},
                                 {4, 16, 0}};
// Q3_K: d and the scale chunks here, the levels by q3_repack / q3_unpack.
constexpr ChunkedType kQ3Chunked{sizeof(q::block_q3_K),       1, {offsetof(q::block_q3_K, d), 0}, {0, 0}, 1,
                                 {offsetof(q::block_q3_K, scales), 0, 0}, {32, 0, 0}, {3, 0, 0}};

template <const ChunkedType& T>
size_t chunked_row_bytes(int64_t k) {
  return (size_t)(k / q::kQK_K) * T.block_bytes;
}

template <const ChunkedType& T>
void chunked_repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst) {
  const int64_t nsb = k / q::kQK_K;
  for (int64_t r0 = 0; r0 < n; r0 += kX16Rows) {
    for (int64_t sb = 0; sb < nsb; ++sb, dst += kX16Rows * T.block_bytes) {
      for (int r = 0; r < kX16Rows; ++r) {
        const uint8_t* b = src + (size_t)(r0 + r) * src_stride + (size_t)sb * T.block_bytes;
        for (int f = 0; f < T.n_f16; ++f) std::memcpy(dst + T.f16_dst[f] + 2 * (size_t)r, b + T.f16_src[f], 2);
        for (int f = 0; f < T.n_fields; ++f) to_chunks(b + T.src[f], T.chunks[f], r, dst + T.dst[f]);
      }
    }
  }
}

template <const ChunkedType& T>
void chunked_unpack(const uint8_t* group, int rr, int64_t sb, uint8_t* out) {
  const uint8_t* gb = group + (size_t)sb * kX16Rows * T.block_bytes;
  for (int f = 0; f < T.n_f16; ++f) std::memcpy(out + T.f16_src[f], gb + T.f16_dst[f] + 2 * (size_t)rr, 2);
  for (int f = 0; f < T.n_fields; ++f) from_chunks(gb + T.dst[f], T.chunks[f], rr, out + T.src[f]);
}

// Q3_K level chunks (header): byte 4r + u of chunk 3l + t is X_t of row r at
// element position 4l + u, from the levels q_k of quarters k = 0..7.
constexpr size_t kQ3Levels = 224;

// The 256 three-bit levels of a storage block (decode_q3_K's element order).
void q3_levels(const uint8_t* blk, uint8_t lv[256]) {
  const uint8_t* hm = blk + offsetof(q::block_q3_K, hmask);
  const uint8_t* qs = blk + offsetof(q::block_q3_K, qs);
  for (int k = 0; k < 8; ++k) {
    for (int p = 0; p < 32; ++p) {
      lv[32 * k + p] = (uint8_t)(((qs[32 * (k / 4) + p] >> (2 * (k % 4))) & 3) | (((hm[p] >> k) & 1) << 2));
    }
  }
}

void q3_repack(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst) {
  chunked_repack<kQ3Chunked>(src, src_stride, n, k, dst);
  const int64_t nsb = k / q::kQK_K;
  for (int64_t r0 = 0; r0 < n; r0 += kX16Rows) {
    for (int64_t sb = 0; sb < nsb; ++sb, dst += kX16Rows * sizeof(q::block_q3_K)) {
      for (int r = 0; r < kX16Rows; ++r) {
        uint8_t lv[256];
        q3_levels(src + (size_t)(r0 + r) * src_stride + (size_t)sb * sizeof(q::block_q3_K), lv);
        for (int p = 0; p < 32; ++p) {  // element position 4l + u
          const uint8_t* q3 = lv + p;     // quarter k at q3[32k]
          uint8_t* x = dst + kQ3Levels + 64 * 3 * (size_t)(p / 4) + 4 * (size_t)r + (size_t)(p % 4);
          x[0] = (uint8_t)(q3[0] | q3[32] << 3 | (q3[192] & 3) << 6);
          x[64] = (uint8_t)(q3[64] | q3[96] << 3 | (q3[224] & 3) << 6);
          x[128] = (uint8_t)(q3[128] | q3[160] << 3 | (q3[192] >> 2) << 6 | (q3[224] >> 2) << 7);
        }
      }
    }
  }
}

void q3_unpack(const uint8_t* group, int rr, int64_t sb, uint8_t* out) {
  chunked_unpack<kQ3Chunked>(group, rr, sb, out);
  const uint8_t* gb = group + (size_t)sb * kX16Rows * sizeof(q::block_q3_K);
  uint8_t* hm = out + offsetof(q::block_q3_K, hmask);
  uint8_t* qs = out + offsetof(q::block_q3_K, qs);
  std::memset(hm, 0, 32);
  std::memset(qs, 0, 64);
  for (int p = 0; p < 32; ++p) {
    const uint8_t* x = gb + kQ3Levels + 64 * 3 * (size_t)(p / 4) + 4 * (size_t)rr + (size_t)(p % 4);
    const int X0 = x[0], X1 = x[64], X2 = x[128];
    const int lv[8] = {X0 & 7,         X0 >> 3 & 7,     X1 & 7, X1 >> 3 & 7, X2 & 7, X2 >> 3 & 7,
                       (X0 >> 6) | (X2 >> 6 & 1) << 2, (X1 >> 6) | (X2 >> 7) << 2};
    for (int k = 0; k < 8; ++k) {
      qs[32 * (k / 4) + p] = (uint8_t)(qs[32 * (k / 4) + p] | (lv[k] & 3) << (2 * (k % 4)));
      hm[p] = (uint8_t)(hm[p] | (lv[k] >> 2) << k);
    }
  }
}

// IQ4_XS: d and scales_h as 16-row arrays, scales_l and qs as chunks (header).
constexpr ChunkedType kIq4xsChunked{sizeof(q::block_iq4_xs),
                                    2,
                                    {offsetof(q::block_iq4_xs, d), offsetof(q::block_iq4_xs, scales_h)},
                                    {0, 32},
                                    2,
                                    {offsetof(q::block_iq4_xs, scales_l), offsetof(q::block_iq4_xs, qs), 0},
                                    {64, 128, 0},
                                    {1, 32, 0}};

constexpr KqX16Layout kQ2Layout{sizeof(q::block_q2_K), chunked_unpack<kQ2Chunked>};
constexpr KqX16Layout kQ3Layout{sizeof(q::block_q3_K), q3_unpack};
constexpr KqX16Layout kIq4xsLayout{sizeof(q::block_iq4_xs), chunked_unpack<kIq4xsChunked>};

}  // namespace

const KqX16Layout* kq_x16_layout(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_K: return &kQ4Layout;
    case GgmlType::Q5_K: return &kQ5Layout;
    case GgmlType::Q6_K: return &kQ6Layout;
    case GgmlType::Q2_K: return &kQ2Layout;
    case GgmlType::Q3_K: return &kQ3Layout;
    case GgmlType::IQ4_XS: return &kIq4xsLayout;
    default: return nullptr;
  }
}

void kq_x16_set_repack(GgmlType type, GemmFn packed, MatmulKernel& k) {
  if (!packed) return;
  switch (type) {
    case GgmlType::Q4_K:
      k.repack_row_bytes = k45_row_bytes<q::block_q4_K>;
      k.repack = k45_repack<q::block_q4_K>;
      break;
    case GgmlType::Q5_K:
      k.repack_row_bytes = k45_row_bytes<q::block_q5_K>;
      k.repack = k45_repack<q::block_q5_K>;
      break;
    case GgmlType::Q6_K:
      k.repack_row_bytes = q6_row_bytes;
      k.repack = q6_repack;
      break;
    case GgmlType::Q2_K:
      k.repack_row_bytes = chunked_row_bytes<kQ2Chunked>;
      k.repack = chunked_repack<kQ2Chunked>;
      break;
    case GgmlType::Q3_K:
      k.repack_row_bytes = chunked_row_bytes<kQ3Chunked>;
      k.repack = q3_repack;
      break;
    case GgmlType::IQ4_XS:
      k.repack_row_bytes = chunked_row_bytes<kIq4xsChunked>;
      k.repack = chunked_repack<kIq4xsChunked>;
      break;
    default: return;
  }
  k.repack_rows = kX16Rows;
  k.gemm_packed = packed;
}

}  // namespace chimera::kernels
