// Hugging Face -> GGUF for phimoe (PhiMoEForCausalLM: Phi-3.5-MoE,
// Phi-tiny-MoE). The golden tiny-phimoe-hf GGUF is turned back into the
// Hugging Face layout: config.json with PhiMoEConfig's fields, LayerNorm /
// attention / lm_head biases, the router as block_sparse_moe.gate and every
// expert as its own experts.{e}.w1 / w2 / w3 [out, in] tensor (the converter
// stacks them into ffn_*_exps), a SentencePiece tokenizer.model rendered from
// the GGUF's pieces plus the Phi chat tokens in tokenizer_config.json's
// added_tokens_decoder. `convert` must give the golden phimoe.* keys (plus the
// sliding_window llama.cpp always writes), the golden tensors byte for byte,
// the golden vocabulary's pieces and scores, and bit-identical logits. Also:
// an explicit head_dim (Phi-tiny-MoE) writes key_length / value_length and
// the rope dimension; LongRoPE factors become rope_factors_long / _short;
// errors name the missing expert tensor or config key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
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

constexpr int kBasePieces = 3136;  // the SentencePiece model; 3136.. are the added Phi tokens

json config_json() {
  return {{"architectures", {"PhiMoEForCausalLM"}},
          {"model_type", "phimoe"},
          {"hidden_size", 64},
          {"num_hidden_layers", 2},
          {"intermediate_size", 128},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"num_local_experts", 4},
          {"num_experts_per_tok", 2},
          {"max_position_embeddings", 4096},
          {"original_max_position_embeddings", 4096},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"rope_scaling", nullptr},
          {"sliding_window", 131072},
          {"attention_bias", true},
          {"lm_head_bias", true},
          {"hidden_act", "silu"},
          {"router_jitter_noise", 0.01},
          {"input_jitter_noise", 0.01},
          {"tie_word_embeddings", false},
          {"vocab_size", 3200},
          {"bos_token_id", 1},
          {"eos_token_id", 3136},
          {"pad_token_id", 3136},
          {"torch_dtype", "float16"}};
}

void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s += (char)(0x80 | (v & 0x7F));
    v >>= 7;
  }
  s += (char)v;
}

// A tokenizer.model (ModelProto with only its `pieces`) of the first
// kBasePieces GGUF tokens: id 0 unknown, 1 and 2 control, <0xHH> byte, others normal.
std::string spm_model(const GgufFile& g) {
  const GgufValue* toks = g.get_array("tokenizer.ggml.tokens");
  const GgufValue* scores = g.get_array("tokenizer.ggml.scores");
  const GgufValue* types = g.get_array("tokenizer.ggml.token_type");
  EXPECT_TRUE(toks && scores && types);
  std::string out;
  if (!toks || !scores || !types) return out;
  for (int i = 0; i < kBasePieces; ++i) {
    const int type = i == 0 ? 2 : i < 3 ? 3 : types->arr[(size_t)i].as_int() == 6 ? 6 : 1;
    std::string p;
    p += (char)0x0A;
    put_varint(p, toks->arr[(size_t)i].s.size());
    p += toks->arr[(size_t)i].s;
    p += (char)0x15;
    const float sc = (float)scores->arr[(size_t)i].f;
    p.append((const char*)&sc, 4);
    p += (char)0x18;
    put_varint(p, (uint64_t)type);
    out += (char)0x0A;
    put_varint(out, p.size());
    out += p;
  }
  return out;
}

