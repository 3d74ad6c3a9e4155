// Helpers for the C API tests. These tests see only include/chimera.h (and
// link only libchimera.so): no engine header is reachable from here.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "chimera.h"
#include "test_util.h"

namespace chimera::capi_test {

struct ModelDeleter {
  void operator()(chimera_model* m) const { EXPECT_EQ(chimera_model_free(m), CHIMERA_OK) << chimera_last_error(); }
};
struct ContextDeleter {
  void operator()(chimera_context* c) const { chimera_context_free(c); }
};
struct SamplerDeleter {
  void operator()(chimera_sampler* s) const { chimera_sampler_free(s); }
};
using ModelPtr = std::unique_ptr<chimera_model, ModelDeleter>;
using ContextPtr = std::unique_ptr<chimera_context, ContextDeleter>;
using SamplerPtr = std::unique_ptr<chimera_sampler, SamplerDeleter>;

inline std::string stories_path(const std::string& shared) { return shared + "/models/stories260K.gguf"; }
inline std::string granite_path(const std::string& shared) { return shared + "/golden/models/tiny-granitehybrid.gguf"; }

inline ModelPtr load(const std::string& path, int threads = 2, int64_t n_ctx = 0) {
  chimera_model_params p;
  chimera_model_params_init(&p);
  p.n_threads = threads;
  p.n_ctx = n_ctx;
  chimera_model* m = nullptr;
  EXPECT_EQ(chimera_model_load(path.c_str(), &p, &m), CHIMERA_OK) << chimera_last_error();
  return ModelPtr(m);
}

inline ContextPtr context(chimera_model* m, int64_t n_ctx = 0) {
  chimera_context_params p;
  chimera_context_params_init(&p);
  p.n_ctx = n_ctx;
  chimera_context* c = nullptr;
  EXPECT_EQ(chimera_context_create(m, &p, &c), CHIMERA_OK) << chimera_model_last_error(m);
  return ContextPtr(c);
}

inline std::vector<int32_t> tokenize(chimera_model* m, const std::string& text, bool add_special = true,
                                     bool parse_special = true) {
  size_t n = 0;
  chimera_status s = chimera_tokenize(m, text.data(), text.size(), add_special, parse_special, nullptr, 0, &n);
  EXPECT_TRUE(s == CHIMERA_OK || s == CHIMERA_ERR_BUFFER_TOO_SMALL) << chimera_model_last_error(m);
  std::vector<int32_t> ids(n);
  EXPECT_EQ(chimera_tokenize(m, text.data(), text.size(), add_special, parse_special, ids.data(), ids.size(), &n),
            CHIMERA_OK);
  return ids;
}

// "1 2 3", as `chimera tokenize` and `chimera run --ids` print ids.
inline std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(ids[i]);
  }
  return s;
}

inline int32_t n_vocab(chimera_model* m) {
  chimera_model_info info;
  info.struct_size = sizeof info;
  EXPECT_EQ(chimera_model_info_get(m, &info), CHIMERA_OK);
  return info.n_vocab;
}

// What a generation produced, via the callback.
struct Generated {
  std::vector<int32_t> tokens;
  std::string text;
  chimera_generate_result result{};
  chimera_status status = CHIMERA_OK;
  int stop_after = -1;  // the callback returns 1 after this many tokens
};

inline int collect(int32_t token, const char* text, size_t len, void* ud) {
  auto* g = static_cast<Generated*>(ud);
  if (token >= 0) g->tokens.push_back(token);
  g->text.append(text, len);
  return g->stop_after >= 0 && (int)g->tokens.size() >= g->stop_after ? 1 : 0;
}

inline chimera_generate_params greedy(int64_t max_tokens) {
  chimera_generate_params p;
  chimera_generate_params_init(&p);
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0;
  return p;
}

inline Generated generate(chimera_context* c, const std::vector<int32_t>& prompt, chimera_generate_params p,
                          int stop_after = -1) {
  Generated g;
  g.stop_after = stop_after;
  p.callback = collect;
  p.user_data = &g;
  g.result.struct_size = sizeof g.result;
  g.status = chimera_generate(c, prompt.data(), prompt.size(), &p, &g.result);
  return g;
}

inline std::vector<uint8_t> save(chimera_context* c) {
  size_t n = 0;
  EXPECT_EQ(chimera_state_save(c, nullptr, 0, &n), CHIMERA_ERR_BUFFER_TOO_SMALL);
  std::vector<uint8_t> blob(n);
  EXPECT_EQ(chimera_state_save(c, blob.data(), blob.size(), &n), CHIMERA_OK) << chimera_context_last_error(c);
  EXPECT_EQ(n, blob.size());
  return blob;
}

}  // namespace chimera::capi_test
