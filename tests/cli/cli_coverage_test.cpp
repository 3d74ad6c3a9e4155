// CLI paths no other test reaches (stories260K): `chat` prints the same reply
// as `run` on the prompt the chat format renders, with and without --system;
// `--isa` at every level the CPU runs selects it (the load line names it) and
// greedy output is the same at each; `bench -o csv` with `--threads 1,2` gives
// one well-formed row per thread count; --cache-type-k/-v reach the model
// (f16 is the default, f32 changes the logits) and are refused where
// unsupported; a family that reads f32 caches only keeps f32 by default, with a note.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "kernels/dispatch.h"
#include "test_util.h"

namespace chimera::test {
namespace {

std::string stories(const std::string& shared) { return shared + "/models/stories260K.gguf"; }

// `chimera run` greedy continuation of `prompt` (the echoed prompt removed).
std::string run_greedy(const std::string& model, const std::string& prompt, int n, const std::string& extra = "") {
  const SplitResult r = run_chimera_split("run -m " + shell_quote(model) + " -p " + shell_quote(prompt) + " -n " +
                                          std::to_string(n) + " --temp 0 -q --threads 1 " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string out = r.out;
  if (out.compare(0, prompt.size(), prompt) != 0) return "<unexpected run output: " + out + ">";
  out.erase(0, prompt.size());
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

struct ChatRun {
  SplitResult r;
  std::vector<int> fed;  // "[feeding N new tokens]" per turn (-v)
};

ChatRun chat(const std::string& model, const std::string& input, const std::string& extra) {
  const std::string in = temp_path("chat-cov-in.txt");
  {
    std::ofstream f(in);
    f << input;
  }
  ChatRun c;
  c.r = run_chimera_split("chat -m " + shell_quote(model) + " --temp 0 -n 12 -v --threads 1 " + extra + " < " +
                          shell_quote(in));
  std::filesystem::remove(in);
  std::regex re("\\[feeding ([0-9]+) new tokens\\]");
  for (auto it = std::sregex_iterator(c.r.err.begin(), c.r.err.end(), re); it != std::sregex_iterator(); ++it)
    c.fed.push_back(std::stoi((*it)[1]));
  return c;
}

int count_tokens(const std::string& model, const std::string& text) {
  const SplitResult r = run_chimera_split("tokenize -m " + shell_quote(model) + " -p " + shell_quote(text));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // One id per line, or ids separated by spaces/commas: count the numbers.
  std::regex num("-?[0-9]+");
  int n = 0;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), num); it != std::sregex_iterator(); ++it) ++n;
  return n;
}

TEST(ChatCliContent, ReplyEqualsRunOnTheRenderedPrompt) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = stories(shared);
  const ChatRun c = chat(model, "Once upon a time there was a cat.\n", "");
  ASSERT_EQ(c.r.exit_code, 0) << c.r.err;
  EXPECT_NE(c.r.err.find("no chat template"), std::string::npos) << c.r.err;
  // The plain format (tokenizer/chat_template.h): "<role>: <content>\n" per message, then "assistant:".
  const std::string rendered = "user: Once upon a time there was a cat.\nassistant:";
  const std::string want = run_greedy(model, rendered, 12);
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(c.r.out, want + "\n");
  ASSERT_EQ(c.fed.size(), 1u) << c.r.err;
  EXPECT_EQ(c.fed[0], count_tokens(model, rendered));
}

TEST(ChatCliContent, SystemPromptIsRenderedFirst) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = stories(shared);
  const std::string system = "Tom had a big red ball.";
  const ChatRun c = chat(model, "Lily went to the park.\n", "--system " + shell_quote(system));
  ASSERT_EQ(c.r.exit_code, 0) << c.r.err;
  const std::string rendered = "system: " + system + "\nuser: Lily went to the park.\nassistant:";
  EXPECT_EQ(c.r.out, run_greedy(model, rendered, 12) + "\n");
  ASSERT_EQ(c.fed.size(), 1u) << c.r.err;
  EXPECT_EQ(c.fed[0], count_tokens(model, rendered));
  // Without --system the prompt is shorter by exactly the system line.
  const ChatRun plain = chat(model, "Lily went to the park.\n", "");
  ASSERT_EQ(plain.fed.size(), 1u) << plain.r.err;
  EXPECT_EQ(plain.fed[0], count_tokens(model, "user: Lily went to the park.\nassistant:"));
  EXPECT_LT(plain.fed[0], c.fed[0]);
}

TEST(IsaCli, EveryAvailableLevelIsSelectedAndGivesTheSameGreedyText) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = stories(shared);
  std::string first;
  for (kernels::Isa isa : kernels::available_isas()) {
    const std::string name = kernels::isa_name(isa);
    SCOPED_TRACE(name);
    const SplitResult r = run_chimera_split("run -m " + shell_quote(model) +
                                            " -p 'Once upon a time' -n 24 --temp 0 --threads 1 --isa " + name);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(", " + name + " kernels"), std::string::npos) << r.err;
    if (first.empty()) first = r.out;
    // stories260K is F32: every level computes the same greedy continuation.
    EXPECT_EQ(r.out, first);
  }
  EXPECT_GT(first.size(), 20u);
}

