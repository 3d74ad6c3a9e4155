// Hugging Face -> GGUF for dream (DreamModel: Dream-org/Dream-v0-Instruct-7B).
// There is no golden Dream GGUF, so the golden path is built the way the model
// tests build one (tests/models/dream_bias_test.cpp): tiny-llada's weights
// under arch "dream" with random q/k/v biases, holding exactly the keys
// llama.cpp's DreamModel writes (the text-model keys, attention.causal =
// false, the mask id; no vocab_size, rope.dimension_count or shift_logits),
// written by our GGUF writer. That file is turned into Dream's Hugging Face
// layout — config.json with Dream-v0-Instruct-7B's Qwen2 fields, the Qwen2
// tensor names with q/k/v biases (no Q/K permutation: NEOX RoPE), a
// tokenizer.json with the Qwen2 split — and `convert` must give the same
// dream.* keys, the tensors byte for byte and bit-identical logits; errors
// name the missing tensor or config key; --type q8_0 equals `chimera quantize`.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "format/gguf/gguf.h"
#include "format/hf/hf_convert.h"
#include "hf_test_folder.h"
#include "models/model.h"
#include "test_util.h"

namespace chimera::format::hf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using hftest::StTensor;

// Dream-v0-Instruct-7B's config.json fields at tiny-llada's sizes.
json config_json() {
  return {{"architectures", {"DreamModel"}},
          {"model_type", "Dream"},
          {"attention_dropout", 0.0},
          {"bos_token_id", 3197},
          {"eos_token_id", 3197},
          {"pad_token_id", 3197},
          {"mask_token_id", 3200},
          {"hidden_act", "silu"},
          {"hidden_size", 64},
          {"initializer_range", 0.02},
          {"intermediate_size", 128},
          {"max_position_embeddings", 2048},
          {"max_window_layers", 2},
          {"num_attention_heads", 4},
          {"num_hidden_layers", 2},
          {"num_key_value_heads", 4},
          {"rms_norm_eps", 1e-05},
          {"rope_scaling", nullptr},
          {"rope_theta", 10000.0},
          {"sliding_window", nullptr},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"use_cache", false},
          {"use_sliding_window", false},
          {"vocab_size", 3201}};
}

// The golden Dream GGUF (see the file comment) at `path`.
void write_golden_dream(const std::string& shared, const std::string& path) {
  auto g = GgufFile::open(shared + "/golden/models/tiny-llada.gguf");
  ASSERT_TRUE(g.is_ok());
  GgufWriter w;
  for (const auto& [key, val] : (*g)->metadata()) {
    if (key == "diffusion.shift_logits" || key == "llada.vocab_size" || key == "llada.rope.dimension_count") continue;
    if (key == "general.architecture") {
      w.set(key, GgufValue::from_string("dream"));
    } else if (key.rfind("llada.", 0) == 0) {
      w.set("dream." + key.substr(6), val);
    } else {
      w.set(key, val);
    }
  }
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.f, 0.5f);
  for (const GgufTensorInfo& t : (*g)->tensors()) {
    ASSERT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
    for (const char* m : {"attn_q", "attn_k", "attn_v"}) {
      if (t.name.find(std::string(".") + m + ".weight") == std::string::npos) continue;
      std::vector<float> b((size_t)t.ne[1]);
      for (float& x : b) x = nd(rng);
      std::vector<uint8_t> bytes(b.size() * 4);
      std::memcpy(bytes.data(), b.data(), bytes.size());
      ASSERT_TRUE(w.add_tensor_copy(t.name.substr(0, t.name.size() - 6) + "bias", GgmlType::F32, {t.ne[1]},
                                    std::move(bytes))
                      .is_ok());
    }
  }
  ASSERT_TRUE(w.write(path).is_ok());
}

std::string hf_name(const std::string& g) {
  static const std::map<std::string, std::string> global = {{"token_embd.weight", "model.embed_tokens.weight"},
                                                            {"output_norm.weight", "model.norm.weight"},
                                                            {"output.weight", "lm_head.weight"}};
  static const std::map<std::string, std::string> layer = {
      {"attn_norm.weight", "input_layernorm.weight"},    {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},          {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_k.bias", "self_attn.k_proj.bias"},          {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_v.bias", "self_attn.v_proj.bias"},          {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},           {"ffn_down.weight", "mlp.down_proj.weight"}};
  if (auto it = global.find(g); it != global.end()) return it->second;
  const size_t a = g.find('.'), b = g.find('.', a + 1);
  return "model.layers." + g.substr(a + 1, b - a - 1) + "." + layer.at(g.substr(b + 1));
}

