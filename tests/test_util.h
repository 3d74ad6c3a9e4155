// Shared test helpers: where the shared reference data lives, temp files.
// Tests that need ../shared skip (never pass) when it is absent.
#pragma once

#include <gtest/gtest.h>

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

}  // namespace chimera::test

#define CHIMERA_REQUIRE_SHARED(var)                                       \
  std::string var = ::chimera::test::shared_dir();                        \
  if (var.empty()) GTEST_SKIP() << "shared data not found (set CHIMERA_SHARED)"
