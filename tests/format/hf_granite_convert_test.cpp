// Hugging Face -> GGUF for granitehybrid (GraniteMoeHybridForCausalLM,
// Granite 4.0-H). The golden tiny-granitehybrid GGUF (Mamba-2 layers 0 and 2,
// attention layers 1 and 3, four experts top-2 and a shared expert, the
// Granite multipliers) is turned back into the Hugging Face layout: config.json
// with GraniteMoeHybridConfig's fields, model.layers.* tensors with PyTorch
// shapes (mamba.A_log = log(-A), conv1d [C, 1, K], A / D / dt_bias [H], gated
// norm [d_inner]; q/k rows in rotate-half order, the inverse of llama.cpp's
// permutation; gate and up fused into input_linear [E, 2F, d] and the shared
// [2S, d]), a tokenizer.json with the Llama 3 / Granite split holding the
// GGUF's vocabulary. `convert` must give the golden keys (context_length =
// 2^20 as llama.cpp writes it for NoPE hybrids; vocab_size and
// rope.dimension_count are llama.cpp's extra keys), the golden tensors with
// the converted A, bit-identical logits to those weights and the golden
// logits within the F32 tolerance. Also: a dense checkpoint (no experts) gets
// ffn_gate / ffn_up / ffn_down, and errors name the tensor or key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "format/gguf/gguf.h"
#include "format/hf/hf_convert.h"
#include "hf_test_folder.h"
#include "test_util.h"

namespace chimera::format::hf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using hftest::StTensor;

const char* kSplit =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json config_json() {
  return {{"architectures", {"GraniteMoeHybridForCausalLM"}},
          {"model_type", "granitemoehybrid"},
          {"hidden_size", 64},
          {"num_hidden_layers", 4},
          {"layer_types", {"mamba", "attention", "mamba", "attention"}},
          {"intermediate_size", 32},
          {"shared_intermediate_size", 64},
          {"num_local_experts", 4},
          {"num_experts_per_tok", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 4096},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"attention_multiplier", 0.09},
          {"embedding_multiplier", 2.0},
          {"residual_multiplier", 0.6},
          {"logits_scaling", 0.5},
          {"mamba_n_heads", 4},
          {"mamba_d_head", 32},
          {"mamba_d_state", 16},
          {"mamba_n_groups", 1},
          {"mamba_d_conv", 4},
          {"mamba_expand", 2},
          {"mamba_chunk_size", 256},
          {"mamba_conv_bias", true},
          {"mamba_proj_bias", false},
          {"position_embedding_type", "nope"},
          {"attention_bias", false},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", true},
          {"vocab_size", 3400},
          {"bos_token_id", 0},
          {"eos_token_id", 0},
          {"pad_token_id", 0},
          {"router_aux_loss_coef", 0.01},
          {"torch_dtype", "float16"}};
}

// [gate; up] per leading block (expert): rows of `gate` then rows of `up`.
StTensor fuse(const GgufTensorInfo& gate, const GgufTensorInfo& up, const std::string& name) {
  StTensor s = hftest::st_from_gguf(gate, name);
  s.shape[s.shape.size() - 2] *= 2;
  const int64_t blocks = gate.ne.size() > 2 ? gate.ne[2] : 1;
  const size_t half = gate.n_bytes / (size_t)blocks;
  s.bytes.clear();
  for (int64_t e = 0; e < blocks; ++e) {
    s.bytes.insert(s.bytes.end(), gate.data + e * half, gate.data + (e + 1) * half);
    s.bytes.insert(s.bytes.end(), up.data + e * half, up.data + (e + 1) * half);
  }
  return s;
}

