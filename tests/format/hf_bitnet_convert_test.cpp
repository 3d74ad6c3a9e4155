// Hugging Face -> GGUF for bitnet (BitNetForCausalLM: microsoft/bitnet-b1.58-2B-4T
// and its -bf16 master weights). The golden tiny-bitnet TQ2_0 GGUF (ternary
// codes t with one scale g per matrix, llama.cpp's reference logits) becomes
// the two Hugging Face layouts the model is published in:
//  - -bf16: BF16 master weights W = bf16(g * k * (1.5 t + u)), u uniform in
//    [-0.2, 0.2] and k normalising mean|W| to about g, so that llama.cpp's
//    weight_quant (absmean ternarization) gives the golden codes back;
//  - packed: U8 codes [rows/4, cols] (row r + j * rows/4 in bits 2j) and a
//    BF16 weight_scale, for linear_class "bitlinear" (W = t / scale, as
//    llama.cpp's dequant_bitnet) and "autobitlinear" (W = t * scale);
// with the 2B-4T config.json fields and names (self_attn.attn_sub_norm,
// mlp.ffn_sub_norm, tied embeddings). The reference GGUF is the golden file
// with the weights a converter must produce (computed here from the
// definitions: s = max(mean|W|, 1e-5), clamp(round(W / s), -1, 1) / (1 / s)
// rounded to BF16; t / scale or t * scale) written by our GGUF writer:
// `convert` must give its tensors byte for byte and bit-identical logits;
// `--type tq2_0` must equal `chimera quantize` of it, store exactly the golden
// ternary codes, and give logits within the golden tolerance of llama.cpp's.
// Also: hidden_act relu2 (2B-4T) writes bitnet.ffn_activation, and errors
// name the missing tensor or config key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/fp16.h"
#include "format/gguf/gguf.h"
#include "format/hf/hf_convert.h"
#include "hf_test_folder.h"
#include "kernels/type_traits.h"
#include "models/golden_case.h"
#include "models/context.h"
#include "models/model.h"
#include "test_util.h"

namespace chimera::format::hf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using hftest::StTensor;

enum class Layout { kMaster, kPackedBitLinear, kPackedAutoBitLinear };

// BitNet b1.58 2B-4T's config.json fields at tiny-bitnet's sizes (SiLU: the
// golden file is llama.cpp's arch "bitnet"; 2B-4T's relu2 is tested below).
json config_json(Layout layout) {
  json q = {{"quant_method", "bitnet"}, {"linear_class", "autobitlinear"}, {"quantization_mode", "online"}};
  if (layout == Layout::kPackedBitLinear) q = {{"quant_method", "bitnet"}, {"linear_class", "bitlinear"},
                                               {"quantization_mode", "offline"}};
  if (layout == Layout::kPackedAutoBitLinear) q["quantization_mode"] = "offline";
  return {{"architectures", {"BitNetForCausalLM"}},
          {"model_type", "bitnet"},
          {"bos_token_id", 3198},
          {"eos_token_id", 3199},
          {"hidden_act", "silu"},
          {"hidden_size", 256},
          {"initializer_range", 0.02},
          {"intermediate_size", 512},
          {"max_position_embeddings", 2048},
          {"rms_norm_eps", 1e-05},
          {"num_attention_heads", 8},
          {"num_hidden_layers", 2},
          {"num_key_value_heads", 2},
          {"rope_theta", 10000.0},
          {"tie_word_embeddings", true},
          {"torch_dtype", "bfloat16"},
          {"use_cache", true},
          {"vocab_size", 3200},
          {"quantization_config", q}};
}

