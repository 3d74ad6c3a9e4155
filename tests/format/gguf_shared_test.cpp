// Reads every real GGUF in the shared folders (golden models, stories260K,
// llama.cpp vocab-only files) and spot-checks them against
// shared/golden/README.md: architecture, tensor count, tensor types per kind,
// and known tensor shapes. Skips (never passes) when the shared data is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "format/gguf/gguf.h"
#include "test_util.h"

namespace chimera::format {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<GgufFile> open_ok(const std::string& path) {
  auto r = GgufFile::open(path);
  EXPECT_TRUE(r.is_ok()) << path << ": " << r.status().message();
  if (!r.is_ok()) return nullptr;
  return std::move(r).value();
}

std::map<std::string, int> count_types(const GgufFile& f) {
  std::map<std::string, int> m;
  for (const auto& t : f.tensors()) ++m[ggml_type_name(t.type)];
  return m;
}

void expect_consistent(const GgufFile& f) {
  EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
  for (const auto& t : f.tensors()) {
    const uint64_t begin = f.data_offset() + t.offset;
    EXPECT_LE(begin + t.n_bytes, f.file_size()) << t.name;
    EXPECT_EQ(t.n_bytes, ggml_row_size(t.type, t.ne[0]) * (t.n_elements / (uint64_t)t.ne[0])) << t.name;
  }
}

TEST(GgufSharedTest, EveryGgufParses) {
  CHIMERA_REQUIRE_SHARED(shared);
  int n = 0;
  for (const char* sub : {"golden/models", "models", "tokenizers/llama.cpp-vocab"}) {
    const fs::path dir = fs::path(shared) / sub;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".gguf") continue;
      auto f = open_ok(e.path().string());
      if (!f) continue;
      ++n;
      EXPECT_FALSE(f->architecture().empty()) << e.path();
      EXPECT_TRUE(f->version() == 2 || f->version() == 3) << e.path();
      expect_consistent(*f);
    }
  }
  EXPECT_GE(n, 20);
}

struct Expected {
  const char* file;  // relative to shared/
  const char* arch;
  size_t n_tensors;
  std::map<std::string, int> types;
  const char* tensor;  // a known tensor, its type and shape
  const char* tensor_type;
  std::vector<int64_t> shape;
};

