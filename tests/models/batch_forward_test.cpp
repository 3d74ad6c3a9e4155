// Model::forward_batch (fused multi-sequence forward) against forward() on
// each sequence alone, for every family that fuses (llama incl. ternary
// weights, granitehybrid, mamba, mamba2, phimoe, bitnet, bitnet-llama2c,
// phi4flash) on their golden tiny models, 1 and 2 threads; a family that
// fuses must never take the per-sequence fallback. Steps mix prefill chunks of
// different lengths (one crossing the 256-row micro-batch limit, one long
// enough for the Mamba-2 chunked SSD path) with decode steps; logits and every
// layer's state (KV rows, conv / SSM state) must be bit-identical. Also: the
// segment packing and forward_batch's validation (no state changes on error).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "format/bitnet_llama2c/bitnet_llama2c.h"
#include "format/hf/hf_convert.h"
#include "gguf_rewrite.h"
#include "models/context.h"
#include "models/model.h"
#include "test_util.h"

namespace chimera::test {
namespace {

std::unique_ptr<models::Model> load(const std::string& shared, const std::string& name) {
  auto m = models::load_model(shared + "/golden/models/" + name + ".gguf");
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

// One step of one sequence: how many tokens to feed and which logits to keep.
struct StepSpec {
  int64_t n;
  models::Logits which;
};

void expect_same_state(layers::SequenceState& a, layers::SequenceState& b, const std::string& what) {
  ASSERT_EQ(a.n_past(), b.n_past()) << what;
  for (size_t l = 0; l < a.n_layers(); ++l) {
    if (layers::KvCache* ka = a.kv(l)) {
      layers::KvCache* kb = b.kv(l);
      const size_t nk = (size_t)(a.n_past() * ka->spec().n_embd_k), nv = (size_t)(a.n_past() * ka->spec().n_embd_v);
      std::vector<float> xa(std::max(nk, nv)), xb(std::max(nk, nv));  // rows as f32 whatever the cache type
      ka->load_k(0, a.n_past(), xa.data());
      kb->load_k(0, a.n_past(), xb.data());
      EXPECT_EQ(0, std::memcmp(xa.data(), xb.data(), nk * sizeof(float))) << what << " K layer " << l;
      ka->load_v(0, a.n_past(), xa.data());
      kb->load_v(0, a.n_past(), xb.data());
      EXPECT_EQ(0, std::memcmp(xa.data(), xb.data(), nv * sizeof(float))) << what << " V layer " << l;
    }
    if (layers::RingKvCache* ra = a.ring(l)) {
      // Rows 0 .. min(n_past, R) - 1 are written (position j in row j % R).
      layers::RingKvCache* rb = b.ring(l);
      const size_t n = (size_t)std::min(a.n_past(), ra->rows());
      EXPECT_EQ(0, std::memcmp(ra->k(), rb->k(), n * (size_t)ra->spec().n_embd_k * sizeof(float)))
          << what << " ring K layer " << l;
      EXPECT_EQ(0, std::memcmp(ra->v(), rb->v(), n * (size_t)ra->spec().n_embd_v * sizeof(float)))
          << what << " ring V layer " << l;
    }
    if (layers::RecurrentState* ra = a.recurrent(l)) {
      layers::RecurrentState* rb = b.recurrent(l);
      const auto& sp = ra->spec();
      EXPECT_EQ(0, std::memcmp(ra->conv(), rb->conv(), (size_t)(sp.conv_rows * sp.conv_channels) * sizeof(float)))
          << what << " conv layer " << l;
      EXPECT_EQ(0, std::memcmp(ra->ssm(), rb->ssm(), (size_t)sp.ssm_floats * sizeof(float)))
          << what << " ssm layer " << l;
    }
  }
}

// Runs `steps` (steps[s][i]: sequence i's work in step s; n == 0 = idle) once
// fused and once per sequence alone; compares logits and states.
// The fused steps run on ctx, the lone forwards on another context of the
// same model (contexts are interchangeable: any state runs on any of them).
void check_batched_equals_alone(models::Context& ctx, const std::vector<std::vector<StepSpec>>& steps, int threads) {
  const models::Model& m = ctx.model();
  models::Context other = ctx.fresh();
  const size_t n_seq = steps[0].size();
  const int64_t nv = m.info().n_vocab;
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> toks(n_seq);
  for (size_t i = 0; i < n_seq; ++i) {
    int64_t total = 0;
    for (const auto& st : steps) total += st[i].n;
    for (int64_t t = 0; t < total; ++t) toks[i].push_back((int32_t)(rng() % (uint32_t)nv));
  }
  ThreadPool pool(threads);
  std::vector<std::unique_ptr<layers::SequenceState>> fused, alone;
  for (size_t i = 0; i < n_seq; ++i) {
    fused.push_back(ctx.new_state(1024));
    alone.push_back(other.new_state(1024));
  }
  std::vector<int64_t> fed(n_seq, 0);
  for (size_t s = 0; s < steps.size(); ++s) {
    std::vector<models::BatchItem> items;
    std::vector<std::vector<float>> out_f(n_seq), out_a(n_seq);
    for (size_t i = 0; i < n_seq; ++i) {
      const StepSpec& sp = steps[s][i];
      if (sp.n == 0) continue;
      const size_t rows = sp.which == models::Logits::kAll ? (size_t)sp.n : 1;
      out_f[i].assign(rows * (size_t)nv, -1.f);
      out_a[i].assign(rows * (size_t)nv, -2.f);
      items.push_back({fused[i].get(), toks[i].data() + fed[i], sp.n, sp.which,
                       sp.which == models::Logits::kNone ? nullptr : out_f[i].data()});
      ASSERT_TRUE(other.forward(*alone[i], toks[i].data() + fed[i], sp.n, sp.which,
                                sp.which == models::Logits::kNone ? nullptr : out_a[i].data(), &pool)
                      .is_ok());
    }
    ASSERT_TRUE(ctx.forward_batch(items, &pool).is_ok());
    for (size_t i = 0; i < n_seq; ++i) {
      const std::string what = m.info().arch + " threads " + std::to_string(threads) + " step " +
                               std::to_string(s) + " seq " + std::to_string(i);
      if (steps[s][i].n == 0) continue;
      fed[i] += steps[s][i].n;
      if (steps[s][i].which != models::Logits::kNone) {
        EXPECT_EQ(0, std::memcmp(out_f[i].data(), out_a[i].data(), out_f[i].size() * sizeof(float))) << what;
      }
      expect_same_state(*fused[i], *alone[i], what);
    }
  }
}

void check_batched_equals_alone(const models::Model& m, const std::vector<std::vector<StepSpec>>& steps, int threads) {
  models::Context ctx = m.new_context();
  check_batched_equals_alone(ctx, steps, threads);
}

std::vector<std::vector<StepSpec>> mixed_steps() {
  using models::Logits;
  // Four sequences: short prompt, long prompt (> 256 rows: two micro-batch
  // pieces, the first on the chunked SSD path), 1-token prompt, late arrival.
  return {
      {{5, Logits::kAll}, {300, Logits::kLast}, {1, Logits::kLast}, {0, Logits::kNone}},
      {{1, Logits::kAll}, {1, Logits::kLast}, {140, Logits::kNone}, {7, Logits::kAll}},
      {{1, Logits::kLast}, {1, Logits::kAll}, {3, Logits::kAll}, {1, Logits::kLast}},
      {{200, Logits::kLast}, {1, Logits::kLast}, {1, Logits::kLast}, {60, Logits::kLast}},
      {{1, Logits::kLast}, {1, Logits::kLast}, {1, Logits::kLast}, {1, Logits::kLast}},
  };
}

// Every multi-sequence step of a family that fuses runs as one fused step:
// the default per-sequence fallback (counted by unfused_batch_steps) never runs.
void expect_fused_matches_alone(const std::string& shared, const std::string& model) {
  auto m = load(shared, model);
  ASSERT_TRUE(m);
  const int64_t unfused = models::unfused_batch_steps();
  for (int threads : {1, 2}) check_batched_equals_alone(*m, mixed_steps(), threads);
  EXPECT_EQ(models::unfused_batch_steps(), unfused) << model << " ran a multi-sequence step one sequence at a time";
}

TEST(ForwardBatch, LlamaMatchesEachSequenceAlone) {
  CHIMERA_REQUIRE_SHARED(shared);
  expect_fused_matches_alone(shared, "tiny-llama");
}

TEST(ForwardBatch, QuantizedLlamaMatchesEachSequenceAlone) {
  // K-quant weights: activations are quantized per row (Q8_K), so rows must
  // stay independent of their neighbours in the fused GEMMs.
  CHIMERA_REQUIRE_SHARED(shared);
  expect_fused_matches_alone(shared, "quant-llama-Q4_K_M");
}

TEST(ForwardBatch, GraniteHybridMatchesEachSequenceAlone) {
  CHIMERA_REQUIRE_SHARED(shared);
  expect_fused_matches_alone(shared, "tiny-granitehybrid");
}

// Typed caches: a lone forward on an f32 cache projects K/V straight into the
// cache, every other call (several sequences, or a typed cache) stores rows
// converted from scratch: the fused step must still round every row as the
// lone forward does.
TEST(ForwardBatch, TypedKvCacheMatchesEachSequenceAlone) {
  CHIMERA_REQUIRE_SHARED(shared);
  using kernels::KvType;
  int q8_runs = 0;
  for (const char* name : {"tiny-llama", "tiny-granitehybrid", "quant-llama-Q8_0"}) {
    auto m = load(shared, name);
    ASSERT_TRUE(m);
    for (layers::KvCacheTypes t : {layers::KvCacheTypes{KvType::kF16, KvType::kF16},
                                   layers::KvCacheTypes{KvType::kQ8_0, KvType::kF16}}) {
      if (!m->accepts_kv_types(t)) continue;  // Q8_0 needs heads of a multiple of 32
      models::Context ctx = m->new_context();
      ASSERT_TRUE(ctx.set_kv_types(t).is_ok());
      ASSERT_EQ(ctx.new_state(8)->kv_types().k, t.k);
      q8_runs += t.k == KvType::kQ8_0;
      for (int threads : {1, 2}) check_batched_equals_alone(ctx, mixed_steps(), threads);
    }
  }
  EXPECT_GE(q8_runs, 1) << "no model took a Q8_0 cache";
}

TEST(ForwardBatch, MambaMatchesEachSequenceAlone) {
  CHIMERA_REQUIRE_SHARED(shared);
  expect_fused_matches_alone(shared, "tiny-mamba");
}

TEST(ForwardBatch, Mamba2MatchesEachSequenceAlone) {
  CHIMERA_REQUIRE_SHARED(shared);
  expect_fused_matches_alone(shared, "tiny-mamba2");
}

TEST(ForwardBatch, PhiMoeMatchesEachSequenceAlone) {
  CHIMERA_REQUIRE_SHARED(shared);
  expect_fused_matches_alone(shared, "tiny-phimoe-hf");
}

TEST(ForwardBatch, PhiMoeLongRopeFollowsEachSequencesCall) {
  // LongRoPE picks the factor set by the length a forward call reaches, per
  // sequence: original context 260 makes sequence 1's 300-token prompt (cut
  // into 256 + 44 rows; the first piece alone stays below 260) and its decodes
  // long while the others stay short in the same fused steps.
  CHIMERA_REQUIRE_SHARED(shared);
  const std::vector<float> ones(8, 1.f), twos(8, 2.f);  // n_rot 16 -> 8 factors
  const std::string path =
      rewrite(shared + "/golden/models/tiny-phimoe-hf.gguf", "batch-phimoe-longrope.gguf", keep_all,
              {{"phimoe.rope.scaling.original_context_length", format::GgufValue::from_u32(260)}},
              {{"rope_factors_short.weight", ones}, {"rope_factors_long.weight", twos}});
  auto m = models::load_model(path);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const int64_t unfused = models::unfused_batch_steps();
  for (int threads : {1, 2}) check_batched_equals_alone(**m, mixed_steps(), threads);
  EXPECT_EQ(models::unfused_batch_steps(), unfused);
}

// A family without a fused step (Model's default forward_batch_impl, as the
// diffusion LMs): each sequence runs alone, and the fallback is counted.
class PerSequenceModel final : public models::Model {
 public:
  PerSequenceModel() { info_.n_vocab = 4; }
  std::vector<layers::LayerStateSpec> state_specs() const override { return {}; }
  std::unique_ptr<models::ModelScratch> new_scratch() const override {
    return std::make_unique<models::ModelScratch>();
  }
  mutable int64_t calls = 0;  // a test double's counter (one thread)

 private:
  void forward_impl(models::ModelScratch&, layers::SequenceState& st, const int32_t*, int64_t n, models::Logits,
                    float*, ThreadPool*) const override {
    ++calls;
    st.advance(n);
  }
};

TEST(ForwardBatch, DefaultPathRunsEachSequenceAndIsCounted) {
  PerSequenceModel m;
  models::Context ctx = m.new_context();
  auto a = ctx.new_state(16), b = ctx.new_state(16);
  const int32_t t[3] = {1, 2, 3};
  const int64_t unfused = models::unfused_batch_steps();
  std::vector<models::BatchItem> one = {{a.get(), t, 3, models::Logits::kNone, nullptr}};
  ASSERT_TRUE(ctx.forward_batch(one, nullptr).is_ok());
  EXPECT_EQ(models::unfused_batch_steps(), unfused);  // one sequence: nothing to fuse
  std::vector<models::BatchItem> two = {{a.get(), t, 2, models::Logits::kNone, nullptr},
                                        {b.get(), t, 1, models::Logits::kNone, nullptr}};
  ASSERT_TRUE(ctx.forward_batch(two, nullptr).is_ok());
  EXPECT_EQ(models::unfused_batch_steps(), unfused + 1);
  EXPECT_EQ(m.calls, 3);
  EXPECT_EQ(a->n_past(), 5);
  EXPECT_EQ(b->n_past(), 1);
}

TEST(ForwardBatch, TernaryLlamaMatchesEachSequenceAlone) {
  // TQ1_0 / TQ2_0 weights multiply Q8_K activations quantized per row.
  CHIMERA_REQUIRE_SHARED(shared);
  for (const char* name : {"quant-llama-TQ1_0", "quant-llama-TQ2_0"}) {
    auto m = load(shared, name);
    ASSERT_TRUE(m);
    for (int threads : {1, 2}) check_batched_equals_alone(*m, mixed_steps(), threads);
  }
}

TEST(ForwardBatch, BitnetMatchesEachSequenceAlone) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = load(shared, "tiny-bitnet-TQ2_0");
  ASSERT_TRUE(m);
  for (int threads : {1, 2}) check_batched_equals_alone(*m, mixed_steps(), threads);
}

// Loads a model converted into the temporary file `path` (removed once
// loaded) and runs the mixed steps fused vs alone at 1 and 2 threads.
void expect_converted_fuses_exactly(const std::string& path) {
  auto r = models::load_model(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  for (int threads : {1, 2}) check_batched_equals_alone(*r.value(), mixed_steps(), threads);
}

TEST(ForwardBatch, BitnetLlama2cMatchesEachSequenceAlone) {
  // absmax-int8 BitLinear: each row's activations are quantized on their own.
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string dir = shared + "/models/bitnet-llama2c";
  const std::string path = temp_path("batch-bitnet-1M.gguf");
  format::bitnet_llama2c::ConvertOptions opts;
  opts.check = &models::check_model_header;
  opts.name = "bitnet-1M";
  const Status st = format::bitnet_llama2c::convert(dir + "/bitnet-1M.bin", dir + "/tok512.bin", path, opts);
  ASSERT_TRUE(st.is_ok()) << st.message();
  expect_converted_fuses_exactly(path);
}

TEST(ForwardBatch, Phi4FlashMatchesEachSequenceAlone) {
  // Mamba-1 + memory, sliding-window (ring, window 16) and full differential
  // attention, GMU and the YOCO cross decoder on the shared KV.
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string path = temp_path("batch-phi4flash.gguf");
  format::hf::ConvertOptions o;
  o.check = &models::check_model_header;
  o.out_type = "f32";
  const Status st = format::hf::convert(shared + "/golden/hf/phi4flash-tiny-a", path, o);
  ASSERT_TRUE(st.is_ok()) << st.message();
  expect_converted_fuses_exactly(path);
}

TEST(ForwardBatch, InvalidItemsFailWithoutTouchingAnyState) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = load(shared, "tiny-llama");
  ASSERT_TRUE(m);
  models::Context ctx = m->new_context();
  auto a = ctx.new_state(8), b = ctx.new_state(8);
  const int32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> lg((size_t)m->info().n_vocab);
  {
    std::vector<models::BatchItem> items = {{a.get(), t, 2, models::Logits::kLast, lg.data()},
                                            {a.get(), t, 1, models::Logits::kNone, nullptr}};
    EXPECT_FALSE(ctx.forward_batch(items, nullptr).is_ok());  // same state twice
  }
  {
    std::vector<models::BatchItem> items = {{a.get(), t, 2, models::Logits::kNone, nullptr},
                                            {b.get(), t, 9, models::Logits::kNone, nullptr}};
    EXPECT_FALSE(ctx.forward_batch(items, nullptr).is_ok());  // context overflow
  }
  {
    const int32_t bad[2] = {1, (int32_t)m->info().n_vocab};
    std::vector<models::BatchItem> items = {{a.get(), t, 2, models::Logits::kNone, nullptr},
                                            {b.get(), bad, 2, models::Logits::kNone, nullptr}};
    EXPECT_FALSE(ctx.forward_batch(items, nullptr).is_ok());  // token out of range
  }
  {
    std::vector<models::BatchItem> items = {{a.get(), t, 2, models::Logits::kLast, nullptr}};
    EXPECT_FALSE(ctx.forward_batch(items, nullptr).is_ok());  // logits without a buffer
  }
  EXPECT_EQ(a->n_past(), 0);
  EXPECT_EQ(b->n_past(), 0);
  std::vector<models::BatchItem> none;
  EXPECT_TRUE(ctx.forward_batch(none, nullptr).is_ok());
}

TEST(PackSegments, CutsLikeForwardAndPacksOnePiecePerItem) {
  std::vector<int32_t> tok(600, 0);
  std::vector<models::BatchItem> items = {
      {nullptr, tok.data(), 600, models::Logits::kNone, nullptr},  // 256 + 256 + 88
      {nullptr, tok.data(), 1, models::Logits::kNone, nullptr},
      {nullptr, tok.data(), 100, models::Logits::kNone, nullptr},
  };
  auto mbs = models::pack_segments(items, 256);
  ASSERT_EQ(mbs.size(), 3u);
  // mb0: item0[0,256); item1 and item2 do not fit.
  ASSERT_EQ(mbs[0].size(), 1u);
  EXPECT_EQ(mbs[0][0].T, 256);
  // mb1: item0[256,512) is full again.
  ASSERT_EQ(mbs[1].size(), 1u);
  EXPECT_EQ(mbs[1][0].offset, 256);
  // mb2: item0[512,600) + item1 + item2, rows laid out in item order.
  ASSERT_EQ(mbs[2].size(), 3u);
  EXPECT_EQ(mbs[2][0].offset, 512);
  EXPECT_EQ(mbs[2][0].T, 88);
  EXPECT_TRUE(mbs[2][0].last());
  EXPECT_EQ(mbs[2][1].row, 88);
  EXPECT_EQ(mbs[2][2].row, 89);
  EXPECT_EQ(mbs[2][2].T, 100);
  // Every item's rows are covered exactly once, in order.
  for (size_t i = 0; i < items.size(); ++i) {
    int64_t next = 0;
    for (const auto& mb : mbs)
      for (const auto& s : mb)
        if (s.item == &items[i]) {
          EXPECT_EQ(s.offset, next);
          next += s.T;
        }
    EXPECT_EQ(next, items[i].n);
  }
}

}  // namespace
}  // namespace chimera::test
