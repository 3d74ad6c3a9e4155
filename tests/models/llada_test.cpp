// LLaDA golden cases (`tiny-llada*`, is_diffusion) under the golden README's
// protocol: the prompt-only non-causal forward matches the reference logits
// (tolerance × scale, 1 and 2 threads, through Model::forward and through
// diffusion_forward); every step of the reference unmasking, teacher-forced on
// the reference canvas, matches its logits row; and the free-running greedy
// low-confidence decoding (steps = block = n_gen, caches off) reproduces the
// reference `unmask_order` (position, token) exactly. The generic golden test
// skips these cases.
#include <algorithm>
#include <cmath>
#include <memory>

#include "golden_case.h"
#include "models/context.h"
#include "models/model.h"
#include "runtime/diffusion.h"
#include "runtime/diffusion_model.h"

namespace chimera::test {
namespace {

struct Step {
  int64_t pos;
  int32_t token;
  double prob;
};

struct LladaCase {
  GoldenCase gc;
  std::vector<Step> order;
  std::unique_ptr<models::Model> model;
};

// Loads the case (skips the test when the shared data is absent).
bool load_case(const std::string& name, LladaCase* c) {
  const std::string dir = shared_dir();
  if (dir.empty() || !load_golden(dir + "/golden", name, &c->gc)) return false;
  for (const auto& s : c->gc.meta["greedy"]["unmask_order"])
    c->order.push_back({s["pos"].get<int64_t>(), s["token"].get<int32_t>(), s["prob"].get<double>()});
  auto m = models::load_model(c->gc.model_path);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return false;
  c->model = std::move(m).value();
  return true;
}

float max_diff(const float* a, const float* ref, int64_t n) {
  float d = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::fabs(a[i] - ref[i]);
    d = std::isnan(e) ? INFINITY : std::max(d, e);
  }
  return d;
}

class LladaGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(LladaGolden, CaseIsADiffusionLlada) {
  CHIMERA_REQUIRE_SHARED(shared);
  LladaCase c;
  ASSERT_TRUE(load_case(GetParam(), &c));
  EXPECT_TRUE(c.gc.meta.value("is_diffusion", false));
  EXPECT_TRUE(c.model->info().is_diffusion);
  EXPECT_EQ(c.model->info().n_vocab, c.gc.n_vocab);
  auto spec = models::diffusion_spec(*c.model);
  ASSERT_TRUE(spec.is_ok());
  EXPECT_EQ(spec->mask_id, c.gc.n_vocab - 1);  // README: the mask token is the last id
  EXPECT_FALSE(spec->shift_logits);
}

TEST_P(LladaGolden, PromptLogitsMatch) {
  CHIMERA_REQUIRE_SHARED(shared);
  LladaCase c;
  ASSERT_TRUE(load_case(GetParam(), &c));
  const GoldenCase& gc = c.gc;
  const int64_t np = (int64_t)gc.prompt.size(), nv = gc.n_vocab;
  const float bound = gc.tolerance * gc.scale();
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<float> a((size_t)(np * nv)), b(a.size());
    models::Context mctx = c.model->new_context();
    auto st = mctx.new_state(np);
    ASSERT_TRUE(mctx.forward(*st, gc.prompt.data(), np, models::Logits::kAll, a.data(), &pool).is_ok());
    auto st2 = mctx.new_state(np);
    models::Context ctx = c.model->new_context();
    ASSERT_TRUE(models::diffusion_forward(ctx, *st2, gc.prompt.data(), 0, np, np, 0, np, b.data(), &pool).is_ok());
    const float d = max_diff(a.data(), gc.prompt_logits.data(), np * nv);
    EXPECT_LE(d, bound) << gc.name << " threads=" << threads;
    EXPECT_EQ(max_diff(a.data(), b.data(), np * nv), 0.f) << "forward and diffusion_forward differ";
    // The same with an f32 KV cache (the default above is f16): the reference's own.
    models::Context fctx = c.model->new_context();
    ASSERT_TRUE(fctx.set_kv_types({kernels::KvType::kF32, kernels::KvType::kF32}).is_ok());
    auto st3 = fctx.new_state(np);
    ASSERT_TRUE(fctx.forward(*st3, gc.prompt.data(), np, models::Logits::kAll, b.data(), &pool).is_ok());
    const float d32 = max_diff(b.data(), gc.prompt_logits.data(), np * nv);
    EXPECT_LE(d32, bound) << gc.name << " f32 cache, threads=" << threads;
    EXPECT_NE(max_diff(a.data(), b.data(), np * nv), 0.f) << "the default (f16) cache changed nothing: is it used?";
    std::printf("[ %s ] prompt logits max|diff| %.3g (%.2e of scale; f32 cache %.3g, %.2e) (bound %.3g), threads %d\n",
                gc.name.c_str(), d, d / gc.scale(), d32, d32 / gc.scale(), bound, threads);
  }
}