TEST(GgufSharedTest, GoldenModelsMatchReadme) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::vector<Expected> cases = {
      {"golden/models/tiny-llama.gguf", "llama", 21, {{"F16", 16}, {"F32", 5}}, "token_embd.weight", "F16", {64, 3200}},
      {"golden/models/tiny-mamba.gguf", "mamba", 22, {{"F16", 9}, {"F32", 13}}, "blk.0.ssm_in.weight", "F16", {64, 256}},
      {"golden/models/tiny-mamba2.gguf", "mamba2", 21, {{"F16", 6}, {"F32", 15}}, "output.weight", "F16", {64, 3600}},
      {"golden/models/tiny-granitehybrid.gguf", "granitehybrid", 62, {{"F16", 37}, {"F32", 25}}, "blk.0.attn_norm.weight", "F32", {64}},
      {"golden/models/tiny-phimoe-hf.gguf", "phimoe", 37, {{"F16", 16}, {"F32", 21}}, "output.weight", "F16", {64, 3200}},
      {"golden/models/tiny-llada.gguf", "llada", 21, {{"F16", 16}, {"F32", 5}}, "blk.1.attn_q.weight", "F16", {64, 64}},
      {"models/stories260K.gguf", "llama", 48, {{"F32", 48}}, "token_embd.weight", "F32", {64, 512}},
      {"golden/models/quant-llama-Q8_0.gguf", "llama", 20, {{"F32", 5}, {"Q8_0", 15}}, "token_embd.weight", "Q8_0", {256, 32000}},
      {"golden/models/quant-llama-Q4_0.gguf", "llama", 20, {{"F32", 5}, {"Q4_0", 14}, {"Q6_K", 1}}, "token_embd.weight", "Q6_K", {256, 32000}},
      {"golden/models/quant-llama-Q4_K_M.gguf", "llama", 20, {{"F32", 5}, {"Q4_K", 12}, {"Q6_K", 3}}, "blk.0.attn_q.weight", "Q4_K", {256, 256}},
      {"golden/models/quant-llama-Q6_K.gguf", "llama", 20, {{"F32", 5}, {"Q6_K", 15}}, "blk.1.ffn_down.weight", "Q6_K", {512, 256}},
      {"golden/models/quant-llama-TQ2_0.gguf", "llama", 20, {{"F32", 5}, {"Q6_K", 1}, {"TQ2_0", 14}}, "blk.0.ffn_up.weight", "TQ2_0", {256, 512}},
      {"golden/models/quant-llama-TQ1_0.gguf", "llama", 20, {{"F32", 5}, {"Q6_K", 1}, {"TQ1_0", 14}}, "blk.0.ffn_gate.weight", "TQ1_0", {256, 512}},
      {"golden/models/tiny-bitnet-TQ2_0.gguf", "bitnet", 24, {{"F32", 9}, {"Q6_K", 1}, {"TQ2_0", 14}}, "token_embd.weight", "Q6_K", {256, 3200}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    auto f = open_ok((fs::path(shared) / c.file).string());
    if (!f) continue;
    EXPECT_EQ(f->architecture(), c.arch);
    EXPECT_EQ(f->tensors().size(), c.n_tensors);
    EXPECT_EQ(count_types(*f), c.types);
    const GgufTensorInfo* t = f->find_tensor(c.tensor);
    ASSERT_NE(t, nullptr) << c.tensor;
    EXPECT_EQ(ggml_type_name(t->type), c.tensor_type);
    ASSERT_EQ(t->ne.size(), c.shape.size());
    for (size_t d = 0; d < c.shape.size(); ++d)
      EXPECT_EQ(t->ne[d], c.shape[d]) << c.tensor << " dim " << d;
    // Every tensor's bytes lie inside the file.
    expect_consistent(*f);
  }
}

TEST(GgufSharedTest, Stories260KMetadata) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto f = open_ok(shared + "/models/stories260K.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->get_int("llama.context_length"), 128);
  EXPECT_EQ(f->get_int("llama.block_count"), 5);
  EXPECT_EQ(f->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f->get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f->get_int("llama.feed_forward_length"), 172);
  const GgufValue* tokens = f->get_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->arr.size(), 512u);
  EXPECT_EQ(tokens->arr[1].s, "<s>");
  EXPECT_EQ(f->tensor_bytes(), 1171200u);
}

TEST(GgufSharedTest, GranitehybridPerLayerKvHeads) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto f = open_ok(shared + "/golden/models/tiny-granitehybrid.gguf");
  ASSERT_NE(f, nullptr);
  auto kv = f->get_per_layer_int("granitehybrid.attention.head_count_kv", 4, std::nullopt);
  ASSERT_TRUE(kv.is_ok()) << kv.status().message();
  EXPECT_EQ(kv.value(), (std::vector<int64_t>{0, 2, 0, 2}));  // layers MAMA
  EXPECT_EQ(f->get_bool("granitehybrid.rope.scaling.finetuned"), false);
}

TEST(GgufSharedTest, VocabOnlyFiles) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto f = open_ok(shared + "/tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->architecture(), "gpt2");
  const GgufValue* tokens = f->get_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->arr.size(), 50257u);
  const GgufValue* merges = f->get_array("tokenizer.ggml.merges");
  ASSERT_NE(merges, nullptr);
  EXPECT_EQ(merges->arr.size(), 50000u);
  EXPECT_EQ(merges->arr[0].s, "\xc4\xa0 t");
}

}  // namespace
}  // namespace chimera::format