TEST(BenchCliFormats, CsvWithTwoThreadCountsHasOneRowEach) {
  CHIMERA_REQUIRE_SHARED(shared);
  const SplitResult r = run_chimera_split("bench -m " + shell_quote(stories(shared)) +
                                          " -p 8 -n 4 -r 1 --no-probe --threads 1,2 -o csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), 3u) << r.out;  // header + 2 rows
  const auto& h = rows[0];
  ASSERT_EQ(h.size(), 15u) << r.out;
  EXPECT_EQ(h[1], "threads");
  EXPECT_EQ(h[5], "prefill_tok_s");
  EXPECT_EQ(h[7], "decode_tok_s");
  for (int i = 1; i <= 2; ++i) {
    ASSERT_EQ(rows[(size_t)i].size(), h.size()) << r.out;
    EXPECT_EQ(rows[(size_t)i][1], std::to_string(i));
    EXPECT_EQ(rows[(size_t)i][2], kernels::isa_name(kernels::best_isa()));
    EXPECT_EQ(rows[(size_t)i][3], "8");
    EXPECT_EQ(rows[(size_t)i][4], "4");
    EXPECT_GT(std::stod(rows[(size_t)i][5]), 0);
    EXPECT_GT(std::stod(rows[(size_t)i][7]), 0);
    EXPECT_GT(std::stoull(rows[(size_t)i][13]), 0u);  // peak RSS
  }
}

}  // namespace
std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<float> v;
  float x;
  while (f.read(reinterpret_cast<char*>(&x), sizeof x)) v.push_back(x);
  return v;
}

TEST(CliCoverage, KvCacheTypeFlags) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string m = shell_quote(stories(shared)), out = temp_path("kv-logits.f32");
  auto logits = [&](const std::string& flags) {
    const SplitResult r = run_chimera_split("logits -m " + m + " -t 1,403,407,261,378,101,297,344 -o " + out + " " + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << ": " << r.err;
    return read_floats(out);
  };
  const auto base = logits(""), f32 = logits("--cache-type-k f32 --cache-type-v f32");
  const auto k16 = logits("--cache-type-v f32"), both = logits("--cache-type-k f16 --cache-type-v f16");
  ASSERT_FALSE(base.empty());
  EXPECT_EQ(base, both);  // the default is f16 (llama.cpp's)
  EXPECT_NE(base, f32);   // the flag reaches the cache
  EXPECT_NE(k16, both);   // and each flag its own half (the other one keeps the default)
  EXPECT_NE(k16, f32);
  ASSERT_EQ(f32.size(), both.size());
  float worst = 0;
  for (size_t i = 0; i < f32.size(); ++i) worst = std::max(worst, std::fabs(f32[i] - both[i]));
  EXPECT_LT(worst, 0.05f);  // rounding, not garbage (logit scale of stories260K ~ 20)
  std::filesystem::remove(out);

  EXPECT_EQ(run_greedy(stories(shared), "Once upon a time", 8, "--cache-type-k f16 --cache-type-v f16").empty(),
            false);
  const SplitResult bad = run_chimera_split("run -m " + m + " -p hi -n 1 --cache-type-k q4_0");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--cache-type-k"), std::string::npos) << bad.err;
  // The llama2.c BitNet's reference-order attention reads only f32 caches.
  const std::string dir = shared + "/models/bitnet-llama2c";
  const std::string l2c = temp_path("kv-refuse-bitnet-1M.gguf");
  ASSERT_EQ(run_chimera_split("convert --from bitnet-llama2c " + shell_quote(dir + "/bitnet-1M.bin") + " --vocab " +
                              shell_quote(dir + "/tok512.bin") + " -o " + shell_quote(l2c))
                .exit_code,
            0);
  const SplitResult f32_only = run_chimera_split("run -m " + shell_quote(l2c) + " -p hi -n 1 --cache-type-v f16");
  // Without the flags it keeps f32 (the f16 default is never an error) and says so.
  const SplitResult dflt = run_chimera_split("run -m " + shell_quote(l2c) + " -p hi -n 1");
  std::filesystem::remove(l2c);
  EXPECT_EQ(dflt.exit_code, 0) << dflt.err;
  EXPECT_NE(dflt.err.find("note: KV cache f32 (bitnet attention reads f32 caches only"), std::string::npos) << dflt.err;
  EXPECT_NE(f32_only.exit_code, 0);
  EXPECT_NE(f32_only.err.find("--cache-type-k/--cache-type-v: bitnet"), std::string::npos) << f32_only.err;
}

}  // namespace chimera::test
