// Load-time repacking end to end: each golden quantized model gives the same
// logits (prompt rows, batch forward) with its weights repacked for the best
// ISA's kernels as with CHIMERA_REPACK=0 (storage layout), and CHIMERA_REPACK=0
// really keeps every weight in place. Packed kernels are meant to be
// bit-identical to the storage-layout kernel of their ISA; the bound allows
// for a packed kernel that documents a different (still fixed) summation order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "golden_case.h"
#include "models/model.h"

namespace chimera::test {
namespace {

struct Loaded {
  std::unique_ptr<models::Model> model;
  std::vector<float> logits;
};

Loaded run(const GoldenCase& gc, bool repack) {
  if (repack)
    unsetenv("CHIMERA_REPACK");
  else
    setenv("CHIMERA_REPACK", "0", 1);
  Loaded l;
  auto m = models::load_model(gc.model_path);
  unsetenv("CHIMERA_REPACK");
  if (!m.is_ok()) {
    ADD_FAILURE() << m.status().message();
    return l;
  }
  l.model = std::move(m).value();
  auto st = l.model->new_state((int64_t)gc.prompt.size() + 8);
  l.logits.resize(gc.prompt.size() * (size_t)l.model->info().n_vocab);
  ThreadPool pool(2);
  EXPECT_TRUE(l.model->forward(*st, gc.prompt.data(), (int64_t)gc.prompt.size(), models::Logits::kAll,
                               l.logits.data(), &pool)
                  .is_ok());
  return l;
}

class RepackModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RepackModelTest, RepackedAndStorageLayoutLogitsAgree) {
  CHIMERA_REQUIRE_SHARED(shared);
  GoldenCase gc;
  ASSERT_TRUE(load_golden(shared + "/golden", GetParam(), &gc));
  const Loaded off = run(gc, false);
  const Loaded on = run(gc, true);
  ASSERT_TRUE(off.model && on.model);
  EXPECT_EQ(off.model->repacked_bytes(), 0u);
  ASSERT_EQ(on.logits.size(), off.logits.size());
  float rms = 0, max_diff = 0;
  for (size_t i = 0; i < off.logits.size(); ++i) {
    rms += off.logits[i] * off.logits[i];
    max_diff = std::max(max_diff, std::fabs(on.logits[i] - off.logits[i]));
  }
  rms = std::sqrt(rms / (float)off.logits.size());
  RecordProperty("repacked_bytes", std::to_string(on.model->repacked_bytes()));
  std::printf("%s: repacked %zu bytes, max |dlogit| %.3g (logit RMS %.3g)\n", GetParam().c_str(),
              on.model->repacked_bytes(), max_diff, rms);
  EXPECT_LE(max_diff, 1e-4f * std::max(rms, 1.f));
}

INSTANTIATE_TEST_SUITE_P(Golden, RepackModelTest,
                         ::testing::Values("quant-llama-Q8_0", "quant-llama-Q4_0", "quant-llama-Q4_K_M",
                                           "quant-llama-Q6_K", "quant-llama-TQ2_0", "quant-llama-TQ1_0",
                                           "tiny-bitnet", "tiny-granitehybrid"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum((unsigned char)c)) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace chimera::test