std::string hf_name(const std::string& g) {
  static const std::map<std::string, std::string> global = {{"token_embd.weight", "model.embed_tokens.weight"},
                                                            {"output_norm.weight", "model.norm.weight"}};
  static const std::map<std::string, std::string> layer = {
      {"attn_norm", "input_layernorm"},       {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},         {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},    {"attn_sub_norm", "self_attn.attn_sub_norm"},
      {"ffn_norm", "post_attention_layernorm"}, {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},              {"ffn_down", "mlp.down_proj"},
      {"ffn_sub_norm", "mlp.ffn_sub_norm"}};
  if (auto it = global.find(g); it != global.end()) return it->second;
  const size_t a = g.find('.'), b = g.find('.', a + 1), c = g.rfind('.');
  return "model.layers." + g.substr(a + 1, b - a - 1) + "." + layer.at(g.substr(b + 1, c - b - 1)) + ".weight";
}

float bf16_round(float v) { return bf16_to_f32(f32_to_bf16(v)); }

std::vector<float> dequant(const GgufTensorInfo& t) {
  std::vector<float> v((size_t)t.n_elements);
  kernels::weight_type_traits(t.type)->row_to_f32(t.data, v.data(), (int64_t)v.size());
  return v;
}

std::vector<uint8_t> bf16_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = f32_to_bf16(v[i]);
    std::memcpy(b.data() + 2 * i, &h, 2);
  }
  return b;
}

struct Options {
  Layout layout = Layout::kMaster;
  bool relu2 = false;
  std::string drop;          // an HF tensor to leave out
  bool extra_scale = false;  // a weight_scale next to a master weight
};

struct Built {
  fs::path dir;     // the HF folder
  std::string ref;  // the golden file with the converted weights (our writer)
};

