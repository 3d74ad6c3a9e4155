// `chimera logits` end to end: the written float32 rows match the golden
// reference for stories260K in batch, step and chunk modes and with 1 and 2
// threads; `chimera run --ids --temp 0` prints the golden greedy tokens.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"

namespace chimera::test {
namespace {

// Standard output of `cmd`; *status = its exit status (-1: a signal ended it).
std::string run_capture(const std::string& cmd, int* status) {
  ShellResult r = run_shell(cmd);
  *status = r.rc;
  return r.output;
}

TEST(LogitsCli, MatchesGoldenInEveryMode) {
  CHIMERA_REQUIRE_SHARED(shared);
  std::ifstream f(shared + "/golden/stories260K.json");
  auto j = nlohmann::json::parse(f);
  auto prompt = j["prompt_tokens"].get<std::vector<int32_t>>();
  std::string ids;
  for (size_t i = 0; i < prompt.size(); ++i) ids += (i ? "," : "") + std::to_string(prompt[i]);
  auto ref_bytes = read_file_bytes(shared + "/golden/stories260K.prompt_logits.f32");
  std::vector<float> ref(ref_bytes.size() / 4);
  std::memcpy(ref.data(), ref_bytes.data(), ref_bytes.size());
  float scale = 1;
  for (float v : ref) scale = std::max(scale, std::fabs(v));
  const std::string out = temp_path("logits.f32");
  for (const char* mode : {"batch", "step", "chunk=2"}) {
    for (int threads : {1, 2}) {
      std::remove(out.c_str());
      const std::string cmd = chimera_binary() + " logits -m " + shared + "/models/stories260K.gguf -t " + ids +
                              " -o " + out + " --mode " + mode + " --threads " + std::to_string(threads);
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
      auto got_bytes = read_file_bytes(out);
      ASSERT_EQ(got_bytes.size(), ref_bytes.size()) << mode;
      const float* got = reinterpret_cast<const float*>(got_bytes.data());
      float worst = 0;
      for (size_t k = 0; k < ref.size(); ++k) worst = std::max(worst, std::fabs(got[k] - ref[k]));
      EXPECT_LE(worst, 1e-3f * scale) << mode << " threads " << threads;
    }
  }
}

TEST(RunCli, GreedyIdsMatchGolden) {
  CHIMERA_REQUIRE_SHARED(shared);
  std::ifstream f(shared + "/golden/stories260K.json");
  auto j = nlohmann::json::parse(f);
  auto prompt = j["prompt_tokens"].get<std::vector<int32_t>>();
  auto greedy = j["greedy"]["tokens"].get<std::vector<int32_t>>();
  std::string ids, expect;
  for (size_t i = 0; i < prompt.size(); ++i) ids += (i ? "," : "") + std::to_string(prompt[i]);
  for (size_t i = 0; i < greedy.size(); ++i) expect += (i ? " " : "") + std::to_string(greedy[i]);
  int st = 0;
  std::string out = run_capture(chimera_binary() + " run -m " + shared + "/models/stories260K.gguf -t " + ids +
                                    " -n " + std::to_string(greedy.size()) + " --temp 0 --ids --ignore-eos -q",
                                &st);
  ASSERT_EQ(st, 0);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  EXPECT_EQ(out, expect);
}

TEST(RunCli, TextOutputIsTheReferenceStory) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto ref = read_file_bytes(shared + "/golden/stories260K.greedy.txt");
  int st = 0;
  std::string out = run_capture(chimera_binary() + " run -m " + shared +
                                    "/models/stories260K.gguf -p 'Once upon a time' -n 64 --temp 0 -q",
                                &st);
  ASSERT_EQ(st, 0);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  EXPECT_EQ(out, std::string(ref.begin(), ref.end()));
}

}  // namespace
}  // namespace chimera::test
