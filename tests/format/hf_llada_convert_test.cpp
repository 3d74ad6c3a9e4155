// Hugging Face -> GGUF for llada (LLaDAModelLM: GSAI-ML/LLaDA-8B-Instruct).
// The golden tiny-llada GGUF (keys as llama.cpp's LLaDAModel writes them) is
// turned back into the Hugging Face layout LLaDA has: config.json with
// LLaDA-8B-Instruct's OLMo-style fields (d_model, n_heads, mlp_hidden_size,
// max_sequence_length, mask_token_id, weight_tying, ...), model.safetensors
// with the model.transformer.* names and [out, in] shapes, Q/K rows in
// rotate-half order (the inverse of llama.cpp's permutation), and a
// byte-level BPE tokenizer.json whose last id is the mask token. `convert`
// must give the golden llada.* keys, attention.causal / shift_logits false,
// the mask id, add_bos_token forced true (as llama.cpp does), the golden
// tensors byte for byte and bit-identical logits; errors name the missing
// tensor or config key; --type q8_0 equals `chimera quantize`.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

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

// LLaDA-8B-Instruct's config.json fields at tiny-llada's sizes.
json config_json() {
  return {{"architectures", {"LLaDAModelLM"}},
          {"model_type", "llada"},
          {"activation_type", "silu"},
          {"alibi", false},
          {"alibi_bias_max", 8.0},
          {"attention_dropout", 0.0},
          {"attention_layer_norm", false},
          {"block_type", "llama"},
          {"d_model", 64},
          {"embedding_size", 3201},
          {"eos_token_id", 3198},
          {"include_bias", false},
          {"include_qkv_bias", false},
          {"input_emb_norm", false},
          {"layer_norm_type", "rms"},
          {"mask_token_id", 3200},
          {"max_sequence_length", 2048},
          {"mlp_hidden_size", 128},
          {"mlp_ratio", 2},
          {"n_heads", 4},
          {"n_kv_heads", 4},
          {"n_layers", 2},
          {"pad_token_id", 3198},
          {"rms_norm_eps", 1e-05},
          {"rope", true},
          {"rope_full_precision", true},
          {"rope_theta", 10000.0},
          {"scale_logits", false},
          {"use_cache", false},
          {"vocab_size", 3201},
          {"weight_tying", false}};
}

std::string hf_name(const std::string& g) {
  static const std::map<std::string, std::string> global = {{"token_embd.weight", "model.transformer.wte.weight"},
                                                            {"output_norm.weight", "model.transformer.ln_f.weight"},
                                                            {"output.weight", "model.transformer.ff_out.weight"}};
  static const std::map<std::string, std::string> layer = {
      {"attn_norm", "attn_norm"}, {"attn_q", "q_proj"},     {"attn_k", "k_proj"},   {"attn_v", "v_proj"},
      {"attn_output", "attn_out"}, {"ffn_norm", "ff_norm"}, {"ffn_gate", "ff_proj"}, {"ffn_up", "up_proj"},
      {"ffn_down", "ff_out"}};
  if (auto it = global.find(g); it != global.end()) return it->second;
  const size_t a = g.find('.'), b = g.find('.', a + 1), c = g.rfind('.');
  return "model.transformer.blocks." + g.substr(a + 1, b - a - 1) + "." + layer.at(g.substr(b + 1, c - b - 1)) +
         ".weight";
}

