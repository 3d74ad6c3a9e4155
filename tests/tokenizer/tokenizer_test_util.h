// Helpers for the tokenizer tests: loading the shared vocab-only GGUF files
// and their .inp/.out test vectors (inputs joined by "\n__ggml_vocab_test__\n",
// one line of space-separated ids per input).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "format/gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace chimera::test {

inline std::string vocab_dir() {
  const std::string s = shared_dir();
  return s.empty() ? s : s + "/tokenizers/llama.cpp-vocab";
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct VocabCase {
  std::string input;
  std::vector<int32_t> expected;
};

// Reads NAME.gguf.inp / NAME.gguf.out from dir; empty when absent.
inline std::vector<VocabCase> load_vocab_cases(const std::string& base_path) {
  std::vector<VocabCase> cases;
  if (!std::filesystem::exists(base_path + ".inp") || !std::filesystem::exists(base_path + ".out")) return cases;
  const std::string inp = read_text(base_path + ".inp");
  const std::string out = read_text(base_path + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0;
  while (true) {
    size_t m = inp.find(sep, pos);
    if (m == std::string::npos) {
      if (pos < inp.size()) inputs.push_back(inp.substr(pos));
      break;
    }
    inputs.push_back(inp.substr(pos, m - pos));
    pos = m + sep.size();
  }
  std::vector<std::vector<int32_t>> outputs;
  std::istringstream os(out);
  std::string line;
  while (std::getline(os, line)) {
    std::vector<int32_t> ids;
    std::istringstream ls(line);
    int64_t v;
    while (ls >> v) ids.push_back((int32_t)v);
    outputs.push_back(std::move(ids));
  }
  for (size_t i = 0; i < inputs.size() && i < outputs.size(); ++i) cases.push_back({inputs[i], outputs[i]});
  return cases;
}

inline std::unique_ptr<tokenizer::Tokenizer> load_vocab(const std::string& name) {
  const std::string path = vocab_dir() + "/ggml-vocab-" + name + ".gguf";
  auto g = format::GgufFile::open(path);
  EXPECT_TRUE(g.is_ok()) << path << ": " << g.status().message();
  if (!g) return nullptr;
  auto t = tokenizer::Tokenizer::from_gguf(**g);
  EXPECT_TRUE(t.is_ok()) << path << ": " << t.status().message();
  if (!t) return nullptr;
  return std::move(t).value();
}

inline std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(ids[i]);
  }
  return s;
}

}  // namespace chimera::test
