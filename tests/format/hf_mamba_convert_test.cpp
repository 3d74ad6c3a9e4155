// Hugging Face -> GGUF for mamba2 (Mamba2ForCausalLM) and mamba
// (MambaForCausalLM). The golden tiny GGUF of each family is turned back into
// the Hugging Face layout (config.json with the real model's fields,
// backbone.* tensors with PyTorch shapes: A_log = log(-A), conv1d weights
// [C, 1, K], Mamba-2 A / D / dt_bias as [H] and the gated norm as [d_inner]; a
// tokenizer.json with the GPT-NeoX pre-tokenizer holding the GGUF's own
// vocabulary) and `convert` must give the golden file's `<arch>.*` keys, its
// tensors byte for byte, its vocabulary and bit-identical logits. Also: the
// vocabulary is padded as llama.cpp pads it, and errors name the missing
// tensor or config key or the field the converter cannot honour. A = -exp(A_log)
// in f32 cannot always give the golden A back (A = -7 has no f32 A_log that
// does), so tensors and logits are compared with the golden weights carrying
// the converted A, written by our GGUF writer, and the logits also with the
// golden file's at the F32 golden tolerance.
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
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"

namespace chimera::format::hf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using hftest::StTensor;

std::string layer_name(const std::string& g, bool mamba2) {
  const size_t a = g.find('.'), b = g.find('.', a + 1);
  const std::string i = g.substr(a + 1, b - a - 1), rest = g.substr(b + 1);
  const std::string p = "backbone.layers." + i + ".";
  if (rest == "attn_norm.weight") return p + "norm.weight";
  if (rest == "ssm_dt.bias") return p + (mamba2 ? "mixer.dt_bias" : "mixer.dt_proj.bias");
  static const std::vector<std::pair<std::string, std::string>> m = {
      {"ssm_in.weight", "in_proj.weight"},   {"ssm_conv1d.weight", "conv1d.weight"}, {"ssm_conv1d.bias", "conv1d.bias"},
      {"ssm_x.weight", "x_proj.weight"},     {"ssm_dt.weight", "dt_proj.weight"},    {"ssm_a", "A_log"},
      {"ssm_d", "D"},                        {"ssm_norm.weight", "norm.weight"},     {"ssm_out.weight", "out_proj.weight"}};
  for (const auto& [k, v] : m)
    if (rest == k) return p + "mixer." + v;
  ADD_FAILURE() << "no HF name for " << g;
  return g;
}

std::string hf_name(const std::string& g, bool mamba2) {
  if (g == "token_embd.weight") return "backbone.embeddings.weight";
  if (g == "output_norm.weight") return "backbone.norm_f.weight";
  if (g == "output.weight") return "lm_head.weight";
  return layer_name(g, mamba2);
}

// The GPT-NeoX tokenizer.json's normaliser and pre-tokenizer (state-spaces/mamba-*-hf).
json neox_tokenizer(const GgufFile& g) {
  json t = hftest::bpe_tokenizer_json(
      g, {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}});
  t["normalizer"] = {{"type", "NFC"}};
  return t;
}

struct Family {
  const char* golden;  // file in golden/models
  const char* arch;
  json config;
};

Family mamba2_family() {
  return {"tiny-mamba2.gguf", "mamba2",
          {{"architectures", {"Mamba2ForCausalLM"}},
           {"model_type", "mamba2"},
           {"hidden_size", 64},
           {"num_hidden_layers", 2},
           {"num_heads", 4},
           {"head_dim", 32},
           {"state_size", 16},
           {"n_groups", 2},
           {"expand", 2},
           {"conv_kernel", 4},
           {"vocab_size", 3600},
           {"pad_vocab_size_multiple", 16},
           {"layer_norm_epsilon", 1e-5},
           {"rms_norm", true},
           {"use_bias", false},
           {"use_conv_bias", true},
           {"hidden_act", "silu"},
           {"time_step_rank", 4},
           {"chunk_size", 256},
           {"residual_in_fp32", true},
           {"tie_word_embeddings", false},
           {"bos_token_id", 0},
           {"eos_token_id", 0},
           {"pad_token_id", 0},
           {"torch_dtype", "float16"}}};
}

