// Loading a golden reference case from ../shared/golden (format: its README):
// NAME.json metadata, prompt/gen logits as little-endian float32 matrices that
// hold either every vocabulary column or only `logits_columns`.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace chimera::test {

struct GoldenCase {
  std::string name, dir, model_path, arch;
  float tolerance = 0;
  int64_t n_vocab = 0;
  std::vector<int32_t> prompt, greedy;
  std::vector<int64_t> columns;          // stored columns (all when empty)
  std::vector<float> prompt_logits;      // [n_prompt][n_cols]
  std::vector<float> gen_logits;         // [n_gen][n_cols]
  std::vector<float> gen_margin;         // reference top1 - top2 per gen row
  // Reference top-10 [id, logit] per prompt row then per gen row (full-vocabulary
  // ids, also where the logits files keep only some columns).
  std::vector<std::vector<std::pair<int64_t, float>>> top10;
  nlohmann::json meta;
  int64_t n_cols() const { return columns.empty() ? n_vocab : (int64_t)columns.size(); }
  float scale() const {
    float s = 1.f;
    for (float v : prompt_logits) s = std::max(s, std::fabs(v));
    for (float v : gen_logits) s = std::max(s, std::fabs(v));
    return s;
  }
};

inline std::vector<float> read_f32(const std::string& path) {
  auto bytes = read_file_bytes(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

inline bool load_golden(const std::string& golden_dir, const std::string& name, GoldenCase* c) {
  std::ifstream f(golden_dir + "/" + name + ".json");
  if (!f) return false;
  c->meta = nlohmann::json::parse(f);
  const auto& m = c->meta;
  c->name = name;
  c->dir = golden_dir;
  // "model_base": "shared" (the long cases kept in this repository): the model
  // path is relative to the shared data folder instead of the case's folder.
  const bool in_shared = m.value("model_base", "") == "shared";
  c->model_path = (in_shared ? shared_dir() : golden_dir) + "/" + m["model"].get<std::string>();
  c->arch = m["arch"].get<std::string>();
  c->tolerance = m["tolerance"].get<float>();
  c->n_vocab = m["n_vocab"].get<int64_t>();
  c->prompt = m["prompt_tokens"].get<std::vector<int32_t>>();
  c->greedy = m["greedy"]["tokens"].get<std::vector<int32_t>>();
  if (m.contains("logits_columns")) c->columns = m["logits_columns"].get<std::vector<int64_t>>();
  c->prompt_logits = read_f32(golden_dir + "/" + m["prompt_logits_file"].get<std::string>());
  c->gen_logits = read_f32(golden_dir + "/" + m["greedy"]["gen_logits_file"].get<std::string>());
  for (const auto& row : m["greedy"]["top10"]) {
    c->gen_margin.push_back(row.size() >= 2 ? row[0][1].get<float>() - row[1][1].get<float>() : 1e9f);
  }
  auto add_top10 = [&](const nlohmann::json& rows) {
    for (const auto& row : rows) {
      c->top10.emplace_back();
      for (const auto& p : row) c->top10.back().emplace_back(p[0].get<int64_t>(), p[1].get<float>());
    }
  };
  if (m.contains("prompt_top10") && m["greedy"].contains("top10")) {
    add_top10(m["prompt_top10"]);
    add_top10(m["greedy"]["top10"]);
  }
  return true;
}

// Every case NAME in the golden folder (by its NAME.json).
inline std::vector<std::string> list_golden_cases(const std::string& golden_dir) {
  std::vector<std::string> out;
  if (golden_dir.empty() || !std::filesystem::is_directory(golden_dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(golden_dir)) {
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace chimera::test
