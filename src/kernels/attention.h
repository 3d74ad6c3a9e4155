// Scaled dot-product attention over a float32 or float16 KV cache, with
// grouped KV heads.
//
// Layout: q has n_q rows of n_head*head_dim floats (row stride ldq); the cache
// holds n_kv key rows and value rows of n_head_kv*head_dim floats (strides ldk,
// ldv); key row j is the token at absolute position j. Query row i sits at
// absolute position q_pos0 + i. Head h reads KV head h / (n_head / n_head_kv).
//   causal:      query at position p sees keys 0..p (and < n_kv)
//   window > 0:  additionally only keys p-window+1..p
//   non-causal:  all n_kv keys (diffusion LMs)
// K and V rows may each be f32, IEEE binary16 or Q8_0 blocks (KvRows): every
// element is widened exactly (Q8_0: f16 scale x int8, exact in f32), so the
// result equals the f32 kernel on the decoded rows. Q8_0 needs head_dim % 32
// == 0 (a head never splits a block).
// out has n_q rows of n_head*head_dim (stride ldo). Softmax in float32 with max
// subtraction; work is split over (query, head) pairs, each computed by one
// thread in a fixed order, so results do not depend on the thread count.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace chimera::kernels {

struct AttentionParams {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  float scale = 1.f;     // usually 1/sqrt(head_dim)
  bool causal = true;
  int64_t window = 0;    // 0 = unlimited
  float softcap = 0.f;   // 0 = none; else scores = softcap * tanh(scores / softcap)
};

// Element type of stored K / V rows.
enum class KvType : uint8_t { kF32, kF16, kQ8_0 };
// Bytes of a row of n elements (n % 32 == 0 for Q8_0: 34 bytes per 32).
inline size_t kv_row_bytes(KvType t, int64_t n) {
  return t == KvType::kQ8_0 ? (size_t)(n / 32) * 34 : (size_t)n * (t == KvType::kF16 ? 2 : 4);
}
const char* kv_type_name(KvType t);  // "f32", "f16", "q8_0"
// Stores n rows of `width` floats (source stride ld) as rows of `type`, one
// after the other from dst (kv_row_bytes(type, width) each): f32 copied, f16
// rounded to nearest even, Q8_0 as quant::quantize_row_q8_0.
void kv_store_rows(KvType type, int64_t width, const float* src, int64_t ld, int64_t n, uint8_t* dst);

// Rows of a KV store, ld elements apart (Q8_0: ld % 32 == 0, row r of a run
// at kv_row_bytes(type, r * ld) bytes). Contiguous (blocks == nullptr): row j
// at data. Paged (blocks != nullptr, data unused): row j is row
// j % block_rows of blocks[j / block_rows]; block_rows is a power of two.
// The result does not depend on the layout (the same rows give the same bits
// contiguous or paged, for any block size).
struct KvRows {
  const void* data = nullptr;
  int64_t ld = 0;
  KvType type = KvType::kF32;
  const void* const* blocks = nullptr;
  int64_t block_rows = 0;
};

void attention(const AttentionParams& p, const float* q, int64_t n_q, int64_t ldq, int64_t q_pos0, KvRows k,
               KvRows v, int64_t n_kv, float* out, int64_t ldo, ThreadPool* pool);

inline void attention(const AttentionParams& p, const float* q, int64_t n_q, int64_t ldq, int64_t q_pos0,
                      const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t n_kv, float* out,
                      int64_t ldo, ThreadPool* pool) {
  attention(p, q, n_q, ldq, q_pos0, KvRows{k, ldk, KvType::kF32}, KvRows{v, ldv, KvType::kF32}, n_kv, out, ldo,
            pool);
}

}  // namespace chimera::kernels