// Writes the HF folder from the golden Dream GGUF; `drop` leaves one tensor out.
fs::path write_hf(const std::string& golden, const std::string& tag, const json& config, const std::string& drop = "") {
  auto g = GgufFile::open(golden);
  EXPECT_TRUE(g.is_ok());
  const fs::path dir = test::temp_path("hf-dream-" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<StTensor> ts;
  for (const GgufTensorInfo& t : (*g)->tensors()) {
    StTensor s = hftest::st_from_gguf(t, hf_name(t.name));
    if (s.name != drop) ts.push_back(std::move(s));
  }
  hftest::write_safetensors(dir / "model.safetensors", ts);
  std::ofstream(dir / "config.json") << config.dump(2);
  std::ofstream(dir / "tokenizer.json")
      << hftest::byte_level_bpe_json(hftest::kQwen2Split, {{3197, "<|endoftext|>"},
                                                            {3198, "<|im_start|>"},
                                                            {3199, "<|im_end|>"},
                                                            {3200, "<|mask|>"}})
             .dump();
  return dir;
}

struct DreamFixture : ::testing::Test {
  void SetUp() override {
    CHIMERA_REQUIRE_SHARED(dir);
    shared = dir;
    golden = test::temp_path("hf-dream-golden.gguf");
    write_golden_dream(shared, golden);
  }
  void TearDown() override {
    if (!golden.empty()) fs::remove(golden);
  }
  std::string shared, golden;
};

TEST_F(DreamFixture, KeysTensorsAndLogitsEqualTheGoldenGguf) {
  auto gg = GgufFile::open(golden);
  ASSERT_TRUE(gg.is_ok());
  const fs::path dir = write_hf(golden, "ok", config_json());
  const std::string out = test::temp_path("hf-dream.gguf");
  Status s = convert(dir.string(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->architecture(), "dream");
  hftest::expect_arch_keys_equal(**g, **gg, "dream");  // the same dream.* keys and values, no others
  EXPECT_EQ((*g)->get_bool("dream.attention.causal"), std::optional<bool>(false));
  EXPECT_EQ((*g)->find("diffusion.shift_logits"), nullptr);  // llama.cpp leaves it to the default (true)
  EXPECT_EQ((*g)->get_int("tokenizer.ggml.mask_token_id"), 3200);
  EXPECT_EQ((*g)->get_string("tokenizer.ggml.pre"), std::optional<std::string>("qwen2"));
  hftest::expect_tensors_equal(**g, **gg);
  ASSERT_NE((*g)->find_tensor("blk.1.attn_v.bias"), nullptr);
  const std::vector<float> w = hftest::logits_of(golden), got = hftest::logits_of(out);
  ASSERT_EQ(got.size(), w.size());
  ASSERT_FALSE(w.empty());
  EXPECT_EQ(std::memcmp(got.data(), w.data(), w.size() * 4), 0);
  fs::remove(out);
  fs::remove_all(dir);
}

TEST_F(DreamFixture, ErrorsNameTheMissingTensorOrKey) {
  const std::string out = test::temp_path("hf-dream-bad.gguf");
  auto expect_error = [&](const std::string& tag, const json& config, const std::string& drop, const std::string& needle) {
    const fs::path dir = write_hf(golden, tag, config, drop);
    Status s = convert(dir.string(), out, hftest::checked());
    ASSERT_FALSE(s.is_ok()) << tag;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_FALSE(fs::exists(out));
    fs::remove_all(dir);
  };
  expect_error("bias", config_json(), "model.layers.0.self_attn.k_proj.bias", "model.layers.0.self_attn.k_proj.bias");
  expect_error("head", config_json(), "lm_head.weight", "lm_head.weight");  // untied
  for (const char* key : {"mask_token_id", "hidden_size", "num_hidden_layers", "intermediate_size"}) {
    json c = config_json();
    c.erase(key);
    expect_error(std::string("no-") + key, c, "", key);
  }
  json c = config_json();
  c["use_sliding_window"] = true;
  expect_error("swa", c, "", "use_sliding_window");
  c = config_json();
  c["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  expect_error("rope", c, "", "rope_scaling");
}

TEST_F(DreamFixture, CliConvertsAndQuantizesInOneStep) {
  const fs::path dir = write_hf(golden, "cli", config_json());
  hftest::expect_cli_q8_0_equals_quantized(dir.string(), test::temp_path("hf-dream-q8.gguf"), golden,
                                           "blk.0.attn_q.weight");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace chimera::format::hf
