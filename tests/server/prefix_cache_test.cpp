// PrefixCache without a model: KV-only snapshots match any common prefix and
// are restored by copy + truncate; recurrent (checkpoint) snapshots match only
// whole; covered snapshots are not stored twice; LRU eviction frees memory.
#include <gtest/gtest.h>

#include "server/prefix_cache.h"

namespace chimera::server {
namespace {

using layers::KvSpec;
using layers::LayerStateSpec;
using layers::RecurrentSpec;
using layers::SequenceState;

std::unique_ptr<SequenceState> kv_state(const std::vector<int32_t>& toks) {
  std::vector<LayerStateSpec> specs = {KvSpec{4, 4}, KvSpec{4, 4}};
  auto st = std::make_unique<SequenceState>(specs, (int64_t)toks.size());
  for (size_t p = 0; p < toks.size(); ++p) {
    float row[4];
    for (int i = 0; i < 4; ++i) row[i] = (float)(toks[p] * 10 + i);
    st->kv(0)->store((int64_t)p, 1, row, 4, row, 4);
  }
  st->advance((int64_t)toks.size());
  return st;
}

std::unique_ptr<SequenceState> hybrid_state(const std::vector<int32_t>& toks) {
  std::vector<LayerStateSpec> specs = {RecurrentSpec{4, 3, 16}, KvSpec{4, 4}};
  auto st = std::make_unique<SequenceState>(specs, (int64_t)toks.size());
  st->recurrent(0)->ssm()[0] = (float)toks.size();
  st->advance((int64_t)toks.size());
  return st;
}

TEST(PrefixCache, KvEntriesMatchAnyCommonPrefix) {
  PrefixCache c;
  c.insert("", {1, 2, 3, 4}, kv_state({1, 2, 3, 4}));
  std::vector<int32_t> q = {1, 2, 3, 9, 9};
  auto hit = c.lookup("", q, (int64_t)q.size() - 1);
  ASSERT_EQ(hit.n_tokens, 3);
  EXPECT_TRUE(hit.truncate);
  // Restore into a full-size state: copy, then roll back to the match.
  SequenceState dst({KvSpec{4, 4}, KvSpec{4, 4}}, 64);
  ASSERT_TRUE(dst.copy_from(*hit.state));
  ASSERT_TRUE(dst.truncate(hit.n_tokens));
  EXPECT_EQ(dst.n_past(), 3);
  EXPECT_EQ(dst.kv(0)->k_row(2)[1], 31.0f);
  // The lookup never uses the whole query (one token must be fed for logits).
  std::vector<int32_t> same = {1, 2, 3, 4};
  EXPECT_EQ(c.lookup("", same, 3).n_tokens, 3);
  EXPECT_EQ(c.lookup("", std::vector<int32_t>{7, 1}, 1).n_tokens, 0);
}

TEST(PrefixCache, ScopesNeverSeeEachOthersEntries) {
  PrefixCache c;
  c.insert("alice", {1, 2, 3, 4}, kv_state({1, 2, 3, 4}));
  const std::vector<int32_t> q = {1, 2, 3, 4, 5};
  EXPECT_EQ(c.lookup("bob", q, 4).n_tokens, 0);
  EXPECT_EQ(c.lookup("", q, 4).n_tokens, 0);
  EXPECT_EQ(c.lookup("alice", q, 4).n_tokens, 4);
  EXPECT_FALSE(c.covers("bob", std::vector<int32_t>{1, 2}, true));
  EXPECT_TRUE(c.covers("alice", std::vector<int32_t>{1, 2}, true));
  // Bob's own copy is stored beside Alice's, and a longer one of Bob's does
  // not drop Alice's shorter entry.
  c.insert("bob", {1, 2}, kv_state({1, 2}));
  c.insert("bob", {1, 2, 3, 4, 5, 6}, kv_state({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(c.entries(), 2u);
  EXPECT_EQ(c.lookup("alice", q, 5).n_tokens, 4);
  EXPECT_EQ(c.lookup("bob", q, 5).n_tokens, 5);
}

TEST(PrefixCache, CoveredSnapshotsAreNotDuplicated) {
  PrefixCache c;
  c.insert("", {1, 2, 3, 4}, kv_state({1, 2, 3, 4}));
  const size_t b = c.bytes();
  EXPECT_TRUE(c.covers("", std::vector<int32_t>{1, 2}, true));
  c.insert("", {1, 2}, kv_state({1, 2}));
  EXPECT_EQ(c.entries(), 1u);
  // A longer snapshot replaces its prefix.
  c.insert("", {1, 2, 3, 4, 5, 6}, kv_state({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(c.entries(), 1u);
  EXPECT_GT(c.bytes(), b);
  c.insert("", {8, 9}, kv_state({8, 9}));
  EXPECT_EQ(c.entries(), 2u);
}

TEST(PrefixCache, RecurrentCheckpointsMatchOnlyWhole) {
  PrefixCache c;
  c.insert("", {1, 2, 3}, hybrid_state({1, 2, 3}));
  c.insert("", {1, 2, 3, 4, 5}, hybrid_state({1, 2, 3, 4, 5}));
  EXPECT_EQ(c.entries(), 2u);  // checkpoints never replace each other
  std::vector<int32_t> q = {1, 2, 3, 4, 7, 7};
  auto hit = c.lookup("", q, 5);
  EXPECT_EQ(hit.n_tokens, 3);  // {1..5} diverges at 5: unusable; {1,2,3} whole
  EXPECT_FALSE(hit.truncate);
  SequenceState dst({RecurrentSpec{4, 3, 16}, KvSpec{4, 4}}, 64);
  ASSERT_TRUE(dst.copy_from(*hit.state));
  EXPECT_EQ(dst.n_past(), 3);
  EXPECT_EQ(dst.recurrent(0)->ssm()[0], 3.0f);
  std::vector<int32_t> q2 = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(c.lookup("", q2, 5).n_tokens, 5);
  EXPECT_EQ(c.lookup("", q2, 4).n_tokens, 3);
  EXPECT_EQ(c.lookup("", std::vector<int32_t>{1, 2, 9}, 2).n_tokens, 0);
}

TEST(PrefixCache, EvictsLeastRecentlyUsed) {
  PrefixCache c;
  c.insert("", {1, 1}, kv_state({1, 1}));
  c.insert("", {2, 2}, kv_state({2, 2}));
  c.insert("", {3, 3}, kv_state({3, 3}));
  EXPECT_EQ(c.lookup("", std::vector<int32_t>{1, 1, 0}, 2).n_tokens, 2);  // {1,1} now most recent
  ASSERT_TRUE(c.evict_lru());                                         // drops {2,2}
  EXPECT_EQ(c.lookup("", std::vector<int32_t>{2, 2, 0}, 2).n_tokens, 0);
  EXPECT_EQ(c.lookup("", std::vector<int32_t>{1, 1, 0}, 2).n_tokens, 2);
  ASSERT_TRUE(c.evict_lru());
  ASSERT_TRUE(c.evict_lru());
  EXPECT_FALSE(c.evict_lru());
  EXPECT_EQ(c.bytes(), 0u);
}

// bytes() is what the cache alone keeps alive: a block also held by a live
// sequence is that sequence's, blocks shared between entries count once, and
// a block counts again as soon as the sequence sharing it lets go.
TEST(PrefixCache, BytesCountBlocksHeldOnlyByTheCacheOnce) {
  const std::vector<int32_t> toks(100, 7);  // two 64-row blocks per KV layer
  auto live = kv_state(toks);
  const size_t full = live->bytes();
  ASSERT_GT(full, 0u);
  PrefixCache c;
  c.insert("", toks, live->snapshot());
  EXPECT_EQ(c.bytes(), 0u) << "every block is shared with the live sequence";
  // A second entry (another scope) sharing the same blocks adds nothing.
  c.insert("other", toks, live->snapshot());
  EXPECT_EQ(c.entries(), 2u);
  EXPECT_EQ(c.bytes(), 0u);
  // The sequence writes into its last block (copy on write): that block's
  // old version is now the cache's alone.
  float row[4] = {1, 2, 3, 4};
  live->kv(0)->store(99, 1, row, 4, row, 4);
  // (The last block of a 100-position context holds rows 64..99 only.)
  const size_t one_block = live->kv(0)->row_bytes() * (100 - layers::KvCache::kBlockRows);
  EXPECT_EQ(c.bytes(), one_block);
  // The sequence ends: every block is held by the two entries only, once.
  live->reset();
  EXPECT_EQ(c.bytes(), full);
  ASSERT_TRUE(c.evict_lru());
  EXPECT_EQ(c.bytes(), full);
  ASSERT_TRUE(c.evict_lru());
  EXPECT_EQ(c.bytes(), 0u);
  // Recurrent states are never shared: counted in full per entry.
  c.insert("", {1, 2, 3}, hybrid_state({1, 2, 3}));
  EXPECT_EQ(c.bytes(), hybrid_state({1, 2, 3})->bytes());
}

}  // namespace
}  // namespace chimera::server
