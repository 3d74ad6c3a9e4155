// Autoregressive generator: greedy output equals the golden reference, and
// generation continued across calls (chat turns) equals one long call.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/model.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace chimera::test {
namespace {

std::vector<int32_t> generate(runtime::Generator& g, const std::vector<int32_t>& prompt, int64_t n) {
  runtime::GenerateOptions o;
  o.n_predict = n;
  o.stop_at_eog = false;
  o.sampling.temperature = 0;
  std::vector<int32_t> out;
  auto r = g.generate(prompt, o, [&](int32_t t) {
    out.push_back(t);
    return true;
  });
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return out;
}

TEST(Generator, GreedyMatchesGoldenStories260K) {
  CHIMERA_REQUIRE_SHARED(shared);
  std::ifstream f(shared + "/golden/stories260K-bos.json");
  auto j = nlohmann::json::parse(f);
  auto m = models::load_model(shared + "/models/stories260K.gguf");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ThreadPool pool(2);
  auto g = runtime::make_generator(**m, 512, &pool);
  auto prompt = j["prompt_tokens"].get<std::vector<int32_t>>();
  auto ref = j["greedy"]["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(generate(*g, prompt, (int64_t)ref.size()), ref);
}

TEST(Generator, ContinuationAcrossCallsEqualsOneCall) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = models::load_model(shared + "/models/stories260K.gguf");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ThreadPool pool(1);
  auto a = runtime::make_generator(**m, 256, &pool);
  auto b = runtime::make_generator(**m, 256, &pool);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  auto whole = generate(*a, prompt, 30);
  auto part1 = generate(*b, prompt, 12);
  auto part2 = generate(*b, {}, 18);
  part1.insert(part1.end(), part2.begin(), part2.end());
  EXPECT_EQ(whole, part1);
  EXPECT_EQ(b->n_past(), 5 + 30);
  b->reset();
  EXPECT_EQ(b->n_past(), 0);
  EXPECT_EQ(generate(*b, prompt, 30), whole);
}

}  // namespace
}  // namespace chimera::test
