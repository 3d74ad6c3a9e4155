// Prefix sharing of paged KV blocks (layers/state.h): a snapshot / fork holds
// the same blocks as its source (the process's KV bytes do not grow), the
// first write into a shared block copies only that block, and the logits of
// both continuations after a fork are bit-identical to runs on unshared
// states (tiny-llama, f32 and f16 caches, a prompt and continuations that
// cross block boundaries, 1 and 2 threads).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "models/context.h"
#include "models/model.h"
#include "test_util.h"

namespace chimera::test {
namespace {

using layers::KvCache;
constexpr int64_t B = KvCache::kBlockRows;

std::vector<int32_t> tokens(int64_t n, int32_t seed, int64_t n_vocab) {
  std::vector<int32_t> t((size_t)n);
  for (int64_t i = 0; i < n; ++i) t[(size_t)i] = (int32_t)(1 + (seed + i * 37 + i * i) % (n_vocab - 1));
  return t;
}

TEST(KvShare, ForkedContinuationsEqualUnsharedRuns) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = models::load_model(shared + "/golden/models/tiny-llama.gguf");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  models::Model& model = **m;
  const int64_t nv = model.info().n_vocab;
  const int64_t n_layers_kv = (int64_t)model.info().n_layer;
  const auto prompt = tokens(B + 36, 3, nv), x = tokens(40, 11, nv), y = tokens(29, 5, nv);
  models::Context ctx = model.new_context();
  for (kernels::KvType t : {kernels::KvType::kF32, kernels::KvType::kF16}) {
    ASSERT_TRUE(ctx.set_kv_types({t, t}).is_ok());
    for (int threads : {1, 2}) {
      SCOPED_TRACE(testing::Message() << kernels::kv_type_name(t) << " threads " << threads);
      ThreadPool pool(threads);
      // Unshared references: prompt then one continuation, each on its own state.
      auto run = [&](layers::SequenceState& st, const std::vector<int32_t>& toks) {
        std::vector<float> out((size_t)(toks.size() * nv));
        EXPECT_TRUE(ctx.forward(st, toks.data(), (int64_t)toks.size(), models::Logits::kAll, out.data(), &pool).is_ok());
        return out;
      };
      auto rx = ctx.new_state(512), ry = ctx.new_state(512);
      run(*rx, prompt);
      run(*ry, prompt);
      const auto want_x = run(*rx, x), want_y = run(*ry, y);

      auto a = ctx.new_state(512);
      run(*a, prompt);
      const size_t live = KvCache::live_bytes();
      auto b = ctx.new_state(512);
      ASSERT_TRUE(b->copy_from(*a).is_ok());  // the prefix cache's restore / the n-choices fork
      auto snap = a->snapshot();
      EXPECT_EQ(KvCache::live_bytes(), live) << "a copy and a snapshot share every block";
      EXPECT_EQ(b->bytes(), a->bytes());
      // a continues: its partly filled last block is copied once, then new blocks.
      const auto got_x = run(*a, x);
      const auto got_y = run(*b, y);
      EXPECT_EQ(0, std::memcmp(got_x.data(), want_x.data(), want_x.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(got_y.data(), want_y.data(), want_y.size() * sizeof(float)));
      // The snapshot still continues exactly like the prompt alone did.
      const auto got_y2 = run(*snap, y);
      EXPECT_EQ(0, std::memcmp(got_y2.data(), want_y.data(), want_y.size() * sizeof(float)));
      // Per layer: block 0 is still shared by all three; the prompt's block 1
      // was copied by a and b (snap, its last holder, wrote it in place); each
      // wrote a block 2: 5 blocks more than a held alone, not 7.
      const size_t block = (size_t)B * a->kv(0)->row_bytes() * (size_t)n_layers_kv;
      EXPECT_EQ(KvCache::live_bytes() - live, 5 * block);
      EXPECT_EQ(a->bytes() + b->bytes() + snap->bytes(), 9 * block);
    }
  }
}

}  // namespace
}  // namespace chimera::test
