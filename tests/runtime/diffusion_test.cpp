// Diffusion generation: the per-step arithmetic (token choice, confidences,
// schedule, commit selection), Dream's shift_logits against the LLaDA path
// (a Dream GGUF built from tiny-llada whose NEOX-ordered Q/K rows make it the
// same network, so its shifted decoding must equal LLaDA rows taken one
// position to the left), the cache invariants (a cached slice over fresh K/V
// is bit-identical to the full pass; refresh every step is the exact run),
// guidance, threshold decoding, and clear errors for bad options.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "format/gguf/gguf.h"
#include "models/model.h"
#include "runtime/diffusion.h"
#include "runtime/diffusion_model.h"
#include "runtime/diffusion_sampling.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace chimera::test {
namespace {

using runtime::Remasking;

TEST(DiffusionSampling, ArgmaxConfidenceMarginEntropy) {
  std::mt19937_64 rng(1);
  const float l[4] = {1.f, 3.f, 3.f, 0.f};  // tie between ids 1 and 2 → lowest id
  const double z = std::exp(1.0 - 3) + 2 + std::exp(-3.0);
  auto c = runtime::choose_token(l, 4, Remasking::kLowConfidence, 0, rng);
  EXPECT_EQ(c.token, 1);
  EXPECT_NEAR(c.confidence, 1 / z, 1e-12);
  c = runtime::choose_token(l, 4, Remasking::kMargin, 0, rng);
  EXPECT_NEAR(c.confidence, 0, 1e-12);  // p1 == p2
  const float l2[3] = {2.f, 0.f, 0.f};
  const double z2 = std::exp(2.0) + 2;
  c = runtime::choose_token(l2, 3, Remasking::kMargin, 0, rng);
  EXPECT_NEAR(c.confidence, (std::exp(2.0) - 1) / z2, 1e-12);
  c = runtime::choose_token(l2, 3, Remasking::kEntropy, 0, rng);
  double h = 0;
  for (double v : {2.0, 0.0, 0.0}) h += std::exp(v) / z2 * std::log(std::exp(v) / z2);
  EXPECT_NEAR(c.confidence, h, 1e-12);
  c = runtime::choose_token(l2, 3, Remasking::kRandom, 0, rng);
  EXPECT_GT(c.confidence, 0);
  EXPECT_LT(c.confidence, 1);
}

TEST(DiffusionSampling, GumbelIsSeededAndFollowsTemperature) {
  std::vector<float> l = {0.f, 0.5f, 1.f, 0.2f};
  std::mt19937_64 a(7), b(7);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(runtime::choose_token(l.data(), 4, Remasking::kLowConfidence, 1.0, a).token,
              runtime::choose_token(l.data(), 4, Remasking::kLowConfidence, 1.0, b).token);
  // T = 1 Gumbel-max samples the softmax: check the frequencies.
  std::mt19937_64 r(3);
  std::vector<int> hist(4);
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++hist[(size_t)runtime::choose_token(l.data(), 4, Remasking::kLowConfidence, 1.0, r).token];
  double z = 0;
  for (float v : l) z += std::exp((double)v);
  for (int v = 0; v < 4; ++v) EXPECT_NEAR(hist[(size_t)v] / (double)n, std::exp((double)l[(size_t)v]) / z, 0.01);
}

TEST(DiffusionSampling, ScheduleAndSelection) {
  EXPECT_EQ(runtime::transfer_schedule(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(runtime::transfer_schedule(2, 4), (std::vector<int64_t>{1, 1, 0, 0}));
  const std::vector<double> conf = {0.2, 0.9, 0.5, 0.9, 0.95};
  EXPECT_EQ(runtime::select_commits(conf, 1, 0), (std::vector<size_t>{4}));
  EXPECT_EQ(runtime::select_commits(conf, 2, 0), (std::vector<size_t>{1, 4}));  // tie 1/3 → lower index
  EXPECT_EQ(runtime::select_commits(conf, 0, 0.8), (std::vector<size_t>{1, 3, 4}));
  EXPECT_EQ(runtime::select_commits({0.1, 0.3}, 0, 0.9), (std::vector<size_t>{1}));  // at least one
  // The quota is a floor under the threshold: the 3 best, plus any above τ.
  EXPECT_EQ(runtime::select_commits(conf, 3, 0.99), (std::vector<size_t>{1, 3, 4}));
}

struct Tiny {
  std::unique_ptr<models::Model> model;
  std::vector<int32_t> prompt;
};

Tiny load_tiny(const std::string& shared, const std::string& path = "") {
  Tiny t;
  auto m = models::load_model(path.empty() ? shared + "/golden/models/tiny-llada.gguf" : path);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (m.is_ok()) t.model = std::move(m).value();
  std::ifstream f(shared + "/golden/tiny-llada.json");
  t.prompt = nlohmann::json::parse(f)["prompt_tokens"].get<std::vector<int32_t>>();
  return t;
}

// tiny-llada rewritten as arch "dream": llada.* keys renamed, shift_logits key
// dropped (Dream's default is shifted), zero q/k/v biases added, and Q/K rows
// reordered from the NORM (adjacent-pair) layout to NEOX (halves), so that
// Dream's NEOX RoPE computes the same network.
std::string make_dream(const std::string& shared) {
  auto g = format::GgufFile::open(shared + "/golden/models/tiny-llada.gguf");
  EXPECT_TRUE(g.is_ok());
  format::GgufWriter w;
  const int64_t n_head = (*g)->get_int("llada.attention.head_count").value_or(0);
  for (const auto& [k, v] : (*g)->metadata()) {
    if (k == "diffusion.shift_logits") continue;
    if (k == "general.architecture") w.set(k, format::GgufValue::from_string("dream"));
    else if (k.rfind("llada.", 0) == 0) w.set("dream." + k.substr(6), v);
    else w.set(k, v);
  }
  for (const auto& t : (*g)->tensors()) {
    const bool qk = t.name.find(".attn_q.weight") != std::string::npos ||
                    t.name.find(".attn_k.weight") != std::string::npos;
    if (!qk) {
      EXPECT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
      continue;
    }
    const int64_t rows = t.dim(1), row_bytes = (int64_t)t.n_bytes / rows;
    const int64_t n_heads = t.name.find("attn_q") != std::string::npos
                                ? n_head
                                : (*g)->get_int("llada.attention.head_count_kv").value_or(n_head);
    const int64_t d = rows / n_heads;
    std::vector<uint8_t> out(t.n_bytes);
    for (int64_t h = 0; h < n_heads; ++h)
      for (int64_t i = 0; i < d / 2; ++i) {
        std::memcpy(&out[(size_t)((h * d + i) * row_bytes)], t.data + (h * d + 2 * i) * row_bytes, (size_t)row_bytes);
        std::memcpy(&out[(size_t)((h * d + d / 2 + i) * row_bytes)], t.data + (h * d + 2 * i + 1) * row_bytes,
                    (size_t)row_bytes);
      }
    EXPECT_TRUE(w.add_tensor_copy(t.name, t.type, t.ne, std::move(out)).is_ok());
    const std::string bias = t.name.substr(0, t.name.size() - 6) + "bias";
    std::vector<uint8_t> zeros((size_t)(rows * 4), 0);
    EXPECT_TRUE(w.add_tensor_copy(bias, format::GgmlType::F32, {rows}, std::move(zeros)).is_ok());
    if (t.name.find("attn_k") != std::string::npos) {  // v bias too
      const std::string vb = t.name.substr(0, t.name.find("attn_k")) + "attn_v.bias";
      std::vector<uint8_t> z2((size_t)(rows * 4), 0);
      EXPECT_TRUE(w.add_tensor_copy(vb, format::GgmlType::F32, {rows}, std::move(z2)).is_ok());
    }
  }
  const std::string p = temp_path("tiny-dream.gguf");
  EXPECT_TRUE(w.write(p).is_ok());
  return p;
}

TEST(DreamShift, ShiftedDecodingEqualsLladaRowsOneToTheLeft) {
  CHIMERA_REQUIRE_SHARED(shared);
  Tiny llada = load_tiny(shared);
  Tiny dream = load_tiny(shared, make_dream(shared));
  ASSERT_TRUE(llada.model && dream.model);
  EXPECT_EQ(dream.model->info().arch, "dream");
  EXPECT_TRUE(dream.model->info().is_diffusion);
  auto ds = models::diffusion_spec(*dream.model);
  ASSERT_TRUE(ds.is_ok());
  EXPECT_TRUE(ds->shift_logits);
  const int32_t mask = ds->mask_id;
  const int64_t P = (int64_t)llada.prompt.size(), n = 12, L = P + n, nv = llada.model->info().n_vocab;
  ThreadPool pool(2);
  // Same network: raw rows agree to float rounding (the dot-product order differs, which can flip
  // an F16 rounding of a matmul input: well inside the golden tolerance 0.005 x scale).
  std::vector<int32_t> seq = llada.prompt;
  seq.resize((size_t)L, mask);
  std::vector<float> a((size_t)(L * nv)), b(a.size());
  auto sa = llada.model->new_state(L), sb = dream.model->new_state(L);
  models::Context llada_ctx = llada.model->new_context(), dream_ctx = dream.model->new_context();
  ASSERT_TRUE(models::diffusion_forward(llada_ctx, *sa, seq.data(), 0, L, L, 0, L, a.data(), &pool).is_ok());
  ASSERT_TRUE(models::diffusion_forward(dream_ctx, *sb, seq.data(), 0, L, L, 0, L, b.data(), &pool).is_ok());
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  EXPECT_LT(d, 5e-3f);
  // Reference: LLaDA's exact loop, the prediction for position p read from row p - 1.
  std::vector<std::pair<int64_t, int32_t>> ref;
  std::mt19937_64 rng(0);
  for (int64_t s = 0; s < n; ++s) {
    ASSERT_TRUE(models::diffusion_forward(llada_ctx, *sa, seq.data(), 0, L, L, 0, L, a.data(), &pool).is_ok());
    double best = -1;
    std::pair<int64_t, int32_t> pick{-1, -1};
    for (int64_t p = P; p < L; ++p) {
      if (seq[(size_t)p] != mask) continue;
      auto c = runtime::choose_token(a.data() + (p - 1) * nv, (int32_t)nv, Remasking::kLowConfidence, 0, rng);
      if (c.confidence > best) best = c.confidence, pick = {p, c.token};
    }
    ref.push_back(pick);
    seq[(size_t)pick.first] = pick.second;
  }
  runtime::DiffusionGenerator gen(*dream.model, 256, &pool);
  runtime::GenerateOptions o;
  o.n_predict = n;
  o.stop_at_eog = false;
  o.sampling.temperature = 0;
  auto r = gen.generate(dream.prompt, o, [](int32_t) { return true; });
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(gen.last_commits().size(), ref.size());
  for (size_t s = 0; s < ref.size(); ++s) {
    EXPECT_EQ(gen.last_commits()[s].pos, ref[s].first) << "step " << s;
    EXPECT_EQ(gen.last_commits()[s].token, ref[s].second) << "step " << s;
  }
  // And the shifted order differs from the unshifted one (the test has teeth).
  runtime::DiffusionGenerator lg(*llada.model, 256, &pool);
  ASSERT_TRUE(lg.generate(llada.prompt, o, [](int32_t) { return true; }).is_ok());
  bool differs = false;
  for (size_t s = 0; s < ref.size(); ++s) differs |= lg.last_commits()[s].pos != ref[s].first;
  EXPECT_TRUE(differs);
}

TEST(DiffusionCache, SliceOverFreshKvIsBitIdenticalToFullPass) {
  CHIMERA_REQUIRE_SHARED(shared);
  Tiny t = load_tiny(shared);
  ASSERT_TRUE(t.model);
  auto spec = models::diffusion_spec(*t.model);
  const int64_t P = (int64_t)t.prompt.size(), L = P + 16, nv = t.model->info().n_vocab;
  std::vector<int32_t> seq = t.prompt;
  seq.resize((size_t)L, spec->mask_id);
  seq[(size_t)P + 3] = 42;
  ThreadPool pool(2);
  auto st = t.model->new_state(L);
  models::Context ctx = t.model->new_context();
  std::vector<float> full((size_t)(L * nv)), part((size_t)(8 * nv));
  ASSERT_TRUE(models::diffusion_forward(ctx, *st, seq.data(), 0, L, L, 0, L, full.data(), &pool).is_ok());
  // Dual-cache shape: positions [P, P+8) between cached prefix and suffix.
  ASSERT_TRUE(models::diffusion_forward(ctx, *st, seq.data() + P, P, 8, L, 0, 8, part.data(), &pool).is_ok());
  EXPECT_EQ(std::memcmp(part.data(), full.data() + P * nv, part.size() * 4), 0);
  // Prefix-cache shape: [P, L).
  std::vector<float> tail((size_t)((L - P) * nv));
  ASSERT_TRUE(
      models::diffusion_forward(ctx, *st, seq.data() + P, P, L - P, L, 0, L - P, tail.data(), &pool).is_ok());
  EXPECT_EQ(std::memcmp(tail.data(), full.data() + P * nv, tail.size() * 4), 0);
  // Bad ranges are errors.
  EXPECT_FALSE(models::diffusion_forward(ctx, *st, seq.data(), 0, L, L - 1, 0, 1, full.data(), &pool).is_ok());
  EXPECT_FALSE(models::diffusion_forward(ctx, *st, seq.data(), 0, 4, L, 2, 3, full.data(), &pool).is_ok());
}

std::vector<runtime::DiffusionCommit> run(models::Model& m, const std::vector<int32_t>& prompt,
                                          const runtime::GenerateOptions& o, runtime::DiffusionRunStats* rs = nullptr,
                                          std::vector<int32_t>* out = nullptr) {
  ThreadPool pool(2);
  runtime::DiffusionGenerator gen(m, 256, &pool);
  auto r = gen.generate(prompt, o, [&](int32_t t) {
    if (out) out->push_back(t);
    return true;
  });
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (rs) *rs = gen.last_run();
  return gen.last_commits();
}

runtime::GenerateOptions base_opts() {
  runtime::GenerateOptions o;
  o.n_predict = 32;
  o.stop_at_eog = false;
  o.sampling.temperature = 0;
  o.diffusion.steps = 32;
  o.diffusion.block_length = 8;
  return o;
}

TEST(DiffusionCache, RefreshEveryStepIsTheExactRun) {
  CHIMERA_REQUIRE_SHARED(shared);
  Tiny t = load_tiny(shared);
  ASSERT_TRUE(t.model);
  auto o = base_opts();
  runtime::DiffusionRunStats rs;
  std::vector<int32_t> exact_out, out;
  const auto exact = run(*t.model, t.prompt, o, &rs, &exact_out);
  EXPECT_EQ(rs.full_passes, 32);
  for (int mode = 0; mode < 2; ++mode) {
    auto c = o;
    (mode ? c.diffusion.dual_cache : c.diffusion.prefix_cache) = true;
    c.diffusion.cache_refresh = 1;
    out.clear();
    const auto got = run(*t.model, t.prompt, c, &rs, &out);
    EXPECT_EQ(out, exact_out) << "mode " << mode;
    EXPECT_EQ(rs.partial_passes, 0);
    // Without refresh: one full pass per block, the other steps on slices.
    c.diffusion.cache_refresh = 0;
    run(*t.model, t.prompt, c, &rs);
    EXPECT_EQ(rs.full_passes, 4);
    EXPECT_EQ(rs.partial_passes, 28);
    EXPECT_LT(rs.rows, 32 * rs.canvas);
  }
}

TEST(DiffusionGenerate, ThresholdGuidanceRemaskingAndStreaming) {
  CHIMERA_REQUIRE_SHARED(shared);
  Tiny t = load_tiny(shared);
  ASSERT_TRUE(t.model);
  auto o = base_opts();
  runtime::DiffusionRunStats rs;
  o.diffusion.threshold = 0.005;  // tiny random model: confidences are ~0.01
  std::vector<int32_t> out;
  run(*t.model, t.prompt, o, &rs, &out);
  EXPECT_EQ(out.size(), 32u);
  EXPECT_LT(rs.steps, 32);  // several tokens per step
  o.diffusion.threshold = 0;
  for (auto rm : {Remasking::kRandom, Remasking::kMargin, Remasking::kEntropy}) {
    o.diffusion.remasking = rm;
    out.clear();
    run(*t.model, t.prompt, o, &rs, &out);
    EXPECT_EQ(out.size(), 32u);
    EXPECT_EQ(rs.steps, 32);
  }
  o.diffusion.remasking = Remasking::kLowConfidence;
  o.diffusion.cfg_scale = 1.5;
  out.clear();
  run(*t.model, t.prompt, o, &rs, &out);
  EXPECT_EQ(out.size(), 32u);
  EXPECT_EQ(rs.full_passes, 64);  // two branches
  // Temperature with a fixed seed is reproducible.
  o.diffusion.cfg_scale = 0;
  o.sampling.temperature = 0.8f;
  std::vector<int32_t> a, b;
  run(*t.model, t.prompt, o, nullptr, &a);
  run(*t.model, t.prompt, o, nullptr, &b);
  EXPECT_EQ(a, b);
}

TEST(DiffusionGenerate, MakeGeneratorAndMultiTurnHistory) {
  CHIMERA_REQUIRE_SHARED(shared);
  Tiny t = load_tiny(shared);
  ASSERT_TRUE(t.model);
  ThreadPool pool(1);
  auto gen = runtime::make_generator(*t.model, 128, &pool);
  ASSERT_NE(dynamic_cast<runtime::DiffusionGenerator*>(gen.get()), nullptr);
  auto o = base_opts();
  o.n_predict = 8;
  o.diffusion.steps = 8;
  int n = 0;
  auto cb = [&](int32_t) { return ++n < 5; };  // the callback can stop the stream
  auto r = gen->generate(t.prompt, o, cb);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->n_generated, 5);
  EXPECT_EQ(gen->n_past(), (int64_t)t.prompt.size() + 5);
  r = gen->generate({5, 6}, o, [](int32_t) { return true; });
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(gen->n_past(), (int64_t)t.prompt.size() + 5 + 2 + 8);
  gen->reset();
  EXPECT_EQ(gen->n_past(), 0);
}

TEST(DiffusionGenerate, BadOptionsAreClearErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  Tiny t = load_tiny(shared);
  ASSERT_TRUE(t.model);
  ThreadPool pool(1);
  runtime::DiffusionGenerator gen(*t.model, 40, &pool);
  auto expect_error = [&](runtime::GenerateOptions o, const std::string& needle) {
    auto r = gen.generate(t.prompt, o, [](int32_t) { return true; });
    ASSERT_FALSE(r.is_ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  auto o = base_opts();
  o.n_predict = 16;
  o.diffusion.block_length = 5;
  expect_error(o, "--block-length 5 must divide");
  o.diffusion.block_length = 8;
  o.diffusion.steps = 3;
  expect_error(o, "--steps 3 must be a multiple of the number of blocks 2");
  o.diffusion.steps = 16;
  o.n_predict = 32;
  expect_error(o, "exceeds the context size 40");
  o.n_predict = 16;
  o.diffusion.threshold = 1.5;
  expect_error(o, "--threshold");
  // A causal model has no diffusion API.
  auto llama = models::load_model(shared + "/models/stories260K.gguf");
  ASSERT_TRUE(llama.is_ok());
  EXPECT_FALSE(models::diffusion_spec(**llama).is_ok());
  runtime::DiffusionGenerator bad(**llama, 64, &pool);
  EXPECT_FALSE(bad.generate({1, 2}, base_opts(), [](int32_t) { return true; }).is_ok());
}

}  // namespace
}  // namespace chimera::test
