// `chimera run` on a masked diffusion LM: the greedy low-confidence decoding
// of the tiny-llada golden case prints the reference tokens in canvas order,
// the cache / threshold flags run, and bad diffusion options are clear errors.
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

struct Case {
  std::string ids, expect, model;
};

Case tiny_llada(const std::string& shared) {
  std::ifstream f(shared + "/golden/tiny-llada.json");
  auto j = nlohmann::json::parse(f);
  Case c;
  auto prompt = j["prompt_tokens"].get<std::vector<int32_t>>();
  for (size_t i = 0; i < prompt.size(); ++i) c.ids += (i ? "," : "") + std::to_string(prompt[i]);
  auto toks = j["greedy"]["tokens"].get<std::vector<int32_t>>();
  for (size_t i = 0; i < toks.size(); ++i) c.expect += (i ? " " : "") + std::to_string(toks[i]);
  c.expect += "\n";
  c.model = shared + "/golden/models/tiny-llada.gguf";
  return c;
}

TEST(DiffusionCli, GreedyIdsMatchGoldenUnmaskOrder) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Case c = tiny_llada(shared);
  int status = 0;
  const std::string out = capture(chimera_binary() + " run -q -m " + c.model + " -t " + c.ids +
                                      " -n 16 --temp 0 --ids --ignore-eos --steps 16 --block-length 16"
                                      " --remasking low_confidence 2>/dev/null",
                                  &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, c.expect);
}

TEST(DiffusionCli, AccelerationFlagsRun) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Case c = tiny_llada(shared);
  for (const char* flags : {"--prefix-cache", "--dual-cache --cache-refresh 2", "--threshold 0.9",
                            "--remasking margin --cfg 1", "--visual"}) {
    int status = 0;
    const std::string out = capture(chimera_binary() + " run -q -m " + c.model + " -t " + c.ids +
                                        " -n 16 --temp 0 --ids --ignore-eos --steps 16 --block-length 8 " + flags +
                                        " 2>/dev/null",
                                    &status);
    EXPECT_EQ(status, 0) << flags;
    int n = out.empty() ? 0 : 1;
    for (char ch : out) n += ch == ' ';
    EXPECT_EQ(n, 16) << flags << ": " << out;
  }
}

TEST(DiffusionCli, BadOptionsAreClearErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Case c = tiny_llada(shared);
  struct Bad {
    const char* flags;
    const char* message;
  };
  for (const Bad& b : {Bad{"-n 16 --block-length 5", "must divide"}, Bad{"-n 16 --block-length 8 --steps 3", "--steps 3"},
                       Bad{"-n 16 --remasking best", "--remasking"}}) {
    int status = 0;
    const std::string out =
        capture(chimera_binary() + " run -q -m " + c.model + " -t " + c.ids + " --temp 0 " + b.flags + " 2>&1", &status);
    EXPECT_NE(status, 0) << b.flags;
    EXPECT_NE(out.find(b.message), std::string::npos) << b.flags << ": " << out;
  }
}

}  // namespace
}  // namespace chimera::test
