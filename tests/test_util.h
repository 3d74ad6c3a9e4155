// Shared test helpers: where the shared reference data lives, temp files.
// Tests that need ../shared skip (never pass) when it is absent; when
// $CHIMERA_SHARED names a folder that does not exist (as .ci/run sets it) they
// fail instead. Once the folder is there, a file missing from it is a failure.
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace chimera::test {

// $CHIMERA_SHARED, else ../shared relative to the source tree; "" if absent.
inline std::string shared_dir() {
  if (const char* e = std::getenv("CHIMERA_SHARED"); e && *e) {
    return std::filesystem::is_directory(e) ? std::string(e) : std::string();
  }
  std::filesystem::path p = std::filesystem::path(CHIMERA_SOURCE_DIR) / ".." / "shared";
  if (std::filesystem::is_directory(p)) return std::filesystem::canonical(p).string();
  return {};
}

inline std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / "chimera-tests";
  std::filesystem::create_directories(dir);
  return (dir / (std::to_string(::getpid()) + "-" + name)).string();
}

inline std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline std::string chimera_binary() { return std::string(CHIMERA_BINARY_DIR) + "/chimera"; }

// What a shell command printed and how it ended.
struct ShellResult {
  int rc = -1;         // exit status; -1 when a signal ended it or it could not start
  std::string output;  // its standard output (add " 2>&1" to the command for stderr too)
};

// Runs `cmd` with /bin/sh.
inline ShellResult run_shell(const std::string& cmd) {
  ShellResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `chimera ARGS`, stdout and stderr together (or stdout only when with_stderr is false).
inline ShellResult run_chimera(const std::string& args, bool with_stderr = true) {
  return run_shell(chimera_binary() + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

// A command's exit status with its standard output and error kept apart.
struct SplitResult {
  int exit_code = -1;     // exit status when it exited normally
  bool signaled = false;  // a signal ended it (a crash)
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// `chimera ARGS` (ARGS as shell words), stderr captured through a temp file.
inline SplitResult run_chimera_split(const std::string& args) {
  SplitResult r;
  const std::string err_path = temp_path("split-stderr.txt");
  const std::string cmd = "exec " + shell_quote(chimera_binary()) + " " + args + " 2>" + shell_quote(err_path);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  if (WIFSIGNALED(status)) r.signaled = true;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (r.exit_code > 128) r.signaled = true;  // a shell that did not exec reports 128 + signal
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  std::filesystem::remove(err_path);
  return r;
}

}  // namespace chimera::test

namespace chimera::test {
// The folder $CHIMERA_SHARED names when it is set but missing ("" otherwise):
// data that was asked for explicitly and is not there is an error, not a skip.
inline std::string shared_dir_requested_but_missing() {
  const char* e = std::getenv("CHIMERA_SHARED");
  if (e && *e && !std::filesystem::is_directory(e)) return e;
  return {};
}
}  // namespace chimera::test

#define CHIMERA_REQUIRE_SHARED(var)                                                                       \
  std::string var = ::chimera::test::shared_dir();                                                        \
  if (var.empty() && !::chimera::test::shared_dir_requested_but_missing().empty())                        \
    GTEST_FAIL() << "CHIMERA_SHARED=" << ::chimera::test::shared_dir_requested_but_missing()              \
                 << " is not a directory";                                                                 \
  if (var.empty()) GTEST_SKIP() << "shared data not found (set CHIMERA_SHARED)"