Built build(const std::string& shared, const std::string& tag, const Options& o, json config) {
  auto g = GgufFile::open(shared + "/golden/models/tiny-bitnet-TQ2_0.gguf");
  EXPECT_TRUE(g.is_ok());
  Built b;
  b.dir = test::temp_path("hf-bitnet-" + tag);
  b.ref = test::temp_path("hf-bitnet-" + tag + "-ref.gguf");
  fs::remove_all(b.dir);
  fs::create_directories(b.dir);
  if (o.relu2) config["hidden_act"] = "relu2";
  GgufWriter ref;
  for (const auto& [k, v] : (*g)->metadata()) ref.set(k, v);
  if (o.relu2) ref.set("bitnet.ffn_activation", GgufValue::from_string("relu2"));
  std::vector<StTensor> ts;
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> ud(-0.2f, 0.2f);
  for (const GgufTensorInfo& t : (*g)->tensors()) {
    const std::string hn = hf_name(t.name);
    const std::vector<int64_t> shape(t.ne.rbegin(), t.ne.rend());
    if (t.type == GgmlType::F32) {  // norms
      ts.push_back(hftest::st_from_gguf(t, hn));
      EXPECT_TRUE(ref.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
      continue;
    }
    const std::vector<float> deq = dequant(t);
    if (t.type != GgmlType::TQ2_0) {  // token_embd (Q6_K): BF16 in the checkpoint and the reference
      ts.push_back({hn, "BF16", shape, bf16_bytes(deq)});
      EXPECT_TRUE(ref.add_tensor_copy(t.name, GgmlType::BF16, t.ne, bf16_bytes(deq)).is_ok());
      continue;
    }
    float gamma = 0;
    for (float x : deq) gamma = std::max(gamma, std::fabs(x));
    std::vector<int> code(deq.size());
    for (size_t i = 0; i < deq.size(); ++i) code[i] = (int)std::lround(deq[i] / gamma);
    std::vector<float> want(deq.size());
    if (o.layout == Layout::kMaster) {
      std::vector<double> v(deq.size());
      double mean = 0;
      for (size_t i = 0; i < v.size(); ++i) mean += std::fabs(v[i] = 1.5 * code[i] + ud(rng));
      mean /= (double)v.size();
      std::vector<float> w(v.size());
      for (size_t i = 0; i < v.size(); ++i) w[i] = bf16_round((float)(gamma / mean * v[i]));
      double sum = 0;
      for (float x : w) sum += std::fabs((double)x);
      const float s = std::max((float)(sum / (double)w.size()), 1e-5f), is = 1.f / s;
      for (size_t i = 0; i < w.size(); ++i)
        want[i] = bf16_round(std::clamp(std::nearbyint(w[i] * is), -1.f, 1.f) / is);
      ts.push_back({hn, "BF16", shape, bf16_bytes(w)});
      if (o.extra_scale) ts.push_back({hn + "_scale", "BF16", {1}, bf16_bytes({1.f})});
    } else {
      const int64_t rows = shape[0], cols = shape[1], p = rows / 4;
      std::vector<uint8_t> packed((size_t)(p * cols), 0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          packed[(size_t)((r % p) * cols + c)] |= (uint8_t)((code[(size_t)(r * cols + c)] + 1) << (2 * (r / p)));
      const bool mul = o.layout == Layout::kPackedAutoBitLinear;
      const float ws = bf16_round(mul ? gamma : 1.f / gamma);
      for (size_t i = 0; i < want.size(); ++i) want[i] = bf16_round(mul ? (float)code[i] * ws : (float)code[i] / ws);
      ts.push_back({hn, "U8", {p, cols}, packed});
      ts.push_back({hn + "_scale", "BF16", {1}, bf16_bytes({ws})});
    }
    // The converted weights carry the golden codes.
    for (size_t i = 0; i < want.size(); ++i) {
      const int c = want[i] > 0 ? 1 : want[i] < 0 ? -1 : 0;
      if (c != code[i]) {
        ADD_FAILURE() << t.name << " element " << i << ": code " << c << " != golden " << code[i];
        break;
      }
    }
    EXPECT_TRUE(ref.add_tensor_copy(t.name, GgmlType::BF16, t.ne, bf16_bytes(want)).is_ok());
  }
  std::erase_if(ts, [&](const StTensor& t) { return t.name == o.drop; });
  hftest::write_safetensors(b.dir / "model.safetensors", ts);
  std::ofstream(b.dir / "config.json") << config.dump(2);
  std::ofstream(b.dir / "tokenizer.json")
      << hftest::byte_level_bpe_json(hftest::kLlama3Split, {{3198, "<|begin_of_text|>"}, {3199, "<|end_of_text|>"}})
             .dump();
  EXPECT_TRUE(ref.write(b.ref).is_ok());
  return b;
}

Built build(const std::string& shared, const std::string& tag, const Options& o) {
  return build(shared, tag, o, config_json(o.layout));
}

void remove(const Built& b) {
  fs::remove_all(b.dir);
  fs::remove(b.ref);
}

// Converts at the checkpoint's type; tensors and logits equal the reference's.
void expect_converts_to_reference(const std::string& shared, const Built& b) {
  const std::string out = b.ref + ".converted.gguf";
  Status s = convert(b.dir.string(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  auto r = GgufFile::open(b.ref);
  auto golden = GgufFile::open(shared + "/golden/models/tiny-bitnet-TQ2_0.gguf");
  ASSERT_TRUE(g.is_ok() && r.is_ok() && golden.is_ok());
  EXPECT_EQ((*g)->architecture(), "bitnet");
  // llama.cpp's BitnetModel keys: the golden file's bitnet.* keys (plus
  // ffn_activation for relu2), less vocab_size and rope.dimension_count,
  // which its generator wrote and llama.cpp's converter does not.
  for (const auto& [k, v] : (*g)->metadata()) {
    if (k.rfind("bitnet.", 0) != 0 || k == "bitnet.ffn_activation") continue;
    const GgufValue* w = (*golden)->find(k);
    ASSERT_NE(w, nullptr) << k;
    if (v.is_float()) {
      EXPECT_EQ((*g)->get_float(k), (*golden)->get_float(k)) << k;
    } else if (v.type == GgufType::STRING || v.type == GgufType::BOOL) {
      EXPECT_TRUE(v == *w) << k;
    } else {
      EXPECT_EQ(v.as_int(), w->as_int()) << k;
    }
  }
  for (const auto& [k, v] : (*golden)->metadata()) {
    if (k.rfind("bitnet.", 0) == 0 && !(*g)->find(k)) {
      EXPECT_TRUE(k == "bitnet.vocab_size" || k == "bitnet.rope.dimension_count") << "missing " << k;
    }
  }
  EXPECT_EQ((*g)->get_string("bitnet.rope.scaling.type"), std::optional<std::string>("linear"));
  EXPECT_EQ((*g)->find_tensor("output.weight"), nullptr);  // tied
  hftest::expect_tensors_equal(**g, **r);
  const std::vector<float> want = hftest::logits_of(b.ref), got = hftest::logits_of(out);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0);
  fs::remove(out);
}

// `convert --type tq2_0`: every ternary tensor holds exactly the golden codes
// (the qs bytes of each TQ2_0 block), and the logits of the golden prompt are
// within the golden tolerance of llama.cpp's for the golden file.
void expect_tq2_0_matches_golden(const std::string& shared, const Built& b) {
  const std::string out = b.ref + ".tq2_0.gguf";
  const std::string cmd = test::chimera_binary() + " convert -q " + b.dir.string() + " -o " + out + " --type tq2_0";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto g = GgufFile::open(out);
  auto golden = GgufFile::open(shared + "/golden/models/tiny-bitnet-TQ2_0.gguf");
  ASSERT_TRUE(g.is_ok() && golden.is_ok());
  for (const GgufTensorInfo& t : (*golden)->tensors()) {
    if (t.type != GgmlType::TQ2_0) continue;
    const GgufTensorInfo* c = (*g)->find_tensor(t.name);
    ASSERT_NE(c, nullptr) << t.name;
    ASSERT_EQ(c->type, GgmlType::TQ2_0) << t.name;
    ASSERT_EQ(c->n_bytes, t.n_bytes) << t.name;
    for (uint64_t blk = 0; blk < t.n_bytes / 66; ++blk)
      ASSERT_EQ(std::memcmp(c->data + blk * 66, t.data + blk * 66, 64), 0) << t.name << " block " << blk;
  }
  test::GoldenCase gc;
  ASSERT_TRUE(test::load_golden(shared + "/golden", "tiny-bitnet", &gc));
  auto m = models::load_model(out);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const int64_t n = (int64_t)gc.prompt.size(), nv = (*m)->info().n_vocab;
  ASSERT_EQ(nv, gc.n_cols());
  models::Context ctx = (*m)->new_context();
  auto st = ctx.new_state(n);
  std::vector<float> got((size_t)(n * nv));
  ASSERT_TRUE(ctx.forward(*st, gc.prompt.data(), n, models::Logits::kAll, got.data(), nullptr).is_ok());
  ASSERT_EQ(got.size(), gc.prompt_logits.size());
  float worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - gc.prompt_logits[i]));
  EXPECT_LE(worst, gc.tolerance * gc.scale()) << "scale " << gc.scale();
  fs::remove(out);
}

TEST(HfBitnetConvert, MasterWeightsTernarizeAsLlamaCpp) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Built b = build(shared, "master", {});
  expect_converts_to_reference(shared, b);
  expect_tq2_0_matches_golden(shared, b);
  // --type f32: the ternary values are still rounded to the checkpoint's
  // BF16 first (llama.cpp's result.type(dtype)), then widened.
  const std::string out = b.ref + ".f32.gguf";
  ConvertOptions o = hftest::checked();
  o.out_type = "f32";
  ASSERT_TRUE(convert(b.dir.string(), out, o).is_ok());
  auto g = GgufFile::open(out);
  auto r = GgufFile::open(b.ref);
  ASSERT_TRUE(g.is_ok() && r.is_ok());
  for (const GgufTensorInfo& t : (*r)->tensors()) {
    if (t.type != GgmlType::BF16 || t.name == "token_embd.weight") continue;
    const GgufTensorInfo* c = (*g)->find_tensor(t.name);
    ASSERT_NE(c, nullptr) << t.name;
    ASSERT_EQ(c->type, GgmlType::F32) << t.name;
    for (uint64_t i = 0; i < t.n_elements; ++i) {
      uint16_t h;
      float f;
      std::memcpy(&h, t.data + 2 * i, 2);
      std::memcpy(&f, c->data + 4 * i, 4);
      ASSERT_EQ(f, bf16_to_f32(h)) << t.name << " " << i;
    }
  }
  fs::remove(out);
  remove(b);
}

