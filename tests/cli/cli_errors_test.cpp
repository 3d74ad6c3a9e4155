// CLI error handling: every user or input error prints "error: ..." on stderr
// and exits 1 — never a crash, abort or signal. Runs the real binary.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

namespace chimera::test {
namespace {

struct Outcome {
  int exit_code = -1;
  bool signaled = false;
  std::string err;
};

Outcome run_cli(const std::string& args) {
  const std::string errf = temp_path("stderr.txt");
  const std::string cmd = chimera_binary() + " " + args + " </dev/null >/dev/null 2>" + errf;
  int st = std::system(cmd.c_str());
  Outcome o;
  if (WIFEXITED(st)) o.exit_code = WEXITSTATUS(st);
  // system() runs a shell; a signal in the child shows as 128 + n.
  o.signaled = WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) > 128);
  auto bytes = read_file_bytes(errf);
  o.err.assign(bytes.begin(), bytes.end());
  return o;
}

void expect_user_error(const std::string& args) {
  Outcome o = run_cli(args);
  EXPECT_FALSE(o.signaled) << args;
  EXPECT_EQ(o.exit_code, 1) << args << "\n" << o.err;
  EXPECT_NE(o.err.find("error:"), std::string::npos) << args << "\n" << o.err;
}

TEST(CliErrors, BadArguments) {
  expect_user_error("");
  expect_user_error("no-such-command");
  expect_user_error("run");
  expect_user_error("run -m /nonexistent.gguf -p hi");
  expect_user_error("run -m /dev/null -p hi");
  expect_user_error("logits -m /nonexistent.gguf -t 1,2 -o /tmp/x.f32");
  expect_user_error("run -m /etc/passwd -p hi");
}

TEST(CliErrors, ModelInputErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string m = shared + "/models/stories260K.gguf";
  expect_user_error("run -m " + m + " -t 1,99999 -n 2");        // id out of range
  expect_user_error("run -m " + m + " -t 1,abc -n 2");          // malformed ids
  expect_user_error("run -m " + m + " -t -5 -n 2");             // negative id
  expect_user_error("run -m " + m + " -p hi -t 1 -n 2");        // two prompt sources
  expect_user_error("run -m " + m + " -t 1,2,3,4,5,6 -c 4 -n 2");  // prompt longer than context
  expect_user_error("logits -m " + m + " -t 1,2 -o /tmp/x.f32 --mode chunk=0");
  expect_user_error("logits -m " + m + " -t 1,2 -o /tmp/x.f32 --mode sideways");
  expect_user_error("logits -m " + m + " -t 1,2 -o /nonexistent-dir/x.f32");
  expect_user_error("run -m " + m + " -f /nonexistent.txt");
  expect_user_error("run -m " + m + " -p hi --isa warp9");
  // A vocabulary-only GGUF is not a model.
  expect_user_error("run -m " + shared + "/tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf -p hi");
}

// Numeric flags out of range and unreadable prompt files are refused with an
// error naming them (not run with a default or an empty prompt).
void expect_error_naming(const std::string& args, const std::string& needle) {
  Outcome o = run_cli(args);
  EXPECT_FALSE(o.signaled) << args;
  EXPECT_EQ(o.exit_code, 1) << args << "\n" << o.err;
  EXPECT_NE(o.err.find("error:"), std::string::npos) << args << "\n" << o.err;
  EXPECT_NE(o.err.find(needle), std::string::npos) << args << "\n" << o.err;
}

// With the AMX tile permission refused (simulated by CHIMERA_NO_AMX=1, which
// the child inherits) the amx level is not offered: --isa amx is refused with
// an error naming it, not run at another level (on a CPU without AMX too).
TEST(CliErrors, IsaAmxIsRefusedWithoutTheTilePermission) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string m = shared + "/models/stories260K.gguf";
  const char* prev = std::getenv("CHIMERA_NO_AMX");
  const std::string saved = prev ? prev : "";
  setenv("CHIMERA_NO_AMX", "1", 1);
  expect_error_naming("run -m " + m + " -p hi -n 1 --isa amx", "cannot run amx");
  if (prev) {
    setenv("CHIMERA_NO_AMX", saved.c_str(), 1);
  } else {
    unsetenv("CHIMERA_NO_AMX");
  }
}

TEST(CliErrors, AbsurdNumbersAndDirectoriesAreRefused) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string m = shared + "/models/stories260K.gguf";
  const std::string dir = temp_path("prompt-dir");
  std::filesystem::create_directories(dir);
  expect_error_naming("run -m " + m + " -f " + dir + " -n 2", "is a directory");
  const std::pair<const char*, std::string> commands[] = {
      {"run", " -p hi"}, {"chat", ""},  {"serve", " --port 0"}, {"experts", " -p hi"}, {"logits", " -t 1 -o /tmp/x.f32"},
      {"perplexity", " -f " + m}, {"info", ""}};
  for (const auto& [cmd, extra] : commands) {
    expect_error_naming(std::string(cmd) + " -m " + m + extra + " -c -5", "--ctx-size");
    expect_error_naming(std::string(cmd) + " -m " + m + extra + " -c 99999999999", "--ctx-size");
  }
  expect_error_naming("run -m " + m + " -p hi -n -7", "-n");
  expect_error_naming("run -m " + m + " -p hi --temp -1", "--temp");
  expect_error_naming("run -m " + m + " -p hi --top-p 3", "--top-p");
  expect_error_naming("run -m " + m + " -p hi --top-k -2", "--top-k");
  expect_error_naming("run -m " + m + " -p hi --repeat-penalty 0", "--repeat-penalty");
  expect_error_naming("run -m " + m + " -p hi --seed -1", "--seed");
  expect_error_naming("run -m " + m + " -p hi --seed 99999999999999999999999", "--seed");
  expect_error_naming("serve -m " + m + " --port 0 --mem-budget-mb 9223372036854775807", "--mem-budget-mb");
  expect_error_naming("serve -m " + m + " --port 0 --mem-budget-mb -1", "--mem-budget-mb");
  expect_error_naming("serve -m " + m + " --port 0 --prefix-cache-scope everyone", "--prefix-cache-scope");
  expect_error_naming("serve -m " + m + " --port 0 --api-key-file " + dir, "is a directory");
}

TEST(CliErrors, ContextOverflowDuringGenerationStopsCleanly) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string m = shared + "/models/stories260K.gguf";
  Outcome o = run_cli("run -m " + m + " -t 1,403 -c 8 -n 20 --temp 0");
  EXPECT_FALSE(o.signaled);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("context full"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace chimera::test
