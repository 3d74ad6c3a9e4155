// Golden test for Phi-4-mini-flash (`phi4flash-a`): the case's model is a
// Hugging Face folder, so this test converts it with the library (F32, to a
// temp file), loads it, and compares prompt logits, teacher-forced gen logits
// and the turn2 logits (a second turn on the same state) on the stored
// logits_columns, tolerance × scale, in batch / step / chunk modes with 1 and
// 2 threads. A last-row-only run (the cross-decoder pruning path) and free
// greedy decoding (near-ties within the tolerance accepted) are checked too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/thread_pool.h"
#include "format/hf/hf_convert.h"
#include "models/golden_case.h"
#include "models/model.h"

namespace chimera {
namespace {

struct P4Fixture {
  test::GoldenCase gc;
  std::vector<int32_t> turn2;
  std::vector<float> turn2_logits;
  std::unique_ptr<models::Model> model;
  std::string skip;
};

P4Fixture& fixture() {
  static P4Fixture f = [] {
    P4Fixture f;
    const std::string shared = test::shared_dir();
    if (shared.empty()) {
      f.skip = "no ../shared";
      return f;
    }
    const std::string gdir = shared + "/golden";
    if (!test::load_golden(gdir, "phi4flash-a", &f.gc)) {
      f.skip = "no phi4flash-a case";
      return f;
    }
    f.turn2 = f.gc.meta["turn2"]["tokens"].get<std::vector<int32_t>>();
    f.turn2_logits = test::read_f32(gdir + "/" + f.gc.meta["turn2"]["logits_file"].get<std::string>());
    const std::string out = test::temp_path("phi4flash-a.gguf");
    format::hf::ConvertOptions o;
    o.out_type = "f32";
    Status s = format::hf::convert(f.gc.model_path, out, o);
    if (!s) {
      ADD_FAILURE() << "convert: " << s.message();
      f.skip = "convert failed";
      return f;
    }
    auto m = models::load_model(out);
    std::filesystem::remove(out);
    if (!m) {
      ADD_FAILURE() << "load: " << m.status().message();
      f.skip = "load failed";
      return f;
    }
    f.model = std::move(m).value();
    return f;
  }();
  return f;
}

float scale_of(const P4Fixture& f) {
  float s = f.gc.scale();
  for (float v : f.turn2_logits) s = std::max(s, std::fabs(v));
  return s;
}

TEST(Phi4FlashGolden, PromptGenAndTurn2LogitsInAllModes) {
  P4Fixture& f = fixture();
  if (!f.skip.empty()) GTEST_SKIP() << f.skip;
  const test::GoldenCase& gc = f.gc;
  models::Model& m = *f.model;
  ASSERT_EQ(m.info().n_vocab, gc.n_vocab);
  std::vector<int32_t> seq = gc.prompt;
  seq.insert(seq.end(), gc.greedy.begin(), gc.greedy.end());
  seq.insert(seq.end(), f.turn2.begin(), f.turn2.end());
  const int64_t n = (int64_t)seq.size(), nv = gc.n_vocab, nc = gc.n_cols();
  const int64_t np = (int64_t)gc.prompt.size(), ng = (int64_t)gc.greedy.size();
  const float bound = gc.tolerance * scale_of(f);
  std::vector<float> first;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int64_t chunk : {0, 1, 3}) {
      SCOPED_TRACE("threads=" + std::to_string(threads) + " chunk=" + std::to_string(chunk));
      auto st = m.new_state(n + 8);
      std::vector<float> rows((size_t)(n * nv));
      const int64_t c = chunk <= 0 ? n : chunk;
      for (int64_t i = 0; i < n; i += c) {
        Status s = m.forward(*st, seq.data() + i, std::min(c, n - i), models::Logits::kAll, rows.data() + i * nv, &pool);
        ASSERT_TRUE(s.is_ok()) << s.message();
      }
      float worst = 0;
      int64_t worst_row = -1;
      auto cmp = [&](int64_t row, const float* ref) {
        for (int64_t k = 0; k < nc; ++k) {
          const float d = std::fabs(rows[(size_t)(row * nv + gc.columns[(size_t)k])] - ref[k]);
          if (!(d <= worst)) {
            worst = std::isnan(d) ? INFINITY : d;
            worst_row = row;
          }
        }
      };
      for (int64_t i = 0; i < np; ++i) cmp(i, gc.prompt_logits.data() + i * nc);
      for (int64_t j = 1; j < ng; ++j) cmp(np - 1 + j, gc.gen_logits.data() + j * nc);
      for (int64_t k = 0; k < (int64_t)f.turn2.size(); ++k) cmp(np + ng + k, f.turn2_logits.data() + k * nc);
      std::printf("phi4flash-a threads=%d chunk=%lld: max |diff| %.3g (bound %.3g)\n", threads, (long long)chunk,
                  worst, bound);
      EXPECT_LE(worst, bound) << "max |diff| " << worst << " at row " << worst_row << " (prompt " << np << ", gen "
                              << ng << ")";
      if (first.empty()) {
        first = rows;
      } else {
        float d = 0;
        for (size_t k = 0; k < rows.size(); ++k) d = std::max(d, std::fabs(rows[k] - first[k]));
        EXPECT_LE(d, 1e-4f * scale_of(f)) << "modes/threads disagree";
      }
    }
  }
}

TEST(Phi4FlashGolden, LastRowOnlyAndGreedy) {
  P4Fixture& f = fixture();
  if (!f.skip.empty()) GTEST_SKIP() << f.skip;
  const test::GoldenCase& gc = f.gc;
  models::Model& m = *f.model;
  const int64_t nv = gc.n_vocab, nc = gc.n_cols(), ng = (int64_t)gc.greedy.size();
  const float bound = gc.tolerance * scale_of(f);
  ThreadPool pool(2);
  auto st = m.new_state((int64_t)gc.prompt.size() + ng + 8);
  std::vector<float> logits((size_t)nv);
  ASSERT_TRUE(m.forward(*st, gc.prompt.data(), (int64_t)gc.prompt.size(), models::Logits::kLast, logits.data(), &pool)
                  .is_ok());
  for (int64_t j = 0; j < ng; ++j) {
    float worst = 0;
    for (int64_t k = 0; k < nc; ++k)
      worst = std::max(worst, std::fabs(logits[(size_t)gc.columns[(size_t)k]] - gc.gen_logits[(size_t)(j * nc + k)]));
    EXPECT_LE(worst, bound) << "gen row " << j;
    const int32_t mine = (int32_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (mine != gc.greedy[(size_t)j])
      EXPECT_LE(gc.gen_margin[(size_t)j], bound) << "greedy token " << j << ": " << mine << " vs " << gc.greedy[(size_t)j];
    const int32_t tok = gc.greedy[(size_t)j];
    ASSERT_TRUE(m.forward(*st, &tok, 1, models::Logits::kLast, logits.data(), &pool).is_ok());
  }
}

}  // namespace
}  // namespace chimera