TEST(HfBitnetConvert, PackedWeightsUnpackWithTheirScale) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (Layout l : {Layout::kPackedBitLinear, Layout::kPackedAutoBitLinear}) {
    SCOPED_TRACE(l == Layout::kPackedBitLinear ? "bitlinear" : "autobitlinear");
    Options o;
    o.layout = l;
    const Built b = build(shared, "packed", o);
    expect_converts_to_reference(shared, b);
    expect_tq2_0_matches_golden(shared, b);
    remove(b);
  }
}

// `chimera convert HF_DIR --type tq2_0` is the file `chimera quantize REF TQ2_0`
// makes of the converted weights (the ternary matrices keep their scale).
TEST(HfBitnetConvert, CliConvertsAndQuantizesInOneStep) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Built b = build(shared, "cli", {});
  hftest::expect_cli_quantized_equals(b.dir.string(), test::temp_path("hf-bitnet-tq2.gguf"), b.ref,
                                      "blk.0.ffn_down.weight", "tq2_0", GgmlType::TQ2_0);
  remove(b);
}

// 2B-4T's hidden_act relu2: chimera's bitnet.ffn_activation key, and the
// logits of the squared-ReLU FFN (not SiLU's).
TEST(HfBitnetConvert, Relu2WritesTheActivationKey) {
  CHIMERA_REQUIRE_SHARED(shared);
  Options o;
  o.relu2 = true;
  const Built b = build(shared, "relu2", o);
  expect_converts_to_reference(shared, b);
  const std::string out = b.ref + ".relu2.gguf";
  ASSERT_TRUE(convert(b.dir.string(), out, hftest::checked()).is_ok());
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->get_string("bitnet.ffn_activation"), std::optional<std::string>("relu2"));
  const Built silu = build(shared, "silu", {});
  EXPECT_NE(hftest::logits_of(out), hftest::logits_of(silu.ref));
  fs::remove(out);
  remove(b);
  remove(silu);
}