// Writes the HF folder; `drop` leaves one tensor out.
fs::path write_hf(const std::string& shared, const std::string& tag, const json& config, const std::string& drop = "") {
  auto g = GgufFile::open(shared + "/golden/models/tiny-llada.gguf");
  EXPECT_TRUE(g.is_ok());
  const fs::path dir = test::temp_path("hf-llada-" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<StTensor> ts;
  for (const GgufTensorInfo& t : (*g)->tensors()) {
    StTensor s = hftest::st_from_gguf(t, hf_name(t.name));
    if (s.name == drop) continue;
    if (t.name.find("attn_q.weight") != std::string::npos || t.name.find("attn_k.weight") != std::string::npos)
      s.bytes = hftest::unpermute(t, 4);
    ts.push_back(std::move(s));
  }
  hftest::write_safetensors(dir / "model.safetensors", ts);
  std::ofstream(dir / "config.json") << config.dump(2);
  std::ofstream(dir / "tokenizer.json")
      << hftest::byte_level_bpe_json(hftest::kLlama3Split, {{3197, "<|startoftext|>"},
                                                             {3198, "<|endoftext|>"},
                                                             {3199, "<|eot_id|>"},
                                                             {3200, "<|mdm_mask|>"}})
             .dump();
  std::ofstream(dir / "tokenizer_config.json")
      << json{{"add_bos_token", false},  // llama.cpp's LLaDA converter writes true whatever this says
              {"bos_token", "<|startoftext|>"},
              {"eos_token", "<|endoftext|>"},
              {"chat_template", *(*g)->get_string("tokenizer.chat_template")}}
             .dump();
  return dir;
}

TEST(HfLladaConvert, KeysTensorsAndLogitsEqualTheGoldenGguf) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string golden = shared + "/golden/models/tiny-llada.gguf";
  auto gg = GgufFile::open(golden);
  ASSERT_TRUE(gg.is_ok());
  const fs::path dir = write_hf(shared, "ok", config_json());
  const std::string out = test::temp_path("hf-llada.gguf");
  Status s = convert(dir.string(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->architecture(), "llada");
  hftest::expect_arch_keys_equal(**g, **gg, "llada");  // the same llada.* keys and values, no others
  EXPECT_EQ((*g)->get_bool("diffusion.shift_logits"), std::optional<bool>(false));
  EXPECT_EQ((*g)->get_bool("llada.attention.causal"), std::optional<bool>(false));
  EXPECT_EQ((*g)->get_int("tokenizer.ggml.mask_token_id"), 3200);
  EXPECT_EQ((*g)->get_bool("tokenizer.ggml.add_bos_token"), std::optional<bool>(true));
  EXPECT_EQ((*g)->get_string("tokenizer.ggml.pre"), std::optional<std::string>("llama-bpe"));
  const GgufValue* toks = (*g)->get_array("tokenizer.ggml.tokens");
  const GgufValue* types = (*g)->get_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(toks && types);
  ASSERT_EQ(toks->arr.size(), 3201u);
  EXPECT_EQ(toks->arr[3200].s, "<|mdm_mask|>");
  EXPECT_EQ(types->arr[3200].as_int(), 3);  // CONTROL
  EXPECT_EQ(toks->arr[3000].s, "[PAD3000]");
  hftest::expect_tensors_equal(**g, **gg);
  const std::vector<float> w = hftest::logits_of(golden), got = hftest::logits_of(out);
  ASSERT_EQ(got.size(), w.size());
  ASSERT_FALSE(w.empty());
  EXPECT_EQ(std::memcmp(got.data(), w.data(), w.size() * 4), 0);
  auto m = models::load_model(out);
  ASSERT_TRUE(m.is_ok());
  EXPECT_TRUE((*m)->info().is_diffusion);
  fs::remove(out);
  fs::remove_all(dir);
}

// weight_tying: true and no model.transformer.ff_out: the head is the
// embedding (no output.weight), and the file loads.
TEST(HfLladaConvert, TiedHeadHasNoOutputTensor) {
  CHIMERA_REQUIRE_SHARED(shared);
  json c = config_json();
  c["weight_tying"] = true;
  const fs::path dir = write_hf(shared, "tied", c, "model.transformer.ff_out.weight");
  const std::string out = test::temp_path("hf-llada-tied.gguf");
  Status s = convert(dir.string(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->find_tensor("output.weight"), nullptr);
  auto m = models::load_model(out);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  fs::remove(out);
  fs::remove_all(dir);
}

TEST(HfLladaConvert, ErrorsNameTheMissingTensorOrKey) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string out = test::temp_path("hf-llada-bad.gguf");
  auto expect_error = [&](const std::string& tag, const json& config, const std::string& drop, const std::string& needle) {
    const fs::path dir = write_hf(shared, tag, config, drop);
    Status s = convert(dir.string(), out, hftest::checked());
    ASSERT_FALSE(s.is_ok()) << tag;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_FALSE(fs::exists(out));
    fs::remove_all(dir);
  };
  expect_error("drop", config_json(), "model.transformer.blocks.1.k_proj.weight",
               "model.transformer.blocks.1.k_proj.weight");
  // Untied (weight_tying false) without the head: named, not silently tied.
  expect_error("nohead", config_json(), "model.transformer.ff_out.weight", "model.transformer.ff_out.weight");
  for (const char* key : {"mask_token_id", "d_model", "n_layers", "mlp_hidden_size", "vocab_size"}) {
    json c = config_json();
    c.erase(key);
    expect_error(std::string("no-") + key, c, "", key);
  }
  json c = config_json();
  c["include_qkv_bias"] = true;
  expect_error("bias", c, "", "include_qkv_bias");
  c = config_json();
  c["mask_token_id"] = 3201;
  expect_error("mask", c, "", "mask_token_id");
  c = config_json();
  c["block_type"] = "sequential";  // fused att_proj layout
  expect_error("block", c, "", "block_type");
}

// `chimera convert HF_DIR --type q8_0`: the same file as `chimera quantize`
// makes of the golden GGUF.
TEST(HfLladaConvert, CliConvertsAndQuantizesInOneStep) {
  CHIMERA_REQUIRE_SHARED(shared);
  const fs::path dir = write_hf(shared, "cli", config_json());
  hftest::expect_cli_q8_0_equals_quantized(dir.string(), test::temp_path("hf-llada-q8.gguf"),
                                           shared + "/golden/models/tiny-llada.gguf", "blk.0.attn_q.weight");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace chimera::format::hf
