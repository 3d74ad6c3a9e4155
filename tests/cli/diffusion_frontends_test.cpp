// The shared diffusion options on `chimera chat` and `chimera bench` (tiny-llada):
// chat passes them to the generator (its errors prove it; a chat reply matches
// `run` on the same ids), bench times one row per acceleration mode with the
// expected step and row counts, and bad values are clear errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace chimera::test {
namespace {

// Standard output of `cmd`; *status = its exit status (-1: a signal ended it).
std::string capture(const std::string& cmd, int* status) {
  ShellResult r = run_shell(cmd);
  *status = r.rc;
  return r.output;
}

std::string tiny_llada(const std::string& shared) { return shared + "/golden/models/tiny-llada.gguf"; }

TEST(DiffusionChat, OptionsReachTheGenerator) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string in = temp_path("dlm-chat-in.txt");
  std::ofstream(in) << "hello\nagain\n";
  int status = 0;
  std::string out = capture(chimera_binary() + " chat -m " + tiny_llada(shared) +
                                " --threads 1 --temp 0 -n 16 --steps 8 --block-length 8 --prefix-cache -v < " + in +
                                " 2>&1",
                            &status);
  EXPECT_EQ(status, 0) << out;
  // Two turns, each a reply of at most 16 tokens.
  size_t turns = 0;
  for (size_t p = out.find("reply "); p != std::string::npos; p = out.find("reply ", p + 1)) ++turns;
  EXPECT_EQ(turns, 2u) << out;
  // The generator sees the options: a block length that does not divide -n, an
  // unknown remasking and an out-of-range threshold are its errors.
  struct Bad {
    const char* flags;
    const char* message;
  };
  for (const Bad& b : {Bad{"-n 16 --block-length 5", "--block-length 5 must divide"},
                       Bad{"-n 16 --block-length 8 --steps 3", "--steps 3"},
                       Bad{"--remasking best", "--remasking"}, Bad{"--threshold 1.5", "--threshold"}}) {
    out = capture(chimera_binary() + " chat -m " + tiny_llada(shared) + " --threads 1 " + b.flags + " < " + in + " 2>&1",
                  &status);
    EXPECT_NE(status, 0) << b.flags;
    EXPECT_NE(out.find(b.message), std::string::npos) << b.flags << ": " << out;
  }
}

nlohmann::json bench_json(const std::string& model, const std::string& flags, int* status) {
  const std::string out = capture(chimera_binary() + " bench -m " + model +
                                      " -p 8 -n 16 --steps 8 --block-length 8 -r 1 --threads 1 -o json " + flags +
                                      " 2>/dev/null",
                                  status);
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_object()) j = nlohmann::json::array({j});
  return j;
}

TEST(DiffusionBenchCli, DefaultModesExactPrefixDualThreshold) {
  CHIMERA_REQUIRE_SHARED(shared);
  int status = 0;
  const auto rows = bench_json(tiny_llada(shared), "", &status);
  ASSERT_EQ(status, 0);
  ASSERT_TRUE(rows.is_array()) << rows.dump();
  ASSERT_EQ(rows.size(), 3u) << rows.dump(2);
  EXPECT_EQ(rows[0]["mode"], "exact");
  EXPECT_EQ(rows[1]["mode"], "prefix");
  EXPECT_EQ(rows[2]["mode"], "dual+threshold");
  EXPECT_DOUBLE_EQ(rows[2]["threshold"].get<double>(), 0.9);  // Fast-dLLM's τ when none is given
  for (const auto& r : rows) {
    EXPECT_GT(r["gen_tok_s"].get<double>(), 0) << r.dump();
    EXPECT_GT(r["steps_s"].get<double>(), 0) << r.dump();
    EXPECT_EQ(r["n_gen"], 16);
    EXPECT_EQ(r["block_length"], 8);
  }
  // Exact: every step is a full pass over the 24-position canvas.
  EXPECT_DOUBLE_EQ(rows[0]["steps"].get<double>(), 8);
  // τ = 0.9 never fires on this model: the schedule's 2 tokens per step are the floor.
  EXPECT_DOUBLE_EQ(rows[2]["steps"].get<double>(), 8);
  EXPECT_DOUBLE_EQ(rows[0]["rows_per_step"].get<double>(), 24);
  // The caches run fewer model rows per step: prefix < exact, dual < prefix.
  EXPECT_LT(rows[1]["rows_per_step"].get<double>(), 24);
  EXPECT_LT(rows[2]["rows_per_step"].get<double>(), rows[1]["rows_per_step"].get<double>());
}

TEST(DiffusionBenchCli, GivenFlagsAndModeList) {
  CHIMERA_REQUIRE_SHARED(shared);
  int status = 0;
  // Flags naming an acceleration and no --diffusion-modes: one row, as given.
  auto rows = bench_json(tiny_llada(shared), "--dual-cache --threshold 0.0001", &status);
  ASSERT_EQ(status, 0);
  ASSERT_EQ(rows.size(), 1u) << rows.dump(2);
  EXPECT_EQ(rows[0]["mode"], "dual+threshold");
  EXPECT_LT(rows[0]["steps"].get<double>(), 8);  // τ below every confidence: parallel commits
  rows = bench_json(tiny_llada(shared), "--diffusion-modes exact,dual --cache-refresh 2", &status);
  ASSERT_EQ(status, 0);
  ASSERT_EQ(rows.size(), 2u) << rows.dump(2);
  EXPECT_EQ(rows[1]["mode"], "dual");
  EXPECT_EQ(rows[1]["cache_refresh"], 2);
  // Markdown output names the test and mode.
  const std::string md = capture(chimera_binary() + " bench -m " + tiny_llada(shared) +
                                     " -p 8 -n 16 --steps 8 --block-length 8 -r 1 --threads 1 --diffusion-modes prefix"
                                     " 2>/dev/null",
                                 &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(md.find("p8 dg16 s8 b8 | prefix |"), std::string::npos) << md;
}

TEST(DiffusionBenchCli, BadOptionsAreClearErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  struct Bad {
    const char* flags;
    const char* message;
  };
  for (const Bad& b : {Bad{"--diffusion-modes exact,turbo", "unknown mode 'turbo'"},
                       Bad{"--block-length 5", "--block-length 5 must divide"},
                       Bad{"--remasking best", "--remasking"}}) {
    int status = 0;
    const std::string out = capture(chimera_binary() + " bench -m " + tiny_llada(shared) +
                                        " -p 8 -n 16 -r 1 --threads 1 " + b.flags + " 2>&1",
                                    &status);
    EXPECT_NE(status, 0) << b.flags;
    EXPECT_NE(out.find(b.message), std::string::npos) << b.flags << ": " << out;
  }
}

}  // namespace
}  // namespace chimera::test