TEST(HfBitnetConvert, ErrorsNameTheMissingTensorOrKey) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto expect_error = [&](const std::string& tag, const Options& o, const json& config, const std::string& needle) {
    const Built b = build(shared, tag, o, config);
    const std::string out = b.ref + ".bad.gguf";
    Status s = convert(b.dir.string(), out, hftest::checked());
    ASSERT_FALSE(s.is_ok()) << tag;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_FALSE(fs::exists(out));
    remove(b);
  };
  Options packed;
  packed.layout = Layout::kPackedBitLinear;
  packed.drop = "model.layers.1.mlp.up_proj.weight_scale";
  expect_error("noscale", packed, config_json(packed.layout), "model.layers.1.mlp.up_proj.weight_scale");
  Options extra;
  extra.extra_scale = true;
  expect_error("extrascale", extra, config_json(Layout::kMaster), "weight_scale");
  Options drop;
  drop.drop = "model.layers.0.self_attn.attn_sub_norm.weight";
  expect_error("nosub", drop, config_json(Layout::kMaster), "model.layers.0.self_attn.attn_sub_norm.weight");
  json c = config_json(Layout::kMaster);
  c["hidden_act"] = "gelu";
  expect_error("act", {}, c, "hidden_act");
  c = config_json(Layout::kMaster);
  c["quantization_config"]["quant_method"] = "gptq";
  expect_error("qm", {}, c, "quant_method");
  c = config_json(Layout::kMaster);
  c.erase("num_attention_heads");
  expect_error("heads", {}, c, "num_attention_heads");
  c = config_json(Layout::kMaster);
  c["tie_word_embeddings"] = false;  // untied, but no lm_head
  expect_error("head", {}, c, "lm_head.weight");
}

}  // namespace
}  // namespace chimera::format::hf
