// Test fixtures derived from a golden GGUF: a copy with tensors kept, edited
// or dropped by `edit` (return false to drop), metadata keys overridden and
// extra float32 tensors added; returns the new file's path (test_util.h
// temp_path).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "format/gguf/gguf.h"
#include "test_util.h"

namespace chimera::test {

inline bool keep_all(format::GgufTensorInfo&) { return true; }

inline std::string rewrite(const std::string& src, const std::string& name,
                           const std::function<bool(format::GgufTensorInfo&)>& edit,
                           const std::vector<std::pair<std::string, format::GgufValue>>& kv = {},
                           const std::vector<std::pair<std::string, std::vector<float>>>& extra = {}) {
  auto g = format::GgufFile::open(src);
  EXPECT_TRUE(g.is_ok());
  if (!g.is_ok()) return "";
  format::GgufWriter w;
  for (const auto& [k, v] : (*g)->metadata()) w.set(k, v);
  for (const auto& [k, v] : kv) w.set(k, v);
  for (auto t : (*g)->tensors()) {
    if (!edit(t)) continue;
    EXPECT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
  }
  for (const auto& [n, v] : extra)
    EXPECT_TRUE(w.add_tensor(n, format::GgmlType::F32, {(int64_t)v.size()}, v.data(), v.size() * 4).is_ok());
  const std::string out = temp_path(name);
  EXPECT_TRUE(w.write(out).is_ok());
  return out;
}

}  // namespace chimera::test
