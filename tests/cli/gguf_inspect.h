// Small GGUF inspection helpers shared by the CLI tests that write model files.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "format/gguf/gguf.h"

namespace chimera::test {

// Every tensor's name -> storage type (empty, with a test failure, when the file does not open).
inline std::map<std::string, format::GgmlType> tensor_types(const std::string& path) {
  std::map<std::string, format::GgmlType> m;
  auto f = format::GgufFile::open(path);
  EXPECT_TRUE(f.is_ok()) << path;
  if (!f) return m;
  for (const auto& t : (*f)->tensors()) m[t.name] = t.type;
  return m;
}

}  // namespace chimera::test
