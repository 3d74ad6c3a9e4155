// Tests kernels::attention against the naive reference (ref/attention_ref.h) on
// every ISA (f16 / Q8_0 K/V rows: bit-identical to the f32 kernel on the
// decoded rows; paged rows: bit-identical to contiguous ones): GQA shapes,
// head sizes that do and do not fill a vector, decode on an existing cache
// (q_pos0 > 0), sliding window, non-causal, softcap, padded
// row strides and misaligned pointers; and that 1 and 2 threads (and no pool)
// give bit-identical results.
//
// Tolerance: q, k, v uniform in [-1, 1], scale 1/sqrt(head_dim) (scores up to
// ~sqrt(head_dim)); float dots and float PV accumulation against double in the
// reference: |out - ref| <= 3e-5 (the outputs are bounded by max|v| = 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/dispatch.h"
#include "kernels/ref/attention_ref.h"
#include "quant/legacy_blocks.h"

namespace chimera::kernels {
namespace {

constexpr float kTol = 3e-5f;

struct Shape {
  int64_t n_head, n_head_kv, head_dim, n_q, q_pos0, n_kv;
  bool causal;
  int64_t window;
  float softcap;
};

struct Data {
  int64_t ldq, ldk, ldv, ldo;
  std::vector<float> q, k, v;
};

Data make_data(const Shape& s, std::mt19937& rng) {
  Data d;
  // Padded strides; +1 float offsets make rows misaligned.
  d.ldq = s.n_head * s.head_dim + 3;
  d.ldk = s.n_head_kv * s.head_dim + 5;
  d.ldv = s.n_head_kv * s.head_dim + 1;
  d.ldo = s.n_head * s.head_dim + 7;
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto gen = [&](int64_t rows, int64_t ld) {
    std::vector<float> x((size_t)(rows * ld + 1));
    for (auto& e : x) e = u(rng);
    return x;
  };
  d.q = gen(s.n_q, d.ldq);
  d.k = gen(std::max<int64_t>(s.n_kv, 1), d.ldk);
  d.v = gen(std::max<int64_t>(s.n_kv, 1), d.ldv);
  return d;
}

AttentionParams params(const Shape& s) {
  AttentionParams p;
  p.n_head = s.n_head;
  p.n_head_kv = s.n_head_kv;
  p.head_dim = s.head_dim;
  p.scale = 1.f / std::sqrt((float)s.head_dim);
  p.causal = s.causal;
  p.window = s.window;
  p.softcap = s.softcap;
  return p;
}

constexpr float kSentinel = 12345.f;

std::vector<float> run(const Shape& s, const Data& d, ThreadPool* pool) {
  std::vector<float> out((size_t)(s.n_q * d.ldo + 1), kSentinel);
  attention(params(s), d.q.data() + 1, s.n_q, d.ldq, s.q_pos0, d.k.data() + 1, d.ldk, d.v.data() + 1, d.ldv,
            s.n_kv, out.data() + 1, d.ldo, pool);
  return out;
}

void check(const Shape& s, ThreadPool* p1, ThreadPool* p2, std::mt19937& rng) {
  const Data d = make_data(s, rng);
  std::vector<float> want((size_t)(s.n_q * d.ldo + 1), kSentinel);
  ref::attention(params(s), d.q.data() + 1, s.n_q, d.ldq, s.q_pos0, d.k.data() + 1, d.ldk, d.v.data() + 1, d.ldv,
                 s.n_kv, want.data() + 1, d.ldo);
  const auto got1 = run(s, d, p1);
  const auto got2 = run(s, d, p2);
  const auto got0 = run(s, d, nullptr);
  ASSERT_EQ(0, std::memcmp(got1.data(), got2.data(), got1.size() * sizeof(float))) << "1 vs 2 threads differ";
  ASSERT_EQ(0, std::memcmp(got1.data(), got0.data(), got1.size() * sizeof(float))) << "pool vs no pool differ";
  const int64_t width = s.n_head * s.head_dim;
  int bad = 0;
  for (int64_t i = 0; i < s.n_q; ++i) {
    for (int64_t c = 0; c < d.ldo; ++c) {
      const size_t k = (size_t)(1 + i * d.ldo + c);
      if (c >= width) {
        ASSERT_EQ(got1[k], kSentinel) << "wrote into row padding";
        continue;
      }
      if (!(std::fabs(got1[k] - want[k]) <= kTol) && bad++ < 3) {
        ADD_FAILURE() << "row " << i << " col " << c << " got " << got1[k] << " want " << want[k];
      }
    }
  }
  ASSERT_EQ(bad, 0);
}

// Encodes rows [rows][width] (source stride ld, from x[1]) as `type`;
// rewrites the source with the decoded values; returns the packed rows
// (stride width).
std::vector<uint8_t> encode(std::vector<float>& x, int64_t rows, int64_t ld, int64_t width, KvType type) {
  std::vector<uint8_t> out(kv_row_bytes(type, width) * (size_t)rows);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + 1 + r * ld;
    uint8_t* dst = out.data() + kv_row_bytes(type, width) * (size_t)r;
    if (type == KvType::kF16) {
      for (int64_t i = 0; i < width; ++i) {
        const uint16_t h = f32_to_f16(row[i]);
        std::memcpy(dst + 2 * i, &h, 2);
        row[i] = f16_to_f32(h);
      }
    } else {
      quant::quantize_row_q8_0(row, reinterpret_cast<quant::block_q8_0*>(dst), width);
      quant::dequantize_row_q8_0(reinterpret_cast<const quant::block_q8_0*>(dst), row, width);
    }
  }
  return out;
}

// The rows of a contiguous KvRows split into blocks of block_rows rows, each
// its own allocation; the rows past the last one are 0xFF bytes (NaN in every
// type), so a kernel that read them would not give the contiguous result.
struct Paged {
  std::vector<std::vector<uint8_t>> blocks;
  std::vector<const void*> table;
};
KvRows page(const KvRows& c, int64_t rows, int64_t block_rows, Paged* out) {
  const size_t rb = kv_row_bytes(c.type, c.ld);
  const auto* src = static_cast<const uint8_t*>(c.data);
  for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
    const int64_t n = std::min(block_rows, rows - r0);
    out->blocks.emplace_back(rb * (size_t)block_rows, uint8_t{0xFF});
    std::memcpy(out->blocks.back().data(), src + rb * (size_t)r0, rb * (size_t)n);
  }
  for (const auto& b : out->blocks) out->table.push_back(b.data());
  return KvRows{nullptr, c.ld, c.type, out->table.data(), block_rows};
}

