// models::Context: one loaded model serving several callers at once. Two
// contexts on one model run different sequences concurrently in two threads
// (each with its own thread pool) and every logits row is bit-identical to
// running each sequence alone, for every family with a golden tiny model
// (llama, granitehybrid, mamba, mamba2, phimoe, bitnet, llada) and the
// converted bitnet-llama2c and phi4flash models; expert
// statistics attached to the model count the routings of both contexts; a
// context's KV cache types apply to its states only, and a refused type
// leaves the context unchanged.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "format/bitnet_llama2c/bitnet_llama2c.h"
#include "format/hf/hf_convert.h"
#include "models/context.h"
#include "models/model.h"
#include "runtime/expert_stats.h"
#include "test_util.h"

namespace chimera::test {
namespace {

std::unique_ptr<models::Model> load(const std::string& shared, const std::string& name) {
  auto m = models::load_model(shared + "/golden/models/" + name + ".gguf");
  EXPECT_TRUE(m.is_ok()) << name << ": " << m.status().message();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

// A sequence: a prompt fed in one call (every row's logits), then `decode`
// single-token steps (teacher-forced: fixed tokens, so the inputs do not
// depend on the outputs).
struct Sequence {
  std::vector<int32_t> prompt, decode;
};

Sequence make_sequence(int64_t n_vocab, int64_t n_prompt, int64_t n_decode, uint32_t seed) {
  Sequence s;
  uint32_t x = seed;
  auto next = [&] {
    x = x * 1664525u + 1013904223u;
    return (int32_t)(1 + (x >> 8) % (uint32_t)(n_vocab - 1));
  };
  for (int64_t i = 0; i < n_prompt; ++i) s.prompt.push_back(next());
  for (int64_t i = 0; i < n_decode; ++i) s.decode.push_back(next());
  return s;
}

// Every logits row of the sequence run on ctx: prompt rows then one per
// decode step. Errors are recorded in *error (gtest assertions are not used
// off the main thread).
std::vector<float> run(models::Context& ctx, const Sequence& s, ThreadPool* pool, std::string* error) {
  const int64_t nv = ctx.model().info().n_vocab;
  const int64_t np = (int64_t)s.prompt.size(), nd = (int64_t)s.decode.size();
  std::vector<float> rows((size_t)((np + nd) * nv));
  auto st = ctx.new_state(np + nd + 8);
  Status r = ctx.forward(*st, s.prompt.data(), np, models::Logits::kAll, rows.data(), pool);
  for (int64_t i = 0; r.is_ok() && i < nd; ++i)
    r = ctx.forward(*st, &s.decode[(size_t)i], 1, models::Logits::kLast, rows.data() + (np + i) * nv, pool);
  if (!r.is_ok()) *error = r.message();
  return rows;
}

// Runs a and b concurrently, each on its own context and pool, both threads
// released together; returns their rows.
void run_concurrently(const models::Model& m, const Sequence& a, const Sequence& b, std::vector<float>* out_a,
                      std::vector<float>* out_b, std::string* err_a, std::string* err_b) {
  models::Context ca = m.new_context(), cb = m.new_context();
  std::latch start(2);
  auto body = [&start](models::Context* ctx, const Sequence* s, std::vector<float>* out, std::string* err) {
    ThreadPool pool(1);
    start.arrive_and_wait();
    *out = run(*ctx, *s, &pool, err);
  };
  std::thread ta(body, &ca, &a, out_a, err_a), tb(body, &cb, &b, out_b, err_b);
  ta.join();
  tb.join();
}

// Two threads, two contexts on m, different sequences at once: every row
// bit-identical to each sequence alone (a buffer shared between contexts
// shows up as a mismatch in some of the rounds).
void expect_concurrent_matches_alone(const models::Model& m, int rounds = 10) {
  const int64_t nv = m.info().n_vocab;
  // Different lengths, so the two threads are at different layers / steps.
  const Sequence a = make_sequence(nv, 37, 24, 1), b = make_sequence(nv, 61, 17, 2);
  std::string err;
  ThreadPool pool(1);
  models::Context alone = m.new_context();
  const std::vector<float> want_a = run(alone, a, &pool, &err), want_b = run(alone, b, &pool, &err);
  ASSERT_TRUE(err.empty()) << err;
  for (int round = 0; round < rounds; ++round) {
    std::vector<float> got_a, got_b;
    std::string err_a, err_b;
    run_concurrently(m, a, b, &got_a, &got_b, &err_a, &err_b);
    ASSERT_TRUE(err_a.empty()) << err_a;
    ASSERT_TRUE(err_b.empty()) << err_b;
    ASSERT_EQ(got_a.size(), want_a.size());
    ASSERT_EQ(got_b.size(), want_b.size());
    EXPECT_EQ(0, std::memcmp(got_a.data(), want_a.data(), want_a.size() * sizeof(float))) << "round " << round;
    EXPECT_EQ(0, std::memcmp(got_b.data(), want_b.data(), want_b.size() * sizeof(float))) << "round " << round;
  }
}

TEST(Context, ConcurrentContextsMatchEachSequenceAlone) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const char* name : {"tiny-llama", "tiny-granitehybrid", "tiny-mamba", "tiny-mamba2", "tiny-phimoe-hf",
                           "tiny-bitnet-TQ2_0", "tiny-llada"}) {
    SCOPED_TRACE(name);
    auto m = load(shared, name);
    ASSERT_TRUE(m);
    expect_concurrent_matches_alone(*m);
  }
}

// The families without a golden GGUF, converted into a temporary file.
void expect_converted_concurrent_matches_alone(const std::string& path) {
  auto r = models::load_model(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  expect_concurrent_matches_alone(*r.value(), 4);  // larger models: fewer, longer rounds
}

TEST(Context, ConcurrentBitnetLlama2cContextsMatchEachSequenceAlone) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string dir = shared + "/models/bitnet-llama2c";
  const std::string path = temp_path("context-bitnet-1M.gguf");
  format::bitnet_llama2c::ConvertOptions opts;
  opts.check = &models::check_model_header;
  opts.name = "bitnet-1M";
  const Status st = format::bitnet_llama2c::convert(dir + "/bitnet-1M.bin", dir + "/tok512.bin", path, opts);
  ASSERT_TRUE(st.is_ok()) << st.message();
  expect_converted_concurrent_matches_alone(path);
}

TEST(Context, ConcurrentPhi4FlashContextsMatchEachSequenceAlone) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string path = temp_path("context-phi4flash.gguf");
  format::hf::ConvertOptions o;
  o.check = &models::check_model_header;
  o.out_type = "f32";
  const Status st = format::hf::convert(shared + "/golden/hf/phi4flash-tiny-a", path, o);
  ASSERT_TRUE(st.is_ok()) << st.message();
  expect_converted_concurrent_matches_alone(path);
}

