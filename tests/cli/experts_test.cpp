// `chimera experts` and `chimera run --expert-stats` end to end on the tiny
// PhiMoE fixture: exit codes, the heat map and placement lines on stdout, the
// JSON (counts sum to tokens × layers × k, plan present with a budget) and CSV
// files; clear errors for dense models, missing text and bad budgets.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace chimera::cli {
namespace {

using RunResult = test::SplitResult;
std::string quote(const std::string& s) { return test::shell_quote(s); }
RunResult run_chimera(const std::string& args) { return test::run_chimera_split(args); }

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
}

int64_t count_sum(const nlohmann::json& j) {
  int64_t total = 0;
  for (const auto& l : j["layers"])
    for (const auto& c : l["count"]) total += c.get<int64_t>();
  return total;
}

TEST(ExpertsCli, StatsHeatMapPlacementJsonAndCsv) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/golden/models/tiny-phimoe-hf.gguf";
  const std::string json = test::temp_path("experts.json"), csv = test::temp_path("experts.csv");
  RunResult r = run_chimera("experts -q --threads 2 -m " + quote(model) +
                            " -p 'The quick brown fox jumps over the lazy dog.' --budget-gb 0.0001 -o " +
                            quote(json) + " --csv " + quote(csv));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("heat map"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expected hit rate"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("replayed"), std::string::npos) << r.out;
  auto j = read_json(json);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_EQ(j["layers"].size(), 2u);
  const int64_t tokens = j["layers"][0]["tokens"].get<int64_t>();
  EXPECT_GT(tokens, 5);
  EXPECT_EQ(count_sum(j), tokens * 2 * 2);
  ASSERT_TRUE(j.contains("placement"));
  EXPECT_LE(j["placement"]["resident_bytes"].get<uint64_t>() + j["placement"]["prefetch_bytes"].get<uint64_t>(),
            100000u);
  std::ifstream c(csv);
  std::string text((std::istreambuf_iterator<char>(c)), std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 2 * 4);
  std::filesystem::remove(json);
  std::filesystem::remove(csv);
}

// --expert-placement acts on a plan and never changes results: `run` with the
// plan `experts --budget-gb` wrote generates the same ids as without it and
// reports the tiers; a plan whose expert ids do not exist in the model is
// refused, naming the id, by `run` and by `serve` (which applies it at start).
TEST(ExpertsCli, PlacementKeepsResultsAndIsValidated) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/golden/models/tiny-phimoe-hf.gguf";
  const std::string plan = test::temp_path("placement-plan.json"), bad = test::temp_path("placement-bad.json");
  ASSERT_EQ(run_chimera("experts -q --threads 2 -m " + quote(model) + " -p 'The quick brown fox' --budget-gb 0.0001 -o " +
                        quote(plan))
                .exit_code,
            0);
  const std::string gen = "run --threads 2 --ignore-eos --temp 0 -n 8 --ids -m " + quote(model) + " -p 'Hello there'";
  RunResult base = run_chimera(gen + " -q");
  ASSERT_EQ(base.exit_code, 0) << base.err;
  RunResult placed = run_chimera(gen + " --expert-placement " + quote(plan));
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  EXPECT_EQ(placed.out, base.out);
  EXPECT_NE(placed.err.find("resident"), std::string::npos) << placed.err;
  // Expert 99 does not exist (4 experts per layer).
  auto j = read_json(plan);
  ASSERT_TRUE(j.contains("placement")) << j.dump();
  j["placement"]["resident"][0] = nlohmann::json::array({99});
  std::ofstream(bad) << j.dump();
  RunResult r = run_chimera(gen + " --expert-placement " + quote(bad));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("99"), std::string::npos) << r.err;
  // serve: the plan is applied at start (summary on stderr), a bad one stops it.
  RunResult s = run_chimera("serve -m " + quote(model) + " --port 0 --expert-placement " + quote(bad));
  EXPECT_EQ(s.exit_code, 1) << s.err;
  EXPECT_NE(s.err.find("99"), std::string::npos) << s.err;
  std::filesystem::remove(plan);
  std::filesystem::remove(bad);
}

TEST(ExpertsCli, RunWritesExpertStats) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/golden/models/tiny-phimoe-hf.gguf";
  const std::string json = test::temp_path("run-experts.json");
  RunResult r = run_chimera("run -q --threads 2 --ignore-eos --temp 0 -n 6 -m " + quote(model) +
                            " -p 'Hello there' --expert-stats " + quote(json));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = read_json(json);
  ASSERT_FALSE(j.is_discarded());
  const int64_t tokens = j["layers"][0]["tokens"].get<int64_t>();
  EXPECT_GT(tokens, 6);  // prompt + fed-back generated tokens
  EXPECT_EQ(count_sum(j), tokens * 2 * 2);
  std::filesystem::remove(json);
}

TEST(ExpertsCli, ClearErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string moe = shared + "/golden/models/tiny-phimoe-hf.gguf";
  RunResult dense = run_chimera("experts -q -m " + quote(shared + "/models/stories260K.gguf") + " -p 'Once'");
  EXPECT_EQ(dense.exit_code, 1);
  EXPECT_NE(dense.err.find("mixture-of-experts"), std::string::npos) << dense.err;
  RunResult none = run_chimera("experts -q -m " + quote(moe));
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("error:"), std::string::npos);
  RunResult budget = run_chimera("experts -q -m " + quote(moe) + " -p x --budget-gb -1");
  EXPECT_EQ(budget.exit_code, 1);
  RunResult run_dense = run_chimera("run -q -n 2 -m " + quote(shared + "/models/stories260K.gguf") +
                                    " -p Once --expert-stats " + quote(test::temp_path("never.json")));
  EXPECT_EQ(run_dense.exit_code, 1);
  EXPECT_NE(run_dense.err.find("mixture-of-experts"), std::string::npos) << run_dense.err;
}

}  // namespace
}  // namespace chimera::cli