class AttentionTest : public ::testing::Test {
 protected:
  ThreadPool pool1_{1}, pool2_{2};
  std::mt19937 rng_{42};
};

TEST_F(AttentionTest, SweepShapesAndMasks) {
  const int64_t heads[][2] = {{4, 4}, {4, 2}, {8, 1}};
  for (Isa isa : available_isas()) {
    ScopedIsa si(isa);
    SCOPED_TRACE(isa_name(isa));
    for (auto& h : heads) {
      for (int64_t hd : {8, 64, 80, 128}) {
        for (int64_t n_q : {1, 5, 33}) {
          const Shape shapes[] = {
              // causal prefill from position 0
              {h[0], h[1], hd, n_q, 0, n_q, true, 0, 0.f},
              // causal decode / chunk on an existing cache
              {h[0], h[1], hd, n_q, 37, 37 + n_q, true, 0, 0.f},
              // cache longer than the positions (keys past p are masked)
              {h[0], h[1], hd, n_q, 3, 3 + n_q + 11, true, 0, 0.f},
              // sliding window
              {h[0], h[1], hd, n_q, 20, 20 + n_q, true, 7, 0.f},
              // non-causal (all keys), and with a window (lower bound only)
              {h[0], h[1], hd, n_q, 0, 41, false, 0, 0.f},
              {h[0], h[1], hd, n_q, 10, 41, false, 6, 0.f},
              // softcap (gemma-2 style)
              {h[0], h[1], hd, n_q, 9, 9 + n_q, true, 0, 0.5f},
          };
          for (const Shape& s : shapes) {
            SCOPED_TRACE(testing::Message() << "heads " << s.n_head << "/" << s.n_head_kv << " hd " << hd << " n_q "
                                            << n_q << " pos0 " << s.q_pos0 << " n_kv " << s.n_kv << " causal "
                                            << s.causal << " window " << s.window << " softcap " << s.softcap);
            check(s, &pool1_, &pool2_, rng_);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST_F(AttentionTest, LongDecodeAndPrefill) {
  for (Isa isa : available_isas()) {
    ScopedIsa si(isa);
    SCOPED_TRACE(isa_name(isa));
    check({8, 1, 64, 1, 999, 1000, true, 0, 0.f}, &pool1_, &pool2_, rng_);
    check({4, 4, 128, 1, 1500, 1501, true, 256, 0.f}, &pool1_, &pool2_, rng_);
    check({4, 2, 64, 100, 0, 100, true, 0, 0.f}, &pool1_, &pool2_, rng_);
    if (HasFatalFailure()) return;
  }
}

// Rows that see no key (the window lies past the cache) are zero; an empty
// cache gives zeros too.
TEST_F(AttentionTest, NoVisibleKeysGivesZeros) {
  for (Isa isa : available_isas()) {
    ScopedIsa si(isa);
    for (const Shape& s : {Shape{4, 2, 64, 3, 100, 50, true, 10, 0.f}, Shape{4, 2, 64, 3, 0, 0, true, 0, 0.f}}) {
      const Data d = make_data(s, rng_);
      const auto out = run(s, d, &pool2_);
      for (int64_t i = 0; i < s.n_q; ++i) {
        for (int64_t c = 0; c < s.n_head * s.head_dim; ++c) ASSERT_EQ(out[(size_t)(1 + i * d.ldo + c)], 0.f);
      }
    }
  }
}

// A single visible key returns its value row exactly (softmax weight 1).
TEST_F(AttentionTest, SingleKeyReturnsValue) {
  const Shape s{8, 2, 80, 1, 0, 1, true, 0, 0.f};
  for (Isa isa : available_isas()) {
    ScopedIsa si(isa);
    const Data d = make_data(s, rng_);
    const auto out = run(s, d, &pool2_);
    for (int64_t h = 0; h < s.n_head; ++h) {
      const int64_t g = h / (s.n_head / s.n_head_kv);
      for (int64_t c = 0; c < s.head_dim; ++c) {
        ASSERT_EQ(out[(size_t)(1 + h * s.head_dim + c)], d.v[(size_t)(1 + g * s.head_dim + c)]);
      }
    }
  }
}

// f16 and Q8_0 K and/or V rows (KvRows) give exactly what the f32 kernel
// gives on the same rows decoded, on every ISA, for 1 and 2 threads; so the
// typed cache's only error is the rounding of what it stores.
TEST_F(AttentionTest, TypedRowsEqualF32KernelOnDecodedRows) {
  const Shape shapes[] = {
      {8, 2, 64, 1, 37, 38, true, 0, 0.f},    // decode, GQA
      {4, 4, 96, 9, 0, 9, true, 0, 0.f},      // prefill, 96 = 3 Q8_0 blocks per head
      {6, 3, 32, 5, 11, 16, true, 6, 0.f},    // window, one block per head
      {2, 1, 128, 7, 0, 13, false, 0, 30.f},  // non-causal + softcap
      {4, 2, 20, 3, 5, 8, true, 0, 0.f},      // odd head size: f16 only
  };
  for (Isa isa : available_isas()) {
    ScopedIsa si(isa);
    for (const Shape& s : shapes) {
      for (KvType kt : {KvType::kF32, KvType::kF16, KvType::kQ8_0}) {
        for (KvType vt : {KvType::kF32, KvType::kF16, KvType::kQ8_0}) {
          if (kt == KvType::kF32 && vt == KvType::kF32) continue;
          if ((kt == KvType::kQ8_0 || vt == KvType::kQ8_0) && s.head_dim % 32) continue;
          Data d = make_data(s, rng_);
          const int64_t w = s.n_head_kv * s.head_dim, rows = std::max<int64_t>(s.n_kv, 1);
          std::vector<uint8_t> kb, vb;
          if (kt != KvType::kF32) kb = encode(d.k, rows, d.ldk, w, kt);
          if (vt != KvType::kF32) vb = encode(d.v, rows, d.ldv, w, vt);
          const auto want = run(s, d, &pool1_);
          const KvRows k = kt == KvType::kF32 ? KvRows{d.k.data() + 1, d.ldk, kt} : KvRows{kb.data(), w, kt};
          const KvRows v = vt == KvType::kF32 ? KvRows{d.v.data() + 1, d.ldv, vt} : KvRows{vb.data(), w, vt};
          for (ThreadPool* pool : {&pool1_, &pool2_}) {
            std::vector<float> got((size_t)(s.n_q * d.ldo + 1), kSentinel);
            attention(params(s), d.q.data() + 1, s.n_q, d.ldq, s.q_pos0, k, v, s.n_kv, got.data() + 1, d.ldo, pool);
            ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
                << isa_name(isa) << " head_dim " << s.head_dim << " k " << kv_type_name(kt) << " v "
                << kv_type_name(vt) << " threads " << pool->size();
          }
        }
      }
    }
  }
}

// Paged K / V (a block table, KvRows::blocks) give exactly the contiguous
// result, on every ISA, for 1 and 2 threads, every KV type, block sizes from 1
// row to more than the cache, odd lengths, windows that start inside a block
// or a Dot4 group, non-causal and softcap.
TEST_F(AttentionTest, PagedRowsEqualContiguous) {
  const Shape shapes[] = {
      {8, 2, 64, 1, 130, 131, true, 0, 0.f},  // decode across blocks
      {4, 4, 32, 33, 13, 46, true, 0, 0.f},   // prefill chunk at an odd position
      {4, 2, 64, 7, 61, 68, true, 37, 0.f},   // window starting inside a block and a quad
      {2, 1, 128, 5, 0, 77, false, 9, 0.f},   // non-causal with a window
      {6, 3, 32, 3, 50, 53, true, 0, 20.f},   // softcap
      {4, 2, 20, 9, 3, 12, true, 5, 0.f},     // odd head size: f32 / f16
  };
  for (Isa isa : available_isas()) {
    ScopedIsa si(isa);
    for (const Shape& s : shapes) {
      for (KvType kt : {KvType::kF32, KvType::kF16, KvType::kQ8_0}) {
        for (KvType vt : {KvType::kF32, KvType::kF16, KvType::kQ8_0}) {
          if ((kt == KvType::kQ8_0 || vt == KvType::kQ8_0) && s.head_dim % 32) continue;
          Data d = make_data(s, rng_);
          const int64_t w = s.n_head_kv * s.head_dim, rows = std::max<int64_t>(s.n_kv, 1);
          std::vector<uint8_t> kb, vb;
          if (kt != KvType::kF32) kb = encode(d.k, rows, d.ldk, w, kt);
          if (vt != KvType::kF32) vb = encode(d.v, rows, d.ldv, w, vt);
          const KvRows k = kt == KvType::kF32 ? KvRows{d.k.data() + 1, d.ldk, kt} : KvRows{kb.data(), w, kt};
          const KvRows v = vt == KvType::kF32 ? KvRows{d.v.data() + 1, d.ldv, vt} : KvRows{vb.data(), w, vt};
          std::vector<float> want((size_t)(s.n_q * d.ldo + 1), kSentinel);
          attention(params(s), d.q.data() + 1, s.n_q, d.ldq, s.q_pos0, k, v, s.n_kv, want.data() + 1, d.ldo, &pool1_);
          for (int64_t br : {1, 4, 16, 64, 256}) {
            Paged pk, pv;
            const KvRows kp = page(k, rows, br, &pk), vp = page(v, rows, br == 16 ? 4 : br, &pv);
            for (ThreadPool* pool : {&pool1_, &pool2_}) {
              std::vector<float> got((size_t)(s.n_q * d.ldo + 1), kSentinel);
              attention(params(s), d.q.data() + 1, s.n_q, d.ldq, s.q_pos0, kp, vp, s.n_kv, got.data() + 1, d.ldo,
                        pool);
              ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
                  << isa_name(isa) << " head_dim " << s.head_dim << " n_q " << s.n_q << " pos0 " << s.q_pos0
                  << " n_kv " << s.n_kv << " window " << s.window << " k " << kv_type_name(kt) << " v "
                  << kv_type_name(vt) << " block rows " << br << " threads " << pool->size();
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace chimera::kernels
