// Golden tests: every registered family against the reference logits in
// ../shared/golden, under the README's protocol — prompt rows plus
// teacher-forced generation rows, |engine - reference| <= tolerance * scale on
// the stored columns — in batch, step and chunk modes with 1 and 2 threads,
// and free-running greedy decoding equal to the reference tokens (a flip is
// accepted only where the reference margin is a numerical tie); with the
// default (f16) KV cache, except the few cases pinned to f32 (case_context),
// and each typed cache against the f32 one (TypedKvCacheStaysWithinItsBudget).
// Every case must load and run: an unregistered architecture or an
// unsupported tensor type is a failure. Cases run by their own tests (diffusion
// LLaDA, the Hugging Face phi4flash-a) are not instantiated here; a
// placeholder skips only when the shared data is absent.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "golden_case.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "models/context.h"
#include "models/model.h"

namespace chimera::test {
namespace {

std::string golden_dir() {
  std::string s = shared_dir();
  return s.empty() ? s : s + "/golden";
}

// The long cases (>= 300 prompt tokens) kept in this repository, made with
// libllama by scripts/llamacpp_refs/long_case.cpp; their models live in the
// shared folder. Their test parameter is "long/NAME".
std::string long_dir() { return std::string(CHIMERA_SOURCE_DIR) + "/tests/data/golden_long"; }
constexpr const char* kLongPrefix = "long/";

bool arch_registered(const std::string& arch) {
  for (const auto& e : models::model_registry())
    if (arch == e.arch) return true;
  return false;
}

// How the golden set is divided between the tests: the generic cases run
// here; the diffusion LLaDA cases in tests/models/llada_test.cpp; phi4flash-a
// (a Hugging Face folder, converted first) in tests/models/phi4flash_test.cpp.
enum class CaseOwner { kGeneric, kLlada, kPhi4Flash, kNone };

CaseOwner owner_of(const GoldenCase& gc) {
  if (gc.meta.value("is_diffusion", false)) return gc.arch == "llada" ? CaseOwner::kLlada : CaseOwner::kNone;
  if (gc.name == "phi4flash-a") return CaseOwner::kPhi4Flash;
  const std::string& p = gc.model_path;
  return p.size() >= 5 && p.substr(p.size() - 5) == ".gguf" ? CaseOwner::kGeneric : CaseOwner::kNone;
}

struct Fixture {
  GoldenCase gc;
  std::unique_ptr<models::Model> model;
  std::string error;  // non-empty: why the case cannot run (a failure: every case here must run)
};

// Loads (once per case) the reference and the model. Every architecture and
// weight type of the golden set is one the README lists, so an unknown
// architecture or an unsupported type is a failure, not a skip.
Fixture& fixture(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Fixture>> cache;
  auto& slot = cache[name];
  if (slot) return *slot;
  slot = std::make_unique<Fixture>();
  Fixture& f = *slot;
  const bool is_long = name.rfind(kLongPrefix, 0) == 0;
  const std::string dir = is_long ? long_dir() : golden_dir(), base = is_long ? name.substr(5) : name;
  if (!load_golden(dir, base, &f.gc)) {
    f.error = "cannot read case " + dir + "/" + base + ".json";
    return f;
  }
  if (!arch_registered(f.gc.arch)) {
    f.error = "architecture '" + f.gc.arch + "' is not registered";
    return f;
  }
  auto m = models::load_model(f.gc.model_path);
  if (!m.is_ok()) {
    f.error = "loading " + f.gc.model_path + ": " + m.status().message();
    return f;
  }
  f.model = std::move(m).value();
  return f;
}

// Runs prompt + teacher-forced greedy tokens with `chunk` tokens per forward
// call (0 = all at once); returns all rows [n_prompt + n_gen - 1][n_vocab].
std::vector<float> run_rows(models::Context& ctx, const GoldenCase& gc, int64_t chunk, ThreadPool* pool) {
  std::vector<int32_t> seq = gc.prompt;
  seq.insert(seq.end(), gc.greedy.begin(), gc.greedy.end() - 1);
  const int64_t n = (int64_t)seq.size(), nv = ctx.model().info().n_vocab;
  auto st = ctx.new_state(std::max<int64_t>(512, n + 8));
  std::vector<float> rows((size_t)(n * nv));
  if (chunk <= 0) chunk = n;
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t c = std::min(chunk, n - i);
    Status s = ctx.forward(*st, seq.data() + i, c, models::Logits::kAll, rows.data() + i * nv, pool);
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  return rows;
}

// The context the reference comparisons run on: the default KV cache (f16,
// layers::kDefaultKvCacheTypes) except for the cases where rounding K / V to
// f16 moves the logits past the case's tolerance against its reference, which
// was made with an f32 cache (the llama.cpp cases' "kv_type": "f32"). Those
// are pinned to f32. Measured max |engine - reference| / scale, f32 cache vs
// f16 cache (TypedKvCacheStaysWithinItsBudget prints it for every case):
//   quant-llama-Q6_K  3.6e-7 vs 3.19e-2 (tolerance 3e-2; large keys)
//   stories260K-bos   5.6e-7 vs 1.06e-3 (tolerance 1e-3)
//   tiny-bitnet-long  3.2e-7 vs 2.20e-2 (tolerance 3e-2), but free-running
//                     greedy decoding meets two near-tie flips (one allowed)
// Every other case passes every test here with the f16 default.
bool pinned_to_f32(const GoldenCase& gc) {
  return gc.name == "quant-llama-Q6_K" || gc.name == "stories260K-bos" || gc.name == "tiny-bitnet-long";
}

models::Context case_context(const models::Model& m, const GoldenCase& gc) {
  models::Context ctx = m.new_context();
  if (pinned_to_f32(gc)) {
    const Status s = ctx.set_kv_types({kernels::KvType::kF32, kernels::KvType::kF32});
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  return ctx;
}

std::vector<float> run_rows(const models::Model& m, const GoldenCase& gc, int64_t chunk, ThreadPool* pool) {
  models::Context ctx = case_context(m, gc);
  return run_rows(ctx, gc, chunk, pool);
}

// The largest |engine - reference| of `rows` over the prompt rows and the
// teacher-forced gen rows (stored columns and every reference top-10 entry);
// NaN counts as infinite.
float reference_error(const GoldenCase& gc, const std::vector<float>& rows, int64_t* worst_row_out = nullptr) {
  const int64_t np = (int64_t)gc.prompt.size(), ng = (int64_t)gc.greedy.size(), nc = gc.n_cols(), nv = gc.n_vocab;
  float worst = 0;
  int64_t worst_row = -1;
  auto cmp = [&](int64_t row, const float* ref) {
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t col = gc.columns.empty() ? c : gc.columns[(size_t)c];
      const float d = std::fabs(rows[(size_t)(row * nv + col)] - ref[c]);
      if (!(d <= worst)) {
        worst = std::isnan(d) ? INFINITY : d;
        worst_row = row;
      }
    }
  };
  for (int64_t i = 0; i < np; ++i) cmp(i, gc.prompt_logits.data() + i * nc);
  for (int64_t j = 1; j < ng; ++j) cmp(np - 1 + j, gc.gen_logits.data() + j * nc);
  // The reference top-10 of every row, by full-vocabulary id.
  if (!gc.top10.empty()) {
    for (int64_t r = 0; r < (int64_t)gc.top10.size() && r < np + ng; ++r) {
      if (r == np) continue;  // gen row 0 is the last prompt row
      const int64_t row = r < np ? r : r - 1;
      for (const auto& [id, ref] : gc.top10[(size_t)r]) {
        const float d = std::fabs(rows[(size_t)(row * nv + id)] - ref);
        if (!(d <= worst)) {
          worst = std::isnan(d) ? INFINITY : d;
          worst_row = row;
        }
      }
    }
  }
  if (worst_row_out) *worst_row_out = worst_row;
  return worst;
}

// Prompt rows and teacher-forced gen rows of `rows` against the reference:
// |engine - reference| <= tolerance * scale on the stored columns.
void expect_rows_match_reference(const GoldenCase& gc, const std::vector<float>& rows) {
  const float bound = gc.tolerance * gc.scale();
  if (!gc.top10.empty()) {
    EXPECT_EQ((int64_t)gc.top10.size(), (int64_t)(gc.prompt.size() + gc.greedy.size())) << gc.name << ": top10 rows";
  }
  int64_t worst_row = -1;
  const float worst = reference_error(gc, rows, &worst_row);
  EXPECT_LE(worst, bound) << gc.name << ": max |diff| " << worst << " at row " << worst_row << " (bound " << bound
                          << ")";
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, LogitsMatchInAllModesAndThreadCounts) {
  CHIMERA_REQUIRE_SHARED(shared);
  Fixture& f = fixture(GetParam());
  ASSERT_TRUE(f.error.empty()) << f.error;
  const GoldenCase& gc = f.gc;
  models::Model& m = *f.model;
  ASSERT_EQ(m.info().n_vocab, gc.n_vocab);
  std::vector<float> first;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    // 100: chunks that straddle the SSD prefill's 128-token chunks on the long cases.
    for (int64_t chunk : {0, 1, 3, 100}) {
      SCOPED_TRACE("threads=" + std::to_string(threads) + " chunk=" + std::to_string(chunk));
      std::vector<float> rows = run_rows(m, gc, chunk, &pool);
      expect_rows_match_reference(gc, rows);
      if (first.empty()) {
        first = rows;
      } else {
        // Same code path for every mode and thread count: results agree closely.
        // Except on SSD models with prompts of >= 128 tokens: batch mode runs the
        // chunked SSD prefill, step mode the sequential scan — two algorithms,
        // measured 2.5e-4 (mamba2) and 5.8e-4 (granitehybrid) of scale apart on
        // the 320-token cases; the bound is a few times that.
        const bool ssd = (gc.arch == "mamba2" || gc.arch == "granitehybrid") && gc.prompt.size() >= 128;
        float d = 0;
        for (size_t k = 0; k < rows.size(); ++k) d = std::max(d, std::fabs(rows[k] - first[k]));
        EXPECT_LE(d, (ssd ? 1.5e-3f : 1e-4f) * gc.scale()) << "modes/threads disagree";
      }
    }
  }
}

TEST_P(GoldenTest, GreedyDecodingMatches) {
  CHIMERA_REQUIRE_SHARED(shared);
  Fixture& f = fixture(GetParam());
  ASSERT_TRUE(f.error.empty()) << f.error;
  const GoldenCase& gc = f.gc;
  models::Model& m = *f.model;
  ThreadPool pool(2);
  const int64_t nv = m.info().n_vocab, ng = (int64_t)gc.greedy.size();
  models::Context ctx = case_context(m, gc);
  auto st = ctx.new_state(std::max<int64_t>(512, (int64_t)gc.prompt.size() + ng + 8));
  std::vector<float> logits((size_t)nv);
  ASSERT_TRUE(ctx.forward(*st, gc.prompt.data(), (int64_t)gc.prompt.size(), models::Logits::kLast, logits.data(), &pool).is_ok());
  const float tie = gc.tolerance * gc.scale();
  int flips = 0;
  for (int64_t j = 0; j < ng; ++j) {
    int32_t tok = (int32_t)kernels::argmax(logits.data(), nv);
    if (tok != gc.greedy[(size_t)j]) {
      ASSERT_LT(gc.gen_margin[(size_t)j], tie)
          << gc.name << ": greedy token " << j << " is " << tok << ", reference " << gc.greedy[(size_t)j]
          << " (reference margin " << gc.gen_margin[(size_t)j] << ")";
      ++flips;
      std::printf("%s: greedy token %lld flipped (%d, reference %d, reference margin %g, tie %g)\n", gc.name.c_str(),
                  (long long)j, tok, gc.greedy[(size_t)j], gc.gen_margin[(size_t)j], tie);
      tok = gc.greedy[(size_t)j];
    }
    if (j + 1 < ng) {
      ASSERT_TRUE(ctx.forward(*st, &tok, 1, models::Logits::kLast, logits.data(), &pool).is_ok());
    }
  }
  // Each flip is a near tie of the reference (asserted above). Up to two: the
  // x16 Q6_K order (session 15; one rounding per super-block, not llama.cpp's
  // eight lanes) flips quant-llama-Q6_K's two closest ties, tokens 7 and 11
  // (reference margins 0.016 and 0.026, tie 0.14); the other cases flip at
  // most one.
  EXPECT_LE(flips, 2) << "more than two near-tie flips";
}

// The KV cache types on every case whose family reads typed caches. The
// tests above run the default (layers::kDefaultKvCacheTypes: f16) against the
// references, which were made with an f32 cache (llama.cpp's cases say
// "kv_type": "f32"; the PyTorch ones are fp32 throughout). Here the f32
// cache is pinned explicitly and each typed cache is held to a budget against
// chimera's own f32-cache rows, in units of the case's logit scale:
//   f16:  worst 1.06e-3 on f32/f16-weight cases (stories260K-bos), 3.6e-2 on
//         the quantized quant-llama cases (their keys are large, so rounding
//         K moves the scores most); bounds 2e-3 and 5e-2;
//   q8_0: worst 3.9e-2 on quant-llama (Q6_K), the only cases whose heads are
//         multiples of 32; bound 8e-2 (5e-2 for unquantized weights, no
//         golden case measures it).
// Batch and step modes store the same rounded rows, so they still agree as
// closely as with f32. Printed: the change ("[ kv TYPE ]") and both caches'
// distance to the reference ("[ kv ref ]", the table in docs/PERFORMANCE.md).
TEST_P(GoldenTest, TypedKvCacheStaysWithinItsBudget) {
  CHIMERA_REQUIRE_SHARED(shared);
  Fixture& f = fixture(GetParam());
  ASSERT_TRUE(f.error.empty()) << f.error;
  const GoldenCase& gc = f.gc;
  models::Model& m = *f.model;
  bool has_kv = false;
  for (const auto& sp : m.state_specs()) has_kv |= std::holds_alternative<layers::KvSpec>(sp);
  // Every family of the generic cases reads typed caches, so the tests above
  // really run the f16 default wherever there is a KV cache.
  EXPECT_EQ(m.new_context().kv_types(), layers::kDefaultKvCacheTypes) << gc.name;
  ThreadPool pool(2);
  models::Context f32_ctx = m.new_context();
  ASSERT_TRUE(f32_ctx.set_kv_types({kernels::KvType::kF32, kernels::KvType::kF32}).is_ok());
  const std::vector<float> f32_rows = run_rows(f32_ctx, gc, 0, &pool);
  const float f32_ref = reference_error(gc, f32_rows);
  const bool quantized = gc.tolerance >= 0.01f;
  for (kernels::KvType type : {kernels::KvType::kF16, kernels::KvType::kQ8_0}) {
    const char* tn = kernels::kv_type_name(type);
    if (!has_kv || !m.accepts_kv_types({type, type})) {
      std::printf("[ kv %s ] %s: not used (%s)\n", tn, gc.name.c_str(),
                  !has_kv ? "no KV layers" : "not accepted by this model");
      continue;
    }
    models::Context ctx = m.new_context();
    ASSERT_TRUE(ctx.set_kv_types({type, type}).is_ok());
    const std::vector<float> batch = run_rows(ctx, gc, 0, &pool), step = run_rows(ctx, gc, 1, &pool);
    float worst = 0, modes = 0;
    for (size_t k = 0; k < batch.size(); ++k) {
      worst = std::max({worst, std::fabs(batch[k] - f32_rows[k]), std::fabs(step[k] - f32_rows[k])});
      modes = std::max(modes, std::fabs(batch[k] - step[k]));
    }
    const float budget =
        (type == kernels::KvType::kF16 ? (quantized ? 5e-2f : 2e-3f) : (quantized ? 8e-2f : 5e-2f)) * gc.scale();
    EXPECT_GT(worst, 0.f) << tn << ": the typed cache changed nothing: is it used?";
    EXPECT_LE(worst, budget) << gc.name << ": " << tn << " KV cache moved the logits by " << worst;
    // As in LogitsMatchInAllModesAndThreadCounts: SSD models with long prompts run two algorithms.
    const bool ssd = (gc.arch == "mamba2" || gc.arch == "granitehybrid") && gc.prompt.size() >= 128;
    EXPECT_LE(modes, (ssd ? 1.5e-3f : 1e-4f) * gc.scale()) << gc.name << ": batch and step disagree with " << tn;
    std::printf("[ kv %s ] %s: max |%s - f32 cache| = %.3g (%.2e of scale; budget %.0e)\n", tn, gc.name.c_str(), tn,
                worst, worst / gc.scale(), budget / gc.scale());
    if (type == kernels::KvType::kF16)
      std::printf("[ kv ref ] %s: max |engine - reference| / scale: f32 cache %.3e, f16 cache %.3e (tolerance %g)\n",
                  gc.name.c_str(), f32_ref / gc.scale(), reference_error(gc, batch) / gc.scale(), gc.tolerance);
  }
}

// Every instruction set the CPU runs (the tests above use the best one):
// the model is loaded under each, so the weights are repacked for that ISA's
// kernels where they declare a layout, and batch and step modes match the
// reference. The ISA levels exercised are printed.
TEST_P(GoldenTest, LogitsMatchAtEveryIsa) {
  CHIMERA_REQUIRE_SHARED(shared);
  Fixture& f = fixture(GetParam());
  ASSERT_TRUE(f.error.empty()) << f.error;
  const GoldenCase& gc = f.gc;
  ThreadPool pool(2);
  std::string ran;
  for (kernels::Isa isa : kernels::available_isas()) {
    if (isa == kernels::best_isa()) continue;  // LogitsMatchInAllModesAndThreadCounts
    SCOPED_TRACE(std::string("isa=") + kernels::isa_name(isa));
    kernels::ScopedIsa scoped(isa);
    auto m = models::load_model(gc.model_path);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    for (int64_t chunk : {0, 1}) {
      SCOPED_TRACE("chunk=" + std::to_string(chunk));
      expect_rows_match_reference(gc, run_rows(**m, gc, chunk, &pool));
    }
    ran += std::string(ran.empty() ? "" : ", ") + kernels::isa_name(isa);
  }
  std::printf("[ isa ] %s: also ran at %s (best: %s)\n", gc.name.c_str(), ran.empty() ? "none" : ran.c_str(),
              kernels::isa_name(kernels::best_isa()));
}

// The generic cases; without shared data one placeholder that skips.
std::vector<std::string> cases() {
  std::vector<std::string> v;
  for (const auto& name : list_golden_cases(golden_dir())) {
    GoldenCase gc;
    // An unreadable case stays in: its tests fail naming it.
    if (!load_golden(golden_dir(), name, &gc) || owner_of(gc) == CaseOwner::kGeneric) v.push_back(name);
  }
  if (v.empty()) v.push_back("no-shared-data");
  for (const auto& name : list_golden_cases(long_dir())) v.push_back(kLongPrefix + name);
  return v;
}

// Every case of the golden set is run by some test (none is left out silently).
TEST(GoldenSet, EveryCaseHasATest) {
  CHIMERA_REQUIRE_SHARED(shared);
  const auto names = list_golden_cases(golden_dir());
  EXPECT_GE(names.size(), 20u) << "golden set looks truncated";
  std::map<CaseOwner, int> counts;
  for (const auto& name : names) {
    GoldenCase gc;
    ASSERT_TRUE(load_golden(golden_dir(), name, &gc)) << name;
    const CaseOwner o = owner_of(gc);
    EXPECT_NE(o, CaseOwner::kNone) << name << " (arch " << gc.arch << ", model " << gc.model_path
                                   << ") is run by no test";
    ++counts[o];
  }
  EXPECT_GE(counts[CaseOwner::kLlada], 1);
  // The long (>= 300-token) llama.cpp cases of this repository: llama, mamba2, granitehybrid.
  std::set<std::string> long_archs;
  for (const auto& name : list_golden_cases(long_dir())) {
    GoldenCase gc;
    ASSERT_TRUE(load_golden(long_dir(), name, &gc)) << name;
    EXPECT_GE(gc.prompt.size(), 300u) << name;
    long_archs.insert(gc.arch);
  }
  EXPECT_EQ(long_archs, (std::set<std::string>{"granitehybrid", "llama", "mamba2"}));
  EXPECT_EQ(counts[CaseOwner::kPhi4Flash], 1);
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (!isalnum((unsigned char)ch)) ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace chimera::test