// The state-spaces/mamba-*-hf config.json fields (shared tokenizers/hf/gpt-neox-mamba/config.json).
Family mamba_family() {
  return {"tiny-mamba.gguf", "mamba",
          {{"architectures", {"MambaForCausalLM"}},
           {"model_type", "mamba"},
           {"hidden_size", 64},
           {"d_model", 64},
           {"num_hidden_layers", 2},
           {"n_layer", 2},
           {"intermediate_size", 128},
           {"d_inner", 128},
           {"state_size", 16},
           {"conv_kernel", 4},
           {"expand", 2},
           {"time_step_rank", 4},
           {"vocab_size", 3600},
           {"pad_vocab_size_multiple", 8},
           {"layer_norm_epsilon", 1e-5},
           {"rms_norm", true},
           {"use_bias", false},
           {"use_conv_bias", true},
           {"hidden_act", "silu"},
           {"fused_add_norm", true},
           {"residual_in_fp32", true},
           {"bos_token_id", 0},
           {"eos_token_id", 0},
           {"pad_token_id", 0},
           {"torch_dtype", "float16"}}};
}

// Writes the HF folder of `fam`; `drop` leaves one tensor out; `lm_head`
// adds an lm_head.weight (a copy of the embedding, or that copy changed);
// `ssm_a` receives the A each layer must convert to (see a_log_from_gguf).
enum class LmHead { kNone, kCopy, kChanged };
fs::path write_hf(const std::string& shared, const Family& fam, const std::string& tag, const json& config,
                  const std::string& drop = "", LmHead lm_head = LmHead::kNone,
                  std::map<std::string, std::vector<uint8_t>>* ssm_a = nullptr) {
  const bool m2 = std::string(fam.arch) == "mamba2";
  auto g = GgufFile::open(shared + "/golden/models/" + fam.golden);
  EXPECT_TRUE(g.is_ok());
  const fs::path dir = test::temp_path(std::string("hf-") + fam.arch + "-" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<StTensor> ts;
  for (const GgufTensorInfo& t : (*g)->tensors()) {
    const std::string name = hf_name(t.name, m2);
    if (name == drop) continue;
    const bool one_d = t.name.ends_with(".ssm_d") || t.name.ends_with(".ssm_norm.weight");
    std::vector<int64_t> shape;
    if (t.name.ends_with(".ssm_conv1d.weight")) shape = {t.ne[1], 1, t.ne[0]};
    if ((m2 && (t.name.ends_with(".ssm_a") || one_d)) || (!m2 && t.name.ends_with(".ssm_d")))
      shape = {(int64_t)t.n_elements};
    std::vector<uint8_t> a_back;
    StTensor s = t.name.ends_with(".ssm_a") ? hftest::a_log_from_gguf(t, name, shape, &a_back)
                                            : hftest::st_from_gguf(t, name, shape);
    if (ssm_a && !a_back.empty()) (*ssm_a)[t.name] = std::move(a_back);
    if (t.name == "token_embd.weight" && lm_head != LmHead::kNone) {
      StTensor h = s;
      h.name = "lm_head.weight";
      if (lm_head == LmHead::kChanged) h.bytes[7] ^= 1;
      ts.push_back(std::move(h));
    }
    ts.push_back(std::move(s));
  }
  hftest::write_safetensors(dir / "model.safetensors", ts);
  std::ofstream(dir / "config.json") << config.dump(2);
  std::ofstream(dir / "tokenizer.json") << neox_tokenizer(**g).dump();
  return dir;
}

void check_family(const Family& fam) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string golden = shared + "/golden/models/" + fam.golden;
  auto gg = GgufFile::open(golden);
  ASSERT_TRUE(gg.is_ok());
  std::map<std::string, std::vector<uint8_t>> ssm_a;
  const fs::path dir = write_hf(shared, fam, "ok", fam.config, "", LmHead::kNone, &ssm_a);
  ASSERT_EQ(ssm_a.size(), 2u);
  // The golden weights with A = -exp(A_log): what the converter must write.
  const std::string ref = test::temp_path(std::string("hf-") + fam.arch + "-ref.gguf");
  hftest::write_gguf_with(**gg, ref, ssm_a);
  auto rg = GgufFile::open(ref);
  ASSERT_TRUE(rg.is_ok());
  const std::string out = test::temp_path(std::string("hf-") + fam.arch + ".gguf");
  Status s = convert(dir.string(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->architecture(), fam.arch);
  hftest::expect_arch_keys_equal(**g, **gg, fam.arch);
  hftest::expect_tensors_equal(**g, **rg);
  // The vocabulary: same tokens, types and merges; GPT-NeoX's split.
  for (const char* k : {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}) {
    ASSERT_NE((*g)->find(k), nullptr) << k;
    EXPECT_TRUE(*(*g)->find(k) == *(*gg)->find(k)) << k;
  }
  EXPECT_EQ((*g)->get_string("tokenizer.ggml.pre"), "olmo");
  EXPECT_EQ((*g)->get_int("tokenizer.ggml.eos_token_id"), 0);
  // Bit-identical to the same weights written by our GGUF writer, and within
  // the F32 golden tolerance of the golden file itself (A moved by an ulp).
  hftest::expect_logits_exact_and_near(out, ref, golden);
  fs::remove(ref);
  fs::remove(out);
  fs::remove_all(dir);
}

// A smaller vocab_size is padded to pad_vocab_size_multiple with [PAD<id>] tokens.
void check_padding(const Family& fam, int64_t vocab, int64_t multiple, int64_t want) {
  CHIMERA_REQUIRE_SHARED(shared);
  json c = fam.config;
  c["vocab_size"] = vocab;
  if (multiple > 0) c["pad_vocab_size_multiple"] = multiple;
  else c.erase("pad_vocab_size_multiple");
  const fs::path dir = write_hf(shared, fam, "pad", c);
  const std::string out = test::temp_path(std::string("hf-") + fam.arch + "-pad.gguf");
  Status s = convert(dir.string(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  const GgufValue* toks = (*g)->get_array("tokenizer.ggml.tokens");
  ASSERT_NE(toks, nullptr);
  EXPECT_EQ((int64_t)toks->arr.size(), want);
  fs::remove(out);
  fs::remove_all(dir);
}

void expect_error(const std::string& shared, const Family& fam, const std::string& tag, const json& config,
                  const std::string& drop, const std::string& needle) {
  const fs::path dir = write_hf(shared, fam, tag, config, drop);
  const std::string out = test::temp_path(std::string("hf-") + fam.arch + "-bad.gguf");
  Status s = convert(dir.string(), out, hftest::checked());
  ASSERT_FALSE(s.is_ok()) << tag;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

TEST(HfMambaConvert, Mamba2KeysTensorsVocabAndLogitsEqualTheGoldenGguf) { check_family(mamba2_family()); }

TEST(HfMambaConvert, Mamba2VocabularyIsPaddedToTheMultiple) {
  // 3590 ids -> 3600 (a multiple of 16, the default for Mamba-2).
  check_padding(mamba2_family(), 3590, 0, 3600);
}

TEST(HfMambaConvert, Mamba2ErrorsNameTheMissingTensorOrKey) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Family f = mamba2_family();
  expect_error(shared, f, "drop", f.config, "backbone.layers.1.mixer.A_log", "backbone.layers.1.mixer.A_log");
  json c = f.config;
  c.erase("hidden_size");
  expect_error(shared, f, "nokey", c, "", "hidden_size");
  c = f.config;
  c["num_heads"] = 3;
  expect_error(shared, f, "heads", c, "", "num_heads");
  c = f.config;
  c["n_groups"] = 3;  // 128 does not split into 3 groups
  expect_error(shared, f, "groups", c, "", "n_groups");
  c = f.config;
  c["use_bias"] = true;
  expect_error(shared, f, "bias", c, "", "use_bias");
}

TEST(HfMambaConvert, MambaKeysTensorsVocabAndLogitsEqualTheGoldenGguf) { check_family(mamba_family()); }

TEST(HfMambaConvert, MambaVocabularyIsPaddedToTheMultiple) {
  check_padding(mamba_family(), 3597, 0, 3600);  // the default multiple, 8
}

// llama.cpp drops an lm_head equal to the embedding (tied) and keeps one that differs.
TEST(HfMambaConvert, MambaLmHeadEqualToTheEmbeddingIsDropped) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Family f = mamba_family();
  for (LmHead h : {LmHead::kCopy, LmHead::kChanged}) {
    const fs::path dir = write_hf(shared, f, "head", f.config, "", h);
    const std::string out = test::temp_path("hf-mamba-head.gguf");
    Status s = convert(dir.string(), out, hftest::checked());
    ASSERT_TRUE(s.is_ok()) << s.message();
    auto g = GgufFile::open(out);
    ASSERT_TRUE(g.is_ok());
    EXPECT_EQ((*g)->find_tensor("output.weight") != nullptr, h == LmHead::kChanged);
    fs::remove(out);
    fs::remove_all(dir);
  }
}

TEST(HfMambaConvert, MambaErrorsNameTheMissingTensorOrKey) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Family f = mamba_family();
  expect_error(shared, f, "drop", f.config, "backbone.layers.0.mixer.x_proj.weight",
               "backbone.layers.0.mixer.x_proj.weight");
  json c = f.config;
  c.erase("num_hidden_layers");
  c.erase("n_layer");
  expect_error(shared, f, "nokey", c, "", "num_hidden_layers");
  c = f.config;
  c["intermediate_size"] = 192;
  expect_error(shared, f, "inner", c, "", "intermediate_size");
  c = f.config;
  c["hidden_act"] = "gelu";
  expect_error(shared, f, "act", c, "", "hidden_act");
  // The rules let conv1d.bias be absent (use_conv_bias: false); the mamba
  // table requires it, so the check before writing refuses the output.
  expect_error(shared, f, "nobias", f.config, "backbone.layers.0.mixer.conv1d.bias",
               "missing tensor 'blk.0.ssm_conv1d.bias'");
}

// `chimera convert HF_DIR --type q8_0` for each Mamba family: the same file as
// `chimera quantize` makes of the converted weights.
TEST(HfMambaConvert, CliConvertsAndQuantizesBothFamilies) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const Family& f : {mamba2_family(), mamba_family()}) {
    SCOPED_TRACE(f.arch);
    std::map<std::string, std::vector<uint8_t>> ssm_a;
    const fs::path dir = write_hf(shared, f, "cli", f.config, "", LmHead::kNone, &ssm_a);
    auto gg = GgufFile::open(shared + "/golden/models/" + f.golden);
    ASSERT_TRUE(gg.is_ok());
    const std::string ref = test::temp_path(std::string("hf-") + f.arch + "-cli-ref.gguf");
    hftest::write_gguf_with(**gg, ref, ssm_a);
    hftest::expect_cli_q8_0_equals_quantized(dir.string(), test::temp_path(std::string("hf-") + f.arch + "-q8.gguf"),
                                             ref, "blk.0.ssm_in.weight");
    fs::remove(ref);
    fs::remove_all(dir);
  }
}

