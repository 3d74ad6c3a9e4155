// Sliding-window K/V ring (layers/state.h RingKvCache) and differential
// attention on it (layers/diff_attention.h):
//  * the ring's bytes depend on the window, not on n_ctx; truncate is refused
//    once the keys the next token needs have been overwritten, with a clear
//    error; snapshot / copy_from carry the ring;
//  * a random-weight sliding-window layer over a sequence 4.6× the window gives
//    the same outputs in one batch (a chunk longer than the window), in chunks of
//    7 and 3, step by step, with 1 and 2 threads, and after a snapshot restore —
//    and matches the full-length KvCache masked to the window (the reference).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "layers/diff_attention.h"
#include "layers/state.h"

namespace chimera::layers {
namespace {

TEST(RingKvState, BytesDoNotGrowWithContext) {
  const RingKvSpec spec{4, 6, 8};
  SequenceState small({spec}, 16), big({spec}, 100000), tiny({spec}, 3);
  EXPECT_EQ(small.bytes(), (size_t)(8 * (4 + 6)) * sizeof(float));
  EXPECT_EQ(big.bytes(), small.bytes());
  ASSERT_NE(big.ring(0), nullptr);
  EXPECT_EQ(big.ring(0)->rows(), 8);
  EXPECT_EQ(tiny.ring(0)->rows(), 3);  // never more rows than the context
  EXPECT_EQ(big.kv(0), nullptr);
  EXPECT_TRUE(big.has_recurrent());  // not rollback-to-any-prefix: the prefix cache keeps it whole
}

TEST(RingKvState, TruncateOnlyWhileTheNeededKeysAreHeld) {
  SequenceState st({KvSpec{4, 4}, RingKvSpec{4, 4, 8}}, 64);
  st.advance(6);  // nothing overwritten yet: any prefix
  EXPECT_TRUE(st.truncate(2).is_ok());
  EXPECT_EQ(st.n_past(), 2);
  st.advance(18);  // n_past 20: ring holds 12..19; position 19 needs 12..18
  EXPECT_TRUE(st.truncate(20).is_ok());
  EXPECT_TRUE(st.truncate(19).is_ok());
  Status s = st.truncate(17);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("sliding-window"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("window 8"), std::string::npos) << s.message();
  EXPECT_EQ(st.n_past(), 19);  // unchanged by the refused call
}

TEST(RingKvState, SnapshotAndCopyCarryTheRing) {
  SequenceState st({RingKvSpec{2, 2, 4}}, 32);
  for (int p = 0; p < 6; ++p) {
    st.ring(0)->k_row(p)[0] = (float)p;
    st.ring(0)->v_row(p)[1] = (float)(10 * p);
  }
  st.advance(6);
  auto snap = st.snapshot();
  EXPECT_EQ(snap->n_past(), 6);
  for (int p = 2; p < 6; ++p) {
    EXPECT_EQ(snap->ring(0)->k_row(p)[0], (float)p);
    EXPECT_EQ(snap->ring(0)->v_row(p)[1], (float)(10 * p));
  }
  SequenceState other_window({RingKvSpec{2, 2, 5}}, 32);
  EXPECT_FALSE(other_window.copy_from(st).is_ok());
  SequenceState full({KvSpec{2, 2}}, 32);
  EXPECT_FALSE(full.copy_from(st).is_ok());
}

// A small random sliding-window differential attention layer.
struct Layer {
  DiffAttentionConfig c;
  DiffAttentionWeights w;
  std::vector<float> wqkv, wout;
  Layer(int64_t window, uint32_t seed) {
    std::mt19937 rng(seed);
    c.n_embd = 24, c.n_head = 4, c.n_head_kv = 2, c.head_dim = 8, c.window = window;
    c.lambda_init = 0.8f - 0.6f * std::exp(-0.3f);
    std::normal_distribution<float> nd(0.f, 0.4f);
    const int64_t nqkv = (c.n_head + 2 * c.n_head_kv) * c.head_dim, nq = c.n_head * c.head_dim;
    wqkv.resize((size_t)(nqkv * c.n_embd));
    wout.resize((size_t)(c.n_embd * nq));
    for (auto& x : wqkv) x = nd(rng);
    for (auto& x : wout) x = nd(rng);
    w.qkv.w = {format::GgmlType::F32, wqkv.data(), nqkv, c.n_embd, (size_t)c.n_embd * sizeof(float)};
    w.out.w = {format::GgmlType::F32, wout.data(), c.n_embd, nq, (size_t)nq * sizeof(float)};
    w.sub_norm.data.resize((size_t)(2 * c.head_dim));
    for (int64_t i = 0; i < 2 * c.head_dim; ++i) w.sub_norm.data.data()[i] = 0.5f + 0.05f * (float)i;
    w.lambda = 0.42f;
  }
};

// Outputs [n][n_embd] of the ring layer fed in chunks of `chunk` (0 = all).
std::vector<float> run_ring(const Layer& L, const std::vector<float>& x, int64_t n, int64_t chunk, ThreadPool* pool,
                            int64_t snapshot_at = -1) {
  const int64_t d = L.c.n_embd;
  SequenceState st({L.c.ring_spec()}, n + 4);
  DiffAttentionScratch s;
  s.reserve(L.c, n);
  std::vector<float> out((size_t)(n * d));
  std::unique_ptr<SequenceState> snap;
  const int64_t c = chunk > 0 ? chunk : n;
  for (int64_t i = 0; i < n;) {
    const int64_t T = std::min(c, n - i);
    diff_attention_forward(L.c, L.w, x.data() + i * d, T, i, *st.ring(0), s, out.data() + i * d, pool);
    st.advance(T);
    i += T;
    if (i == snapshot_at && !snap) {
      snap = st.snapshot();
      // Scribble over the live state with a different continuation, then restore.
      std::vector<float> junk((size_t)(3 * d), 0.3f), jo((size_t)(3 * d));
      diff_attention_forward(L.c, L.w, junk.data(), 3, i, *st.ring(0), s, jo.data(), pool);
      st.advance(3);
      EXPECT_TRUE(st.copy_from(*snap).is_ok());
    }
  }
  return out;
}

TEST(RingKvDiffAttention, ChunkingsAgreeWithEachOtherAndTheFullCache) {
  std::mt19937 rng(11);
  const int64_t W = 5, n = 23;
  Layer L(W, 99);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x((size_t)(n * L.c.n_embd));
  for (auto& e : x) e = nd(rng);
  // Reference: the full-length KvCache masked to the window.
  std::vector<float> ref((size_t)(n * L.c.n_embd));
  {
    KvCache kv(L.c.kv_spec(), n);
    DiffAttentionScratch s;
    s.reserve(L.c, n);
    diff_attention_forward(L.c, L.w, x.data(), n, 0, kv, s, ref.data(), nullptr);
  }
  float scale = 0;
  for (float v : ref) scale = std::max(scale, std::fabs(v));
  ThreadPool p1(1), p2(2);
  const auto batch = run_ring(L, x, n, 0, &p1);
  for (ThreadPool* pool : {&p1, &p2}) {
    for (int64_t chunk : {0, 7, 3, 1}) {
      SCOPED_TRACE("threads=" + std::to_string(pool->size()) + " chunk=" + std::to_string(chunk));
      const auto got = run_ring(L, x, n, chunk, pool);
      const auto restored = run_ring(L, x, n, chunk, pool, chunk == 1 ? 9 : chunk == 0 ? -1 : 2 * chunk);
      float d_ref = 0, d_batch = 0, d_restore = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        d_ref = std::max(d_ref, std::fabs(got[i] - ref[i]));
        d_batch = std::max(d_batch, std::fabs(got[i] - batch[i]));
        d_restore = std::max(d_restore, std::fabs(restored[i] - got[i]));
      }
      // Projections of 1 vs many rows may round differently (GEMV vs GEMM);
      // the attention itself is split-invariant.
      EXPECT_LE(d_ref, 1e-5f * scale);
      EXPECT_LE(d_batch, 1e-5f * scale);
      EXPECT_EQ(d_restore, 0.f) << "snapshot restore changed the result";
    }
  }
  // The window matters: an unbounded layer gives different outputs late in the sequence.
  Layer full(0, 99);
  std::vector<float> unb((size_t)(n * L.c.n_embd));
  KvCache kv(full.c.kv_spec(), n);
  DiffAttentionScratch s;
  s.reserve(full.c, n);
  diff_attention_forward(full.c, full.w, x.data(), n, 0, kv, s, unb.data(), nullptr);
  float late = 0;
  for (size_t i = (size_t)((n - 1) * L.c.n_embd); i < unb.size(); ++i) late = std::max(late, std::fabs(unb[i] - ref[i]));
  EXPECT_GT(late, 1e-3f * scale);
}

}  // namespace
}  // namespace chimera::layers