// Writes the HF folder; `drop` leaves one tensor out; `dense` writes a
// checkpoint without routed experts (num_local_experts 0).
fs::path write_hf(const std::string& shared, const std::string& tag, const json& config, const std::string& drop = "",
                  std::map<std::string, std::vector<uint8_t>>* ssm_a = nullptr, bool dense = false) {
  auto g = GgufFile::open(shared + "/golden/models/tiny-granitehybrid.gguf");
  EXPECT_TRUE(g.is_ok());
  const GgufFile& f = **g;
  const fs::path dir = test::temp_path("hf-granite-" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<StTensor> ts;
  ts.push_back(hftest::st_from_gguf(*f.find_tensor("token_embd.weight"), "model.embed_tokens.weight"));
  ts.push_back(hftest::st_from_gguf(*f.find_tensor("output_norm.weight"), "model.norm.weight"));
  for (int i = 0; i < 4; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".", p = "model.layers." + std::to_string(i) + ".";
    auto T = [&](const std::string& n) -> const GgufTensorInfo& {
      const GgufTensorInfo* t = f.find_tensor(b + n);
      EXPECT_NE(t, nullptr) << b + n;
      return *t;
    };
    auto add = [&](StTensor s) { ts.push_back(std::move(s)); };
    add(hftest::st_from_gguf(T("attn_norm.weight"), p + "input_layernorm.weight"));
    add(hftest::st_from_gguf(T("ffn_norm.weight"), p + "post_attention_layernorm.weight"));
    if (i % 2 == 0) {
      const GgufTensorInfo& conv = T("ssm_conv1d.weight");
      const int64_t heads = T("ssm_a").n_elements;
      add(hftest::st_from_gguf(T("ssm_in.weight"), p + "mamba.in_proj.weight"));
      add(hftest::st_from_gguf(conv, p + "mamba.conv1d.weight", {conv.ne[1], 1, conv.ne[0]}));
      add(hftest::st_from_gguf(T("ssm_conv1d.bias"), p + "mamba.conv1d.bias"));
      add(hftest::st_from_gguf(T("ssm_dt.bias"), p + "mamba.dt_bias"));
      std::vector<uint8_t> a;
      add(hftest::a_log_from_gguf(T("ssm_a"), p + "mamba.A_log", {heads}, &a));
      if (ssm_a) (*ssm_a)[b + "ssm_a"] = std::move(a);
      add(hftest::st_from_gguf(T("ssm_d"), p + "mamba.D", {heads}));
      add(hftest::st_from_gguf(T("ssm_norm.weight"), p + "mamba.norm.weight", {(int64_t)T("ssm_norm.weight").n_elements}));
      add(hftest::st_from_gguf(T("ssm_out.weight"), p + "mamba.out_proj.weight"));
    } else {
      StTensor q = hftest::st_from_gguf(T("attn_q.weight"), p + "self_attn.q_proj.weight");
      q.bytes = hftest::unpermute(T("attn_q.weight"), 4);
      StTensor k = hftest::st_from_gguf(T("attn_k.weight"), p + "self_attn.k_proj.weight");
      k.bytes = hftest::unpermute(T("attn_k.weight"), 2);
      add(std::move(q));
      add(std::move(k));
      add(hftest::st_from_gguf(T("attn_v.weight"), p + "self_attn.v_proj.weight"));
      add(hftest::st_from_gguf(T("attn_output.weight"), p + "self_attn.o_proj.weight"));
    }
    if (!dense) {
      add(hftest::st_from_gguf(T("ffn_gate_inp.weight"), p + "block_sparse_moe.router.layer.weight"));
      add(fuse(T("ffn_gate_exps.weight"), T("ffn_up_exps.weight"), p + "block_sparse_moe.input_linear.weight"));
      add(hftest::st_from_gguf(T("ffn_down_exps.weight"), p + "block_sparse_moe.output_linear.weight"));
    }
    add(fuse(T("ffn_gate_shexp.weight"), T("ffn_up_shexp.weight"), p + "shared_mlp.input_linear.weight"));
    add(hftest::st_from_gguf(T("ffn_down_shexp.weight"), p + "shared_mlp.output_linear.weight"));
  }
  std::erase_if(ts, [&](const StTensor& t) { return t.name == drop; });
  hftest::write_safetensors(dir / "model.safetensors", ts);
  std::ofstream(dir / "config.json") << config.dump(2);
  json pre = {{"type", "Sequence"},
              {"pretokenizers",
               {{{"type", "Split"}, {"pattern", {{"Regex", kSplit}}}, {"behavior", "Isolated"}, {"invert", false}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  std::ofstream(dir / "tokenizer.json") << hftest::bpe_tokenizer_json(f, pre).dump();
  return dir;
}

TEST(HfGraniteConvert, KeysTensorsVocabAndLogitsEqualTheGoldenGguf) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string golden = shared + "/golden/models/tiny-granitehybrid.gguf";
  auto gg = GgufFile::open(golden);
  ASSERT_TRUE(gg.is_ok());
  std::map<std::string, std::vector<uint8_t>> ssm_a;
  const fs::path dir = write_hf(shared, "ok", config_json(), "", &ssm_a);
  ASSERT_EQ(ssm_a.size(), 2u);
  const std::string ref = test::temp_path("hf-granite-ref.gguf");
  hftest::write_gguf_with(**gg, ref, ssm_a);
  auto rg = GgufFile::open(ref);
  ASSERT_TRUE(rg.is_ok());
  const std::string out = test::temp_path("hf-granite.gguf");
  Status s = convert(dir.string(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->architecture(), "granitehybrid");
  hftest::expect_arch_keys_equal(**g, **gg, "granitehybrid",
                                 {"granitehybrid.vocab_size", "granitehybrid.rope.dimension_count"},
                                 {"granitehybrid.context_length"});
  EXPECT_EQ((*g)->get_int("granitehybrid.context_length"), 1 << 20);
  EXPECT_EQ((*g)->get_int("granitehybrid.vocab_size"), 3400);
  EXPECT_EQ((*g)->get_int("granitehybrid.rope.dimension_count"), 16);
  hftest::expect_tensors_equal(**g, **rg);
  for (const char* k : {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}) {
    ASSERT_NE((*g)->find(k), nullptr) << k;
    EXPECT_TRUE(*(*g)->find(k) == *(*gg)->find(k)) << k;
  }
  hftest::expect_logits_exact_and_near(out, ref, golden);
  fs::remove(ref);
  fs::remove(out);
  fs::remove_all(dir);
}

// num_local_experts 0: the shared MLP becomes the dense ffn_gate / ffn_up / ffn_down.
TEST(HfGraniteConvert, DenseCheckpointGetsThePlainFfn) {
  CHIMERA_REQUIRE_SHARED(shared);
  json c = config_json();
  c["num_local_experts"] = 0;
  c["intermediate_size"] = 64;
  const fs::path dir = write_hf(shared, "dense", c, "", nullptr, /*dense=*/true);
  const std::string out = test::temp_path("hf-granite-dense.gguf");
  Status s = convert(dir.string(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  auto gg = GgufFile::open(shared + "/golden/models/tiny-granitehybrid.gguf");
  ASSERT_TRUE(gg.is_ok());
  EXPECT_EQ((*g)->find("granitehybrid.expert_count"), nullptr);
  EXPECT_EQ((*g)->find_tensor("blk.0.ffn_gate_exps.weight"), nullptr);
  for (const char* n : {"gate", "up", "down"}) {
    const GgufTensorInfo* t = (*g)->find_tensor(std::string("blk.1.ffn_") + n + ".weight");
    const GgufTensorInfo* w = (*gg)->find_tensor(std::string("blk.1.ffn_") + n + "_shexp.weight");
    ASSERT_NE(t, nullptr) << n;
    ASSERT_NE(w, nullptr) << n;
    EXPECT_EQ(t->ne, w->ne) << n;
    ASSERT_EQ(t->n_bytes, w->n_bytes) << n;
    EXPECT_EQ(std::memcmp(t->data, w->data, t->n_bytes), 0) << n;
  }
  fs::remove(out);
  fs::remove_all(dir);
}

TEST(HfGraniteConvert, ErrorsNameTheMissingTensorOrKey) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string out = test::temp_path("hf-granite-bad.gguf");
  auto expect_error = [&](const std::string& tag, const json& config, const std::string& drop, const std::string& needle) {
    const fs::path dir = write_hf(shared, tag, config, drop);
    Status s = convert(dir.string(), out, hftest::checked());
    ASSERT_FALSE(s.is_ok()) << tag;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_FALSE(fs::exists(out));
    fs::remove_all(dir);
  };
  expect_error("drop", config_json(), "model.layers.3.block_sparse_moe.input_linear.weight",
               "model.layers.3.block_sparse_moe.input_linear.weight");
  expect_error("dropm", config_json(), "model.layers.2.mamba.dt_bias", "model.layers.2.mamba.dt_bias");
  json c = config_json();
  c.erase("mamba_n_heads");
  expect_error("nokey", c, "", "mamba_n_heads");
  c = config_json();
  c.erase("layer_types");
  expect_error("notypes", c, "", "layer_types");
  c = config_json();
  c["layer_types"] = {"attention", "attention", "attention", "attention"};
  expect_error("allattn", c, "", "every layer is attention");
  c = config_json();
  c["position_embedding_type"] = "rope";
  expect_error("rope", c, "", "position_embedding_type");
  c = config_json();
  c["head_dim"] = 32;  // llama.cpp would ignore it; the tensors say 16
  expect_error("headdim", c, "", "head_dim");
  c = config_json();
  c["layer_types"] = {"attention", "mamba", "mamba", "attention"};  // layer 0 has no mamba tensors
  expect_error("plan", c, "", "model.layers.0.mamba");
}

// `chimera convert HF_DIR --type q8_0`: the same file as `chimera quantize`
// makes of the converted weights (experts split while writing, then quantized).
TEST(HfGraniteConvert, CliConvertsAndQuantizesInOneStep) {
  CHIMERA_REQUIRE_SHARED(shared);
  std::map<std::string, std::vector<uint8_t>> ssm_a;
  const fs::path dir = write_hf(shared, "cli", config_json(), "", &ssm_a);
  auto gg = GgufFile::open(shared + "/golden/models/tiny-granitehybrid.gguf");
  ASSERT_TRUE(gg.is_ok());
  const std::string ref = test::temp_path("hf-granite-cli-ref.gguf");
  hftest::write_gguf_with(**gg, ref, ssm_a);
  hftest::expect_cli_q8_0_equals_quantized(dir.string(), test::temp_path("hf-granite-q8.gguf"), ref,
                                           "blk.0.ffn_up_exps.weight");
  fs::remove(ref);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace chimera::format::hf