// The real GPT-NeoX tokenizer.json of state-spaces/mamba-*-hf (shared) gives
// the vocabulary llama.cpp ships for that tokenizer (ggml-vocab-mpt.gguf:
// 50432 ids, the same pieces, types and merges; padding ids typed as today's
// converter types them) and encodes its test vectors.
TEST(HfMambaConvert, RealGptNeoxTokenizerEqualsLlamaCppsVocabulary) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Family f = mamba_family();
  json c = f.config;
  c["vocab_size"] = 50432;  // MPT's padded table; the embedding rows are not checked by the converter
  const fs::path dir = write_hf(shared, f, "neox", c);
  const std::string neox = shared + "/tokenizers/hf/gpt-neox-mamba/";
  fs::copy_file(neox + "tokenizer.json", dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  fs::copy_file(neox + "tokenizer_config.json", dir / "tokenizer_config.json", fs::copy_options::overwrite_existing);
  const std::string out = test::temp_path("hf-mamba-neox.gguf");
  Status s = convert(dir.string(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  const std::string ref_path = test::vocab_dir() + "/ggml-vocab-mpt.gguf";
  auto ref = GgufFile::open(ref_path);
  ASSERT_TRUE(ref.is_ok());
  EXPECT_EQ((*g)->get_string("tokenizer.ggml.pre"), "olmo");  // llama.cpp's hash: mpt, then olmo (same split)
  for (const char* k : {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}) {
    const GgufValue* a = (*g)->get_array(k);
    const GgufValue* b = (*ref)->get_array(k);
    ASSERT_TRUE(a && b) << k;
    ASSERT_EQ(a->arr.size(), b->arr.size()) << k;
    const GgufValue* toks = (*g)->get_array("tokenizer.ggml.tokens");
    size_t diff = 0, pads = 0;
    for (size_t i = 0; i < a->arr.size(); ++i) {
      // Padding ids [PAD<id>]: UNUSED (5) as llama.cpp's converter writes them
      // today; the shared vocab file predates that and says USER_DEFINED (4).
      if (std::string(k) == "tokenizer.ggml.token_type" && toks->arr[i].s.rfind("[PAD", 0) == 0) {
        ++pads;
        EXPECT_EQ(a->arr[i].as_int(), 5) << i;
        EXPECT_EQ(b->arr[i].as_int(), 4) << i;
        continue;
      }
      if (!(a->arr[i] == b->arr[i]) && diff++ < 5)
        ADD_FAILURE() << k << "[" << i << "]: " << a->arr[i].to_display() << " vs " << b->arr[i].to_display();
    }
    EXPECT_EQ(diff, 0u) << k;
    if (std::string(k) == "tokenizer.ggml.token_type") {
      EXPECT_EQ(pads, 50432u - 50277u);
    }
  }
  auto tok = tokenizer::Tokenizer::from_gguf(**g);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  const auto cases = test::load_vocab_cases(ref_path);
  ASSERT_FALSE(cases.empty());
  for (const auto& tc : cases) EXPECT_EQ((*tok)->encode(tc.input, false, false), tc.expected) << tc.input;
  fs::remove(out);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace chimera::format::hf
