// SequenceState with KV, recurrent and stateless layers: fresh states are
// zero, KV-only states roll back freely while recurrent states refuse any
// truncation but to n_past, reset() zeroes recurrent state, copy_from checks
// layer kinds and shapes, snapshot() is an independent copy.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/fp16.h"
#include "quant/legacy_blocks.h"

#include "layers/state.h"

namespace chimera::layers {
namespace {

std::vector<LayerStateSpec> hybrid_specs() {
  return {RecurrentSpec{10, 3, 40}, KvSpec{8, 8}, NoStateSpec{}, RecurrentSpec{10, 3, 40}};
}

TEST(SequenceState, FreshHybridStateIsZeroAndTyped) {
  SequenceState st(hybrid_specs(), 16);
  EXPECT_EQ(st.n_layers(), 4u);
  EXPECT_TRUE(st.has_recurrent());
  ASSERT_NE(st.recurrent(0), nullptr);
  EXPECT_EQ(st.kv(0), nullptr);
  ASSERT_NE(st.kv(1), nullptr);
  EXPECT_EQ(st.recurrent(1), nullptr);
  EXPECT_EQ(st.kv(2), nullptr);
  EXPECT_EQ(st.recurrent(2), nullptr);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(st.recurrent(3)->conv()[i], 0.f);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(st.recurrent(3)->ssm()[i], 0.f);
  // KV blocks are allocated as rows are stored: none yet.
  EXPECT_EQ(st.bytes(), (size_t)(2 * (30 + 40)) * sizeof(float));
  EXPECT_EQ(st.bytes(true), (size_t)(2 * (30 + 40) + 2 * 8 * 16) * sizeof(float));
  EXPECT_EQ(st.kv(1)->n_blocks(), 0);
}

TEST(SequenceState, TruncateRules) {
  SequenceState kv({KvSpec{4, 4}, KvSpec{4, 4}}, 16);
  kv.advance(10);
  EXPECT_TRUE(kv.truncate(4).is_ok());
  EXPECT_EQ(kv.n_past(), 4);
  EXPECT_FALSE(kv.truncate(5).is_ok());
  EXPECT_FALSE(kv.truncate(-1).is_ok());

  SequenceState hy(hybrid_specs(), 16);
  hy.advance(10);
  EXPECT_FALSE(hy.truncate(4).is_ok());
  EXPECT_FALSE(hy.truncate(0).is_ok());
  EXPECT_TRUE(hy.truncate(10).is_ok());
  EXPECT_EQ(hy.n_past(), 10);
}

TEST(SequenceState, ResetSnapshotAndCopy) {
  SequenceState st(hybrid_specs(), 16);
  st.recurrent(0)->ssm()[5] = 3.f;
  st.recurrent(3)->conv()[29] = -2.f;
  float row[8] = {0, 0, 7.f, 0, 0, 0, 0, 0};
  st.kv(1)->store(1, 1, row, 8, row, 8);
  st.advance(2);
  auto snap = st.snapshot();
  EXPECT_EQ(snap->n_past(), 2);
  EXPECT_EQ(snap->recurrent(0)->ssm()[5], 3.f);
  EXPECT_EQ(snap->recurrent(3)->conv()[29], -2.f);
  EXPECT_EQ(snap->kv(1)->k_row(1)[2], 7.f);

  st.reset();
  EXPECT_EQ(st.n_past(), 0);
  EXPECT_EQ(st.recurrent(0)->ssm()[5], 0.f);
  EXPECT_EQ(st.recurrent(3)->conv()[29], 0.f);
  EXPECT_EQ(snap->recurrent(0)->ssm()[5], 3.f);  // independent copy

  ASSERT_TRUE(st.copy_from(*snap).is_ok());
  EXPECT_EQ(st.n_past(), 2);
  EXPECT_EQ(st.recurrent(0)->ssm()[5], 3.f);
  EXPECT_EQ(st.kv(1)->k_row(1)[2], 7.f);

  SequenceState other_kind({KvSpec{8, 8}, KvSpec{8, 8}, NoStateSpec{}, RecurrentSpec{10, 3, 40}}, 16);
  EXPECT_FALSE(st.copy_from(other_kind).is_ok());
  SequenceState other_shape({RecurrentSpec{10, 3, 41}, KvSpec{8, 8}, NoStateSpec{}, RecurrentSpec{10, 3, 40}}, 16);
  EXPECT_FALSE(st.copy_from(other_shape).is_ok());
  SequenceState fewer({RecurrentSpec{10, 3, 40}}, 16);
  EXPECT_FALSE(st.copy_from(fewer).is_ok());
}

}  // namespace
// f16 KV storage: store rounds to nearest even and loads widen exactly; half
// the bytes; snapshots keep the type; states of different types do not copy;
// f32 row pointers into an f16 cache are refused (death test).
TEST(KvCache, F16StoresRoundedRowsInHalfTheBytes) {
  const KvSpec spec{4, 2};
  KvCache f32(spec, 8), f16(spec, 8, {kernels::KvType::kF16, kernels::KvType::kF16});
  EXPECT_EQ(f16.capacity_bytes() * 2, f32.capacity_bytes());
  EXPECT_EQ(f16.row_bytes(), (4 + 2) * 2u);
  const float k[2][4] = {{1.f, 1.0f + 1.0f / 4096, -65504.f, 3.14159f}, {1e-8f, 0.1f, -0.f, 70000.f}};
  const float v[2][2] = {{0.5f, -2.f}, {1.0f / 3, 1e5f}};
  f16.store(3, 2, &k[0][0], 4, &v[0][0], 2);
  float kb[8], vb[4];
  f16.load_k(3, 2, kb);
  f16.load_v(3, 2, vb);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(kb[i], f16_to_f32(f32_to_f16((&k[0][0])[i]))) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(vb[i], f16_to_f32(f32_to_f16((&v[0][0])[i]))) << i;
  EXPECT_EQ(kb[1], 1.f);           // 1 + 2^-12 rounds to even (1)
  EXPECT_TRUE(std::isinf(kb[7]));  // beyond the f16 range
  const kernels::KvRows rows = f16.k_rows();
  EXPECT_EQ(rows.type, kernels::KvType::kF16);
  EXPECT_EQ(rows.ld, 4);

  SequenceState a({KvSpec{4, 2}}, 8, {kernels::KvType::kF16, kernels::KvType::kF32});
  a.kv(0)->store(0, 2, &k[0][0], 4, &v[0][0], 2);
  a.advance(2);
  auto snap = a.snapshot();
  EXPECT_EQ(snap->kv(0)->types().k, kernels::KvType::kF16);
  EXPECT_EQ(snap->kv(0)->types().v, kernels::KvType::kF32);
  snap->kv(0)->load_v(0, 2, vb);
  EXPECT_EQ(vb[3], 1e5f);  // the f32 half stays exact
  SequenceState b({KvSpec{4, 2}}, 8);
  EXPECT_FALSE(b.copy_from(a).is_ok());
  EXPECT_DEATH(a.kv(0)->k_row(0), "f32 row access to an f16 KV cache");
}

// Q8_0 KV storage: rows quantized as quantize_row_q8_0, read back decoded;
// 34 bytes per 32 values.
TEST(KvCache, Q8_0StoresQuantizedRows) {
  const KvSpec spec{64, 32, 32, 32};
  KvCache q8(spec, 4, {kernels::KvType::kQ8_0, kernels::KvType::kQ8_0}), f32(spec, 4);
  EXPECT_EQ(q8.row_bytes(), (2 + 1) * 34u);
  std::vector<float> k(2 * 64), v(2 * 32);
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::sin(0.37f * (float)i) * 3.f;
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.11f * (float)i);
  q8.store(1, 2, k.data(), 64, v.data(), 32);
  EXPECT_EQ(q8.bytes(), 4 * q8.row_bytes());  // one block: the 4 rows of the context
  std::vector<quant::block_q8_0> blk(4);
  std::vector<float> want(2 * 64), got(2 * 64);
  quant::quantize_row_q8_0(k.data(), blk.data(), 128);
  quant::dequantize_row_q8_0(blk.data(), want.data(), 128);
  q8.load_k(1, 2, got.data());
  EXPECT_EQ(got, want);
  q8.load_v(1, 2, got.data());
  float worst = 0;
  for (size_t i = 0; i < v.size(); ++i) worst = std::max(worst, std::fabs(got[i] - v[i]));
  EXPECT_GT(worst, 0.f);
  EXPECT_LT(worst, 1.0f / 127);  // half a step of the largest block scale (|v| <= 1)
}

}  // namespace chimera::layers