TEST_P(LladaGolden, TeacherForcedStepLogitsMatch) {
  CHIMERA_REQUIRE_SHARED(shared);
  LladaCase c;
  ASSERT_TRUE(load_case(GetParam(), &c));
  const GoldenCase& gc = c.gc;
  const int64_t np = (int64_t)gc.prompt.size(), ng = (int64_t)c.order.size(), nv = gc.n_vocab, L = np + ng;
  auto spec = models::diffusion_spec(*c.model);
  ASSERT_TRUE(spec.is_ok());
  std::vector<int32_t> seq = gc.prompt;
  seq.resize((size_t)L, spec->mask_id);
  ThreadPool pool(2);
  auto st = c.model->new_state(L);
  models::Context ctx = c.model->new_context();
  std::vector<float> row((size_t)nv);
  float worst = 0;
  for (int64_t s = 0; s < ng; ++s) {
    const int64_t pos = c.order[(size_t)s].pos;
    ASSERT_TRUE(models::diffusion_forward(ctx, *st, seq.data(), 0, L, L, pos, 1, row.data(), &pool).is_ok());
    worst = std::max(worst, max_diff(row.data(), gc.gen_logits.data() + s * nv, nv));
    seq[(size_t)pos] = c.order[(size_t)s].token;
  }
  EXPECT_LE(worst, gc.tolerance * gc.scale()) << gc.name;
  std::printf("[ %s ] teacher-forced step logits max|diff| %.3g (bound %.3g)\n", gc.name.c_str(), worst,
              gc.tolerance * gc.scale());
}

TEST_P(LladaGolden, GreedyUnmaskOrderMatchesExactly) {
  CHIMERA_REQUIRE_SHARED(shared);
  LladaCase c;
  ASSERT_TRUE(load_case(GetParam(), &c));
  const GoldenCase& gc = c.gc;
  const int64_t ng = (int64_t)c.order.size();
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    runtime::DiffusionGenerator gen(*c.model, 512, &pool);
    runtime::GenerateOptions o;
    o.n_predict = ng;
    o.stop_at_eog = false;
    o.sampling.temperature = 0;
    o.diffusion.steps = ng;
    o.diffusion.block_length = ng;
    std::vector<int32_t> out;
    auto r = gen.generate(gc.prompt, o, [&](int32_t t) {
      out.push_back(t);
      return true;
    });
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(out, gc.greedy) << gc.name;
    const auto& commits = gen.last_commits();
    ASSERT_EQ((int64_t)commits.size(), ng);
    for (int64_t s = 0; s < ng; ++s) {
      EXPECT_EQ(commits[(size_t)s].pos, c.order[(size_t)s].pos) << gc.name << " step " << s;
      EXPECT_EQ(commits[(size_t)s].token, c.order[(size_t)s].token) << gc.name << " step " << s;
      EXPECT_NEAR(commits[(size_t)s].confidence, c.order[(size_t)s].prob, 1e-3 * c.order[(size_t)s].prob + 1e-6);
    }
    EXPECT_EQ(gen.last_run().full_passes, ng);
    EXPECT_EQ(gen.last_run().partial_passes, 0);
  }
}

std::vector<std::string> llada_cases() {
  std::vector<std::string> v;
  const std::string dir = shared_dir();
  for (const auto& name : list_golden_cases(dir.empty() ? dir : dir + "/golden")) {
    std::ifstream f(dir + "/golden/" + name + ".json");
    auto meta = nlohmann::json::parse(f, nullptr, false);
    if (!meta.is_discarded() && meta.value("is_diffusion", false) && meta.value("arch", "") == "llada")
      v.push_back(name);
  }
  if (v.empty()) v.push_back("tiny-llada");  // skipped without shared data
  return v;
}

INSTANTIATE_TEST_SUITE_P(Golden, LladaGolden, ::testing::ValuesIn(llada_cases()), [](const auto& info) {
  std::string s = info.param;
  for (char& ch : s)
    if (!isalnum((unsigned char)ch)) ch = '_';
  return s;
});

}  // namespace
}  // namespace chimera::test
