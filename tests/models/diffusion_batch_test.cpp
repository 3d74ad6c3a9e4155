// The fused multi-canvas diffusion forward (models::diffusion_forward_batch,
// what the server runs once per denoising step for all its requests) on
// tiny-llada: four canvases of different lengths at different positions — two
// full passes, a prefix-cache slice and a dual-cache slice over K/V an earlier
// pass left, each with its own output rows — run as ONE forward give every
// slice's logits and K/V bit for bit as running that slice alone, with f32 and
// f16 KV caches, 1 and 2 threads. Bad batches (two slices on one state, a
// slice out of range) are refused before anything runs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/thread_pool.h"
#include "models/context.h"
#include "models/model.h"
#include "runtime/diffusion_model.h"
#include "test_util.h"

namespace chimera::test {
namespace {

struct Canvas {
  std::vector<int32_t> tokens;  // L positions
  int64_t pos0 = 0, T = 0;      // the slice run in the batch
  std::vector<int64_t> rows;    // its output rows
  bool prefill = false;         // a full pass first leaves K/V of the whole canvas (the caches' setup)
};

std::vector<Canvas> make_canvases(int64_t n_vocab, int32_t mask_id) {
  std::mt19937 rng(11);
  auto canvas = [&](int64_t P, int64_t L) {
    std::vector<int32_t> t((size_t)L, mask_id);
    for (int64_t i = 0; i < P; ++i) t[(size_t)i] = (int32_t)(rng() % (uint32_t)n_vocab);
    for (int64_t i = P; i < L; i += 3) t[(size_t)i] = (int32_t)(rng() % (uint32_t)n_vocab);  // some committed
    return t;
  };
  std::vector<Canvas> c(4);
  c[0].tokens = canvas(7, 23);  // full pass, every masked row
  c[0].T = 23;
  for (int64_t i = 7; i < 23; ++i)
    if (c[0].tokens[(size_t)i] == mask_id) c[0].rows.push_back(i);
  c[1].tokens = canvas(12, 44);  // prefix cache: block start to the canvas end
  c[1].pos0 = 20, c[1].T = 24, c[1].prefill = true;
  c[1].rows = {0, 1, 5, 17, 23};
  c[2].tokens = canvas(5, 37);  // dual cache: only the block, between frozen prefix and suffix
  c[2].pos0 = 13, c[2].T = 8, c[2].prefill = true;
  c[2].rows = {2, 3, 7};
  c[3].tokens = canvas(30, 61);  // another full pass, no logits wanted (K/V only)
  c[3].T = 61;
  return c;
}

// Every K and V row of every layer of st, read back as f32.
std::vector<float> kv_dump(layers::SequenceState& st, int64_t n) {
  std::vector<float> out;
  for (size_t l = 0; l < st.n_layers(); ++l) {
    layers::KvCache* kv = st.kv(l);
    if (!kv) continue;
    std::vector<float> k((size_t)(n * kv->spec().n_embd_k)), v((size_t)(n * kv->spec().n_embd_v));
    kv->load_k(0, n, k.data());
    kv->load_v(0, n, v.data());
    out.insert(out.end(), k.begin(), k.end());
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(DiffusionBatch, FusedCanvasesAreBitIdenticalToEachAlone) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = models::load_model(shared + "/golden/models/tiny-llada.gguf");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const models::Model& model = **m;
  auto spec = models::diffusion_spec(model);
  ASSERT_TRUE(spec.is_ok());
  const int64_t nv = model.info().n_vocab;
  const std::vector<Canvas> cv = make_canvases(nv, spec->mask_id);
  for (const layers::KvCacheTypes kvt :
       {layers::KvCacheTypes{}, layers::KvCacheTypes{kernels::KvType::kF16, kernels::KvType::kF16}}) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + (kvt == layers::KvCacheTypes{} ? " f32" : " f16"));
      ThreadPool pool(threads);
      models::Context ctx = model.new_context();
      ASSERT_TRUE(ctx.set_kv_types(kvt).is_ok());
      std::vector<std::unique_ptr<layers::SequenceState>> alone, fused;
      std::vector<std::vector<float>> ref(cv.size()), got(cv.size());
      std::vector<models::DiffusionSlice> batch;
      for (size_t i = 0; i < cv.size(); ++i) {
        const Canvas& c = cv[i];
        const int64_t L = (int64_t)c.tokens.size();
        alone.push_back(ctx.new_state(L));
        fused.push_back(ctx.new_state(L));
        if (c.prefill) {  // the same earlier full pass on both states
          for (auto* st : {alone.back().get(), fused.back().get()})
            ASSERT_TRUE(models::diffusion_forward(ctx, *st, c.tokens.data(), 0, L, L, 0, 0, nullptr, &pool).is_ok());
        }
        ref[i].assign(c.rows.size() * (size_t)nv, 0.f);
        got[i].assign(c.rows.size() * (size_t)nv, -1.f);
        ASSERT_TRUE(models::diffusion_forward_rows(ctx, *alone.back(), c.tokens.data() + c.pos0, c.pos0, c.T, L,
                                                   c.rows, ref[i].data(), &pool)
                        .is_ok());
        batch.push_back({fused.back().get(), c.tokens.data() + c.pos0, c.pos0, c.T, L, c.rows, got[i].data()});
      }
      ASSERT_TRUE(models::diffusion_forward_batch(ctx, batch, &pool).is_ok());
      for (size_t i = 0; i < cv.size(); ++i) {
        const int64_t L = (int64_t)cv[i].tokens.size();
        EXPECT_TRUE(same_bits(got[i], ref[i])) << "canvas " << i << ": logits differ";
        EXPECT_TRUE(same_bits(kv_dump(*fused[i], L), kv_dump(*alone[i], L))) << "canvas " << i << ": K/V differ";
      }
    }
  }
}

TEST(DiffusionBatch, BadBatchesAreRefusedBeforeAnythingRuns) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = models::load_model(shared + "/golden/models/tiny-llada.gguf");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ThreadPool pool(1);
  models::Context ctx = (*m)->new_context();
  auto a = ctx.new_state(16), b = ctx.new_state(16);
  const std::vector<int32_t> tok(16, 1);
  const std::vector<int64_t> rows = {0, 3};
  std::vector<float> out(2 * (size_t)(*m)->info().n_vocab);
  const models::DiffusionSlice ok{a.get(), tok.data(), 0, 16, 16, rows, out.data()};
  // Two slices on one state.
  std::vector<models::DiffusionSlice> same = {ok, ok};
  EXPECT_FALSE(models::diffusion_forward_batch(ctx, same, &pool).is_ok());
  // A key range past the state's context, after a good slice: nothing runs.
  std::vector<models::DiffusionSlice> bad = {ok, {b.get(), tok.data(), 0, 16, 17, rows, out.data()}};
  EXPECT_FALSE(models::diffusion_forward_batch(ctx, bad, &pool).is_ok());
  EXPECT_EQ(a->kv(0)->n_blocks(), 0) << "a refused batch wrote K/V";
  // Output rows not increasing.
  const std::vector<int64_t> back = {3, 0};
  std::vector<models::DiffusionSlice> unordered = {{a.get(), tok.data(), 0, 16, 16, back, out.data()}};
  EXPECT_FALSE(models::diffusion_forward_batch(ctx, unordered, &pool).is_ok());
  EXPECT_TRUE(models::diffusion_forward_batch(ctx, {}, &pool).is_ok());
}

}  // namespace
}  // namespace chimera::test