// The MoE observer is model-wide: statistics attached to the model count
// every routing of every context, also when two run at once.
TEST(Context, ExpertStatisticsCountBothConcurrentContexts) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = load(shared, "tiny-phimoe-hf");
  ASSERT_TRUE(m);
  const int64_t nv = m->info().n_vocab;
  const Sequence a = make_sequence(nv, 29, 20, 3), b = make_sequence(nv, 45, 12, 4);
  // Per layer and expert: selections of a and b run one after the other.
  std::vector<std::vector<int64_t>> want;
  {
    auto sess = runtime::ExpertStatsSession::attach(*m);
    ASSERT_TRUE(sess.is_ok()) << sess.status().message();
    std::string err;
    ThreadPool pool(1);
    models::Context ctx = m->new_context();
    run(ctx, a, &pool, &err);
    run(ctx, b, &pool, &err);
    ASSERT_TRUE(err.empty()) << err;
    for (const auto& L : (*sess)->stats().layers()) want.push_back(L.count);
  }
  ASSERT_FALSE(want.empty());
  auto sess = runtime::ExpertStatsSession::attach(*m);
  ASSERT_TRUE(sess.is_ok());
  std::vector<float> got_a, got_b;
  std::string err_a, err_b;
  run_concurrently(*m, a, b, &got_a, &got_b, &err_a, &err_b);
  ASSERT_TRUE(err_a.empty() && err_b.empty()) << err_a << err_b;
  const auto& layers = (*sess)->stats().layers();
  ASSERT_EQ(layers.size(), want.size());
  for (size_t l = 0; l < want.size(); ++l) EXPECT_EQ(layers[l].count, want[l]) << "layer " << l;
}

