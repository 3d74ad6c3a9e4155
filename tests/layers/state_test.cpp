// SequenceState with KV, recurrent and stateless layers: fresh states are
// zero, KV-only states roll back freely while recurrent states refuse any
// truncation but to n_past, reset() zeroes recurrent state, copy_from checks
// layer kinds and shapes, snapshot() is an independent copy.
#include <gtest/gtest.h>

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
  EXPECT_EQ(st.bytes(), (size_t)(2 * (30 + 40) + 2 * 8 * 16) * sizeof(float));
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
  st.kv(1)->k_row(1)[2] = 7.f;
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
}  // namespace chimera::layers
