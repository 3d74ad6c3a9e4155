// Golden tests: every registered family against the reference logits in
// ../shared/golden, under the README's protocol — prompt rows plus
// teacher-forced generation rows, |engine - reference| <= tolerance * scale on
// the stored columns — in batch, step and chunk modes with 1 and 2 threads,
// and free-running greedy decoding equal to the reference tokens (a flip is
// accepted only where the reference margin is a numerical tie).
// Cases whose architecture or tensor types are not implemented yet are
// reported as skipped, never as passed.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "golden_case.h"
#include "kernels/ops.h"
#include "models/model.h"

namespace chimera::test {
namespace {

std::string golden_dir() {
  std::string s = shared_dir();
  return s.empty() ? s : s + "/golden";
}

bool arch_registered(const std::string& arch) {
  for (const auto& e : models::model_registry())
    if (arch == e.arch) return true;
  return false;
}

struct Fixture {
  GoldenCase gc;
  std::unique_ptr<models::Model> model;
  std::string skip;  // non-empty: reason to skip
};

// Loads (once per case) the reference and the model.
Fixture& fixture(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Fixture>> cache;
  auto& slot = cache[name];
  if (slot) return *slot;
  slot = std::make_unique<Fixture>();
  Fixture& f = *slot;
  if (!load_golden(golden_dir(), name, &f.gc)) {
    f.skip = "cannot read case";
    return f;
  }
  if (f.gc.meta.value("is_diffusion", false)) {
    f.skip = "diffusion case (own test)";
    return f;
  }
  if (!arch_registered(f.gc.arch)) {
    f.skip = "architecture '" + f.gc.arch + "' is not implemented yet";
    return f;
  }
  if (f.gc.model_path.size() < 5 || f.gc.model_path.substr(f.gc.model_path.size() - 5) != ".gguf") {
    f.skip = "model is not a GGUF file (needs convert)";
    return f;
  }
  auto m = models::load_model(f.gc.model_path);
  if (!m.is_ok()) {
    if (m.status().code() == StatusCode::kUnsupported) {
      f.skip = "not supported yet: " + m.status().message();
      return f;
    }
    ADD_FAILURE() << "loading " << f.gc.model_path << ": " << m.status().message();
    f.skip = "load failed";
    return f;
  }
  f.model = std::move(m).value();
  return f;
}

// Runs prompt + teacher-forced greedy tokens with `chunk` tokens per forward
// call (0 = all at once); returns all rows [n_prompt + n_gen - 1][n_vocab].
std::vector<float> run_rows(models::Model& m, const GoldenCase& gc, int64_t chunk, ThreadPool* pool) {
  std::vector<int32_t> seq = gc.prompt;
  seq.insert(seq.end(), gc.greedy.begin(), gc.greedy.end() - 1);
  const int64_t n = (int64_t)seq.size(), nv = m.info().n_vocab;
  auto st = m.new_state(std::max<int64_t>(512, n + 8));
  std::vector<float> rows((size_t)(n * nv));
  if (chunk <= 0) chunk = n;
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t c = std::min(chunk, n - i);
    Status s = m.forward(*st, seq.data() + i, c, models::Logits::kAll, rows.data() + i * nv, pool);
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  return rows;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, LogitsMatchInAllModesAndThreadCounts) {
  CHIMERA_REQUIRE_SHARED(shared);
  Fixture& f = fixture(GetParam());
  if (!f.skip.empty()) GTEST_SKIP() << f.skip;
  const GoldenCase& gc = f.gc;
  models::Model& m = *f.model;
  ASSERT_EQ(m.info().n_vocab, gc.n_vocab);
  const float bound = gc.tolerance * gc.scale();
  const int64_t np = (int64_t)gc.prompt.size(), ng = (int64_t)gc.greedy.size(), nc = gc.n_cols(), nv = gc.n_vocab;
  std::vector<float> first;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int64_t chunk : {0, 1, 3}) {
      SCOPED_TRACE("threads=" + std::to_string(threads) + " chunk=" + std::to_string(chunk));
      std::vector<float> rows = run_rows(m, gc, chunk, &pool);
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
      EXPECT_LE(worst, bound) << gc.name << ": max |diff| " << worst << " at row " << worst_row << " (bound "
                              << bound << ")";
      if (first.empty()) {
        first = rows;
      } else {
        // Same code path for every mode and thread count: results agree closely.
        float d = 0;
        for (size_t k = 0; k < rows.size(); ++k) d = std::max(d, std::fabs(rows[k] - first[k]));
        EXPECT_LE(d, 1e-4f * gc.scale()) << "modes/threads disagree";
      }
    }
  }
}

TEST_P(GoldenTest, GreedyDecodingMatches) {
  CHIMERA_REQUIRE_SHARED(shared);
  Fixture& f = fixture(GetParam());
  if (!f.skip.empty()) GTEST_SKIP() << f.skip;
  const GoldenCase& gc = f.gc;
  models::Model& m = *f.model;
  ThreadPool pool(2);
  const int64_t nv = m.info().n_vocab, ng = (int64_t)gc.greedy.size();
  auto st = m.new_state(std::max<int64_t>(512, (int64_t)gc.prompt.size() + ng + 8));
  std::vector<float> logits((size_t)nv);
  ASSERT_TRUE(m.forward(*st, gc.prompt.data(), (int64_t)gc.prompt.size(), models::Logits::kLast, logits.data(), &pool).is_ok());
  const float tie = gc.tolerance * gc.scale();
  int flips = 0;
  for (int64_t j = 0; j < ng; ++j) {
    int32_t tok = (int32_t)kernels::argmax(logits.data(), nv);
    if (tok != gc.greedy[(size_t)j]) {
      ASSERT_LT(gc.gen_margin[(size_t)j], tie)
          << gc.name << ": greedy token " << j << " is " << tok << ", reference " << gc.greedy[(size_t)j]
          << " (reference margin " << gc.gen_margin[(size_t)j] << ")";
      ++flips;
      tok = gc.greedy[(size_t)j];
    }
    if (j + 1 < ng) {
      ASSERT_TRUE(m.forward(*st, &tok, 1, models::Logits::kLast, logits.data(), &pool).is_ok());
    }
  }
  EXPECT_LE(flips, 1) << "more than one near-tie flip";
}

std::vector<std::string> cases() {
  auto v = list_golden_cases(golden_dir());
  if (v.empty()) v.push_back("no-shared-data");
  return v;
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
