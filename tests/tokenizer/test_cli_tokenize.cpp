// `chimera tokenize` / `chimera detokenize` end to end on a vocab-only GGUF.
// Skips when the chimera binary has not been built next to the tests.
#include <cstdio>
#include <filesystem>

#include "tokenizer_test_util.h"

namespace chimera::test {
namespace {

struct CmdResult {
  int rc = -1;
  std::string out;
};

CmdResult run_cmd(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

#define REQUIRE_CHIMERA_BINARY()                                                   \
  if (!std::filesystem::exists(chimera_binary())) GTEST_FAIL() << "chimera binary not built"

TEST(CliTokenize, TokenizeAndDetokenize) {
  CHIMERA_REQUIRE_SHARED(shared);
  REQUIRE_CHIMERA_BINARY();
  const std::string model = vocab_dir() + "/ggml-vocab-llama-spm.gguf";
  const std::string bin = chimera_binary();
  auto r = run_cmd(bin + " tokenize -m " + model + " -p 'Hello world'");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, "1 15043 3186\n");
  r = run_cmd(bin + " tokenize -m " + model + " -p 'Hello world' --no-bos");
  EXPECT_EQ(r.out, "15043 3186\n");
  r = run_cmd(bin + " tokenize -m " + model + " -p '<s>Hi' --no-bos");
  EXPECT_EQ(r.out.rfind("1 ", 0), 0u) << r.out;  // special text parsed by default
  r = run_cmd(bin + " tokenize -m " + model + " -p '<s>Hi' --no-bos --no-special");
  EXPECT_NE(r.out.rfind("1 ", 0), 0u) << r.out;
  r = run_cmd(bin + " tokenize -m " + model + " -p 'Hello' --pieces");
  EXPECT_EQ(r.out, "1\t<s>\n15043\t Hello\n");
  r = run_cmd(bin + " detokenize -m " + model + " -t 1,15043,3186 --no-special");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, "Hello world\n");
  r = run_cmd(bin + " detokenize -m " + model + " -t '15043 3186'");
  EXPECT_EQ(r.out, "Hello world\n");
}

TEST(CliTokenize, Errors) {
  CHIMERA_REQUIRE_SHARED(shared);
  REQUIRE_CHIMERA_BINARY();
  const std::string model = vocab_dir() + "/ggml-vocab-llama-spm.gguf";
  const std::string bin = chimera_binary();
  auto r = run_cmd(bin + " detokenize -m " + model + " -t 1,99999999");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("error: token id 99999999 is out of range"), std::string::npos) << r.out;
  r = run_cmd(bin + " detokenize -m " + model + " -t 1,abc");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("error:"), std::string::npos) << r.out;
  r = run_cmd(bin + " tokenize -m " + model);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("error: give exactly one of -p TEXT or -f FILE"), std::string::npos) << r.out;
  r = run_cmd(bin + " tokenize -m /nonexistent.gguf -p hi");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("error:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace chimera::test