std::string hf_name(const std::string& g) {
  static const std::vector<std::pair<std::string, std::string>> global = {
      {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
      {"output_norm.bias", "model.norm.bias"},             {"output.weight", "lm_head.weight"},
      {"output.bias", "lm_head.bias"}};
  static const std::vector<std::pair<std::string, std::string>> layer = {
      {"attn_norm", "input_layernorm"},   {"attn_q", "self_attn.q_proj"},       {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},     {"attn_output", "self_attn.o_proj"},  {"ffn_norm", "post_attention_layernorm"},
      {"ffn_gate_inp", "block_sparse_moe.gate"}};
  for (const auto& [k, v] : global)
    if (g == k) return v;
  const size_t a = g.find('.'), b = g.find('.', a + 1), c = g.rfind('.');
  const std::string base = g.substr(b + 1, c - b - 1), suffix = g.substr(c);
  for (const auto& [k, v] : layer)
    if (base == k) return "model.layers." + g.substr(a + 1, b - a - 1) + "." + v + suffix;
  return "";
}

// Writes the HF folder; `drop` leaves one tensor out.
fs::path write_hf(const std::string& shared, const std::string& tag, const json& config, const std::string& drop = "") {
  auto g = GgufFile::open(shared + "/golden/models/tiny-phimoe-hf.gguf");
  EXPECT_TRUE(g.is_ok());
  const fs::path dir = test::temp_path("hf-phimoe-" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<StTensor> ts;
  for (const GgufTensorInfo& t : (*g)->tensors()) {
    static const std::vector<std::pair<std::string, std::string>> exps = {
        {"ffn_gate_exps", "w1"}, {"ffn_down_exps", "w2"}, {"ffn_up_exps", "w3"}};
    bool stacked = false;
    for (const auto& [k, w] : exps) {
      if (t.name.find(k) == std::string::npos) continue;
      stacked = true;
      const std::string i = t.name.substr(4, t.name.find('.', 4) - 4);
      const size_t per = t.n_bytes / (size_t)t.ne[2];
      for (int64_t e = 0; e < t.ne[2]; ++e) {
        StTensor s;
        s.name = "model.layers." + i + ".block_sparse_moe.experts." + std::to_string(e) + "." + w + ".weight";
        s.dtype = "F16";
        s.shape = {t.ne[1], t.ne[0]};
        s.bytes.assign(t.data + e * per, t.data + (e + 1) * per);
        ts.push_back(std::move(s));
      }
    }
    if (stacked) continue;
    const std::string n = hf_name(t.name);
    EXPECT_FALSE(n.empty()) << t.name;
    ts.push_back(hftest::st_from_gguf(t, n));
  }
  std::erase_if(ts, [&](const StTensor& t) { return t.name == drop; });
  hftest::write_safetensors(dir / "model.safetensors", ts);
  std::ofstream(dir / "config.json") << config.dump(2);
  std::ofstream(dir / "tokenizer.model", std::ios::binary) << spm_model(**g);
  json dec = json::object();
  const GgufValue* toks = (*g)->get_array("tokenizer.ggml.tokens");
  for (int i = kBasePieces; i < kBasePieces + 11; ++i)
    dec[std::to_string(i)] = {{"content", toks->arr[(size_t)i].s}, {"special", true}, {"normalized", false}};
  std::ofstream(dir / "tokenizer_config.json")
      << json{{"add_bos_token", true},
              {"add_eos_token", false},
              {"added_tokens_decoder", dec},
              {"bos_token", "<s>"},
              {"eos_token", "<|endoftext|>"},
              {"chat_template", *(*g)->get_string("tokenizer.chat_template")}}
             .dump();
  return dir;
}

TEST(HfPhimoeConvert, KeysTensorsVocabAndLogitsEqualTheGoldenGguf) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string golden = shared + "/golden/models/tiny-phimoe-hf.gguf";
  auto gg = GgufFile::open(golden);
  ASSERT_TRUE(gg.is_ok());
  const fs::path dir = write_hf(shared, "ok", config_json());
  const std::string out = test::temp_path("hf-phimoe.gguf");
  Status s = convert(dir.string(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->architecture(), "phimoe");
  hftest::expect_arch_keys_equal(**g, **gg, "phimoe", {"phimoe.attention.sliding_window"});
  EXPECT_EQ((*g)->get_int("phimoe.attention.sliding_window"), 131072);
  EXPECT_EQ((*g)->find("phimoe.attention.key_length"), nullptr);  // no explicit head_dim
  hftest::expect_tensors_equal(**g, **gg);
  // The vocabulary: pieces and scores of the SentencePiece model and the added
  // Phi tokens (CONTROL), then [PAD<id>] up to vocab_size; the special ids.
  const GgufValue* toks = (*g)->get_array("tokenizer.ggml.tokens");
  const GgufValue* want = (*gg)->get_array("tokenizer.ggml.tokens");
  const GgufValue* sc = (*g)->get_array("tokenizer.ggml.scores");
  const GgufValue* wsc = (*gg)->get_array("tokenizer.ggml.scores");
  const GgufValue* ty = (*g)->get_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(toks && want && sc && wsc && ty);
  ASSERT_EQ(toks->arr.size(), 3200u);
  for (size_t i = 0; i < kBasePieces + 11; ++i) {
    EXPECT_EQ(toks->arr[i].s, want->arr[i].s) << i;
    EXPECT_EQ(sc->arr[i].f, wsc->arr[i].f) << i;
  }
  for (size_t i = kBasePieces; i < kBasePieces + 11; ++i) EXPECT_EQ(ty->arr[i].as_int(), 3) << i;
  EXPECT_EQ(toks->arr[3199].s, "[PAD3199]");
  for (const char* k : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id",
                        "tokenizer.ggml.add_bos_token", "tokenizer.chat_template"}) {
    ASSERT_NE((*g)->find(k), nullptr) << k;
    EXPECT_TRUE(*(*g)->find(k) == *(*gg)->find(k)) << k;
  }
  const std::vector<float> w = hftest::logits_of(golden), got = hftest::logits_of(out);
  ASSERT_EQ(got.size(), w.size());
  ASSERT_FALSE(w.empty());
  EXPECT_EQ(std::memcmp(got.data(), w.data(), w.size() * 4), 0);
  fs::remove(out);
  fs::remove_all(dir);
}

// Phi-tiny-MoE spells head_dim out; Phi-3.5-MoE has LongRoPE factors.
TEST(HfPhimoeConvert, HeadDimAndLongRope) {
  CHIMERA_REQUIRE_SHARED(shared);
  json c = config_json();
  c["head_dim"] = 16;  // = hidden / heads here, but explicit
  c["max_position_embeddings"] = 131072;
  std::vector<float> lf(8), sf(8);
  for (int i = 0; i < 8; ++i) {
    lf[(size_t)i] = 1.0f + 0.5f * (float)i;
    sf[(size_t)i] = 1.0f + 0.125f * (float)i;
  }
  c["rope_scaling"] = {{"type", "longrope"}, {"long_factor", lf}, {"short_factor", sf},
                       {"long_mscale", 1.243163121016122}, {"short_mscale", 1.243163121016122}};
  const fs::path dir = write_hf(shared, "rope", c);
  const std::string out = test::temp_path("hf-phimoe-rope.gguf");
  Status s = convert(dir.string(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->get_int("phimoe.attention.key_length"), 16);
  EXPECT_EQ((*g)->get_int("phimoe.attention.value_length"), 16);
  EXPECT_EQ((*g)->get_int("phimoe.rope.dimension_count"), 16);
  EXPECT_EQ((*g)->get_int("phimoe.context_length"), 131072);
  EXPECT_EQ((*g)->get_int("phimoe.rope.scaling.original_context_length"), 4096);
  // llama.cpp's attention factor sqrt(1 + ln(32) / ln(4096)), and the config's mscale.
  EXPECT_FLOAT_EQ((float)*(*g)->get_float("phimoe.rope.scaling.attn_factor"),
                  (float)std::sqrt(1 + std::log(32.0) / std::log(4096.0)));
  EXPECT_FLOAT_EQ((float)*(*g)->get_float("phimoe.rope.scaling.long_mscale"), 1.243163121016122f);
  for (const auto& [name, v] : {std::pair{"rope_factors_long.weight", &lf}, std::pair{"rope_factors_short.weight", &sf}}) {
    const GgufTensorInfo* t = (*g)->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->ne, (std::vector<int64_t>{8})) << name;
    EXPECT_EQ(std::memcmp(t->data, v->data(), 32), 0) << name;
  }
  auto m = models::load_model(out);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  fs::remove(out);
  fs::remove_all(dir);
}

TEST(HfPhimoeConvert, ErrorsNameTheMissingTensorOrKey) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string out = test::temp_path("hf-phimoe-bad.gguf");
  auto expect_error = [&](const std::string& tag, const json& config, const std::string& drop, const std::string& needle) {
    const fs::path dir = write_hf(shared, tag, config, drop);
    Status s = convert(dir.string(), out, hftest::checked());
    ASSERT_FALSE(s.is_ok()) << tag;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_FALSE(fs::exists(out));
    fs::remove_all(dir);
  };
  expect_error("drop", config_json(), "model.layers.1.block_sparse_moe.experts.2.w3.weight",
               "model.layers.1.block_sparse_moe.experts.2.w3.weight");
  json c = config_json();
  c.erase("num_local_experts");
  expect_error("nokey", c, "", "num_local_experts");
  c = config_json();
  c["num_local_experts"] = 3;  // the checkpoint has a fourth expert no rule claims
  expect_error("experts", c, "", "experts.3");
  c = config_json();
  c["rope_scaling"] = {{"type", "longrope"}, {"long_factor", {1.0, 2.0}}, {"short_factor", {1.0, 2.0}}};
  expect_error("factors", c, "", "long_factor");
}

// `chimera convert HF_DIR --type q8_0`: the same file as `chimera quantize`
// makes of the golden GGUF (experts stacked while writing, then quantized).
TEST(HfPhimoeConvert, CliConvertsAndQuantizesInOneStep) {
  CHIMERA_REQUIRE_SHARED(shared);
  const fs::path dir = write_hf(shared, "cli", config_json());
  hftest::expect_cli_q8_0_equals_quantized(dir.string(), test::temp_path("hf-phimoe-q8.gguf"),
                                           shared + "/golden/models/tiny-phimoe-hf.gguf", "blk.0.ffn_up_exps.weight");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace chimera::format::hf
