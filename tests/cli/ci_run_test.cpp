// .ci/run refuses to run without the shared reference data. Each case copies
// .ci/run and scripts/require_shared.sh into a temporary checkout whose
// scripts/setup.sh and scripts/test.sh are stubs that only record that they
// ran (so CI is never run recursively), then runs it with and without a
// shared folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace chimera::test {
namespace {

namespace fs = std::filesystem;

class CiRun : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = temp_path("ci-run");
    fs::remove_all(root_);
    repo_ = root_ / "repo";
    fs::create_directories(repo_ / ".ci");
    fs::create_directories(repo_ / "scripts");
    const fs::path src = CHIMERA_SOURCE_DIR;
    fs::copy_file(src / ".ci/run", repo_ / ".ci/run");
    fs::copy_file(src / "scripts/require_shared.sh", repo_ / "scripts/require_shared.sh");
    for (const char* stub : {"setup.sh", "test.sh"}) {
      const fs::path p = repo_ / "scripts" / stub;
      std::ofstream(p) << "#!/bin/sh\necho " << stub << " >> \"$(dirname \"$0\")/../ran.txt\"\n";
      fs::permissions(p, fs::perms::owner_all);
    }
  }
  void TearDown() override { fs::remove_all(root_); }

  // Runs the copied .ci/run with `env` (shell assignments) in front; stderr kept.
  ShellResult ci(const std::string& env) {
    return run_shell("env -u CHIMERA_SHARED " + env + " " + shell_quote((repo_ / ".ci/run").string()) + " 2>&1");
  }
  std::string ran() const {
    auto b = read_file_bytes((repo_ / "ran.txt").string());
    return std::string(b.begin(), b.end());
  }

  fs::path root_, repo_;
};

TEST_F(CiRun, FailsWithoutSharedFolder) {
  // No CHIMERA_SHARED and no ../shared next to the checkout.
  const ShellResult r = ci("");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("shared reference data not found"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find((root_ / "shared/golden").string()), std::string::npos) << r.output;
  EXPECT_EQ(ran(), "") << "setup/test ran without reference data";
}

TEST_F(CiRun, FailsWhenCHIMERA_SHAREDIsMissingOrEmpty) {
  ShellResult r = ci("CHIMERA_SHARED=" + shell_quote((root_ / "nowhere").string()));
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("shared reference data not found"), std::string::npos) << r.output;
  fs::create_directories(root_ / "empty/golden");
  r = ci("CHIMERA_SHARED=" + shell_quote((root_ / "empty").string()));
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("incomplete"), std::string::npos) << r.output;
  EXPECT_EQ(ran(), "");
}

TEST_F(CiRun, RunsSetupThenTestsWithSharedData) {
  CHIMERA_REQUIRE_SHARED(shared);
  ShellResult r = ci("CHIMERA_SHARED=" + shell_quote(shared));
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(ran(), "setup.sh\ntest.sh\n");
  // The default location, ../shared next to the checkout.
  fs::remove(repo_ / "ran.txt");
  fs::create_directory_symlink(shared, root_ / "shared");
  r = ci("");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(ran(), "setup.sh\ntest.sh\n");
}

}  // namespace
}  // namespace chimera::test