TEST(Context, KvTypesApplyOnlyToTheContextsOwnStates) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = load(shared, "tiny-llama");
  ASSERT_TRUE(m);
  using kernels::KvType;
  const layers::KvCacheTypes f16{KvType::kF16, KvType::kF16}, f32{KvType::kF32, KvType::kF32};
  // f16 is the default (llama.cpp's): of a fresh context and of Model::new_state.
  EXPECT_EQ(layers::kDefaultKvCacheTypes, f16);
  EXPECT_EQ(m->default_kv_types(), f16);
  EXPECT_FALSE(m->kv_default_falls_back());
  models::Context typed = m->new_context(), plain = m->new_context();
  EXPECT_EQ(typed.kv_types(), f16);
  ASSERT_TRUE(plain.set_kv_types(f32).is_ok());
  EXPECT_EQ(plain.kv_types(), f32);
  auto ts = typed.new_state(64), ps = plain.new_state(64), ms = m->new_state(64);
  EXPECT_EQ(ts->kv_types(), f16);
  EXPECT_EQ(ts->kv(0)->types(), f16);
  EXPECT_EQ(ps->kv_types(), f32);
  EXPECT_EQ(ps->kv(0)->types(), f32);
  EXPECT_EQ(ms->kv_types(), f16) << "Model::new_state takes the model's default";
  // A fresh context takes the types of the one it is made from.
  EXPECT_EQ(typed.fresh().kv_types(), f16);
  EXPECT_EQ(plain.fresh().kv_types(), f32);

  // The plain context computes exactly what a context never touched by the
  // typed one does; the typed one differs (its f16 cache rounds K/V).
  const Sequence s = make_sequence(m->info().n_vocab, 20, 6, 5);
  std::string err;
  ThreadPool pool(1);
  models::Context untouched = m->new_context();
  ASSERT_TRUE(untouched.set_kv_types(f32).is_ok());
  const std::vector<float> want = run(untouched, s, &pool, &err);
  const std::vector<float> got_typed = run(typed, s, &pool, &err), got_plain = run(plain, s, &pool, &err);
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_EQ(0, std::memcmp(got_plain.data(), want.data(), want.size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(got_typed.data(), want.data(), want.size() * sizeof(float)));

  // The llama2.c BitNet's reference-order attention reads only f32 caches:
  // its default is f32 (the f16 default never becomes an error), and an
  // explicit f16 is refused and changes nothing.
  const std::string dir = shared + "/models/bitnet-llama2c";
  const std::string path = temp_path("context-kv-bitnet-1M.gguf");
  format::bitnet_llama2c::ConvertOptions opts;
  opts.check = &models::check_model_header;
  opts.name = "bitnet-1M";
  ASSERT_TRUE(format::bitnet_llama2c::convert(dir + "/bitnet-1M.bin", dir + "/tok512.bin", path, opts).is_ok());
  auto loaded = models::load_model(path);
  auto header = format::GgufFile::open(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  ASSERT_TRUE(header.is_ok());
  EXPECT_EQ(models::default_kv_types_for(*header.value()), f32);  // what `chimera info` estimates with
  std::unique_ptr<models::Model> bn = std::move(loaded).value();
  EXPECT_EQ(bn->default_kv_types(), f32);
  EXPECT_TRUE(bn->kv_default_falls_back());
  EXPECT_EQ(bn->new_state(8)->kv_types(), f32);
  models::Context bc = bn->new_context();
  EXPECT_EQ(bc.kv_types(), f32);
  const Status r = bc.set_kv_types(f16);
  EXPECT_EQ(r.code(), StatusCode::kUnsupported);
  EXPECT_NE(r.message().find("f32 only"), std::string::npos) << r.message();
  EXPECT_EQ(bc.kv_types(), f32);
  EXPECT_EQ(bc.new_state(8)->kv_types(), f32);
}

}  // namespace
}  // namespace chimera::test
