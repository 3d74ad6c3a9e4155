// `chimera perplexity`: stories260K on a short TinyStories-style text, alone and
// against its Q8_0 quantization with --kld-base. Checks that the numbers are
// finite and sane (PPL of a model against itself: KLD 0, top-1 100 %), that Q8_0
// stays close (PPL within 2 %, mean KLD < 0.01, top-1 >= 90 %), and that bad
// inputs (text shorter than one window, missing files) exit 1 with "error:".
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

namespace chimera {
namespace {

using RunResult = test::ShellResult;

// `chimera ARGS`; stderr only when asked.
RunResult run_chimera(const std::string& args, bool with_stderr = false) { return test::run_chimera(args, with_stderr); }

// The number after `label` in the output, NaN when absent.
double value_after(const std::string& out, const std::string& label) {
  const size_t p = out.find(label);
  if (p == std::string::npos) return NAN;
  return std::strtod(out.c_str() + p + label.size(), nullptr);
}

const char* kText =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she "
    "saw a big red ball under a tree. She ran to the ball and picked it up. It was very shiny and round. Lily "
    "wanted to play with the ball, but she did not know whose ball it was. She looked around and saw a boy named "
    "Tom. Tom was sad because he lost his ball. Lily said, \"Is this your ball?\" Tom smiled and said, \"Yes! "
    "Thank you, Lily!\" They played together all day and became best friends.\n"
    "One day, a little dog named Max went for a walk. Max liked to run and jump. He saw a cat on a fence. The cat "
    "was very big and fluffy. Max barked at the cat, but the cat did not run away. The cat looked at Max and said, "
    "\"Why are you barking at me?\" Max felt silly. He said, \"I am sorry. I just wanted to play.\" The cat smiled "
    "and jumped down from the fence. They ran in the grass and had lots of fun.\n";

TEST(PerplexityCli, Stories260KAndQ8_0) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/models/stories260K.gguf";
  const std::string text = test::temp_path("ppl.txt"), q8 = test::temp_path("ppl-q8.gguf");
  std::ofstream(text) << kText;
  RunResult base = run_chimera("perplexity -m " + model + " -f " + text + " -c 64");
  ASSERT_EQ(base.rc, 0) << base.output;
  const double ppl = value_after(base.output, "PPL = ");
  EXPECT_TRUE(std::isfinite(ppl)) << base.output;
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 50.0);  // a TinyStories model on TinyStories-like text (vocab 512)
  EXPECT_TRUE(std::isfinite(value_after(base.output, "+/- ")));

  RunResult self = run_chimera("perplexity -m " + model + " -f " + text + " -c 64 --kld-base " + model);
  ASSERT_EQ(self.rc, 0) << self.output;
  EXPECT_DOUBLE_EQ(value_after(self.output, "PPL = "), ppl);
  EXPECT_NEAR(value_after(self.output, "Mean KLD        = "), 0.0, 1e-9);
  EXPECT_DOUBLE_EQ(value_after(self.output, "Same top-1      = "), 100.0);
  EXPECT_DOUBLE_EQ(value_after(self.output, "Max logit error = "), 0.0);

  ASSERT_EQ(run_chimera("quantize " + model + " " + q8 + " Q8_0").rc, 0);
  RunResult q = run_chimera("perplexity -m " + q8 + " -f " + text + " -c 64 --kld-base " + model);
  ASSERT_EQ(q.rc, 0) << q.output;
  const double ppl_q = value_after(q.output, "PPL = ");
  EXPECT_NEAR(ppl_q / ppl, 1.0, 0.02) << q.output;
  EXPECT_DOUBLE_EQ(value_after(q.output, "PPL(base)       = "), ppl);
  const double kld = value_after(q.output, "Mean KLD        = ");
  EXPECT_GE(kld, 0.0);
  EXPECT_LT(kld, 0.01) << q.output;
  EXPECT_GE(value_after(q.output, "Same top-1      = "), 90.0) << q.output;
  const double max_err = value_after(q.output, "Max logit error = ");
  EXPECT_GT(max_err, 0.0);
  EXPECT_LT(max_err, 2.0) << q.output;
  EXPECT_LE(value_after(q.output, "RMS logit error = "), max_err);
  std::filesystem::remove(q8);
  std::filesystem::remove(text);
}

TEST(PerplexityCli, Errors) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/models/stories260K.gguf";
  const std::string text = test::temp_path("ppl-short.txt");
  std::ofstream(text) << "Once upon a time.";
  RunResult r = run_chimera("perplexity -m " + model + " -f " + text + " -c 64", true);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.output.find("error: the text has"), std::string::npos) << r.output;
  r = run_chimera("perplexity -m " + model + " -f /no/such/text.txt", true);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.output.find("error:"), std::string::npos) << r.output;
  std::filesystem::remove(text);
}

}  // namespace
}  // namespace chimera
