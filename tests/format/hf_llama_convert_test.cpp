// Hugging Face -> GGUF for the llama family. The golden tiny-llama GGUF (keys
// and tensors as llama.cpp's converter writes them) is turned back into the
// Hugging Face layout a LlamaForCausalLM checkpoint has — config.json with the
// real model's fields, model.safetensors with HF tensor names and [out, in]
// shapes, Q/K rows in rotate-half order (the inverse of llama.cpp's
// permutation), a byte-level BPE tokenizer.json with the Llama 3 split — and
// `convert` must give back a file whose logits equal the golden GGUF's bit for
// bit, whose llama.* keys equal the golden file's, in one file and sharded.
// Also: Llama 3 RoPE scaling becomes rope_freqs.weight, the tokenizer encodes
// with the converted merges and specials, errors name the missing tensor or
// config key, and converted tensors are produced while writing (lazy).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "core/fp16.h"
#include "format/gguf/gguf.h"
#include "format/hf/hf_convert.h"
#include "format/rope_factors.h"
#include "hf_test_folder.h"
#include "models/model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace chimera::format::hf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using hftest::logits_of;
using hftest::StTensor;
using hftest::unpermute;
using hftest::write_safetensors;

std::string hf_name(const std::string& g) {
  static const std::map<std::string, std::string> global = {{"token_embd.weight", "model.embed_tokens.weight"},
                                                            {"output_norm.weight", "model.norm.weight"},
                                                            {"output.weight", "lm_head.weight"}};
  static const std::map<std::string, std::string> layer = {
      {"attn_norm.weight", "input_layernorm.weight"},    {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},       {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"}};
  if (auto it = global.find(g); it != global.end()) return it->second;
  const size_t a = g.find('.'), b = g.find('.', a + 1);
  return "model.layers." + g.substr(a + 1, b - a - 1) + "." + layer.at(g.substr(b + 1));
}

json tokenizer_json() {
  return hftest::byte_level_bpe_json(hftest::kLlama3Split, {{3198, "<|begin_of_text|>"}, {3199, "<|end_of_text|>"}});
}

// The Llama 3.2-style config.json of the golden tiny-llama.
json config_json() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 2048},
          {"rms_norm_eps", 1e-05},
          {"rope_theta", 10000.0},
          {"rope_scaling", nullptr},
          {"vocab_size", 3200},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"tie_word_embeddings", false},
          {"bos_token_id", 3198},
          {"eos_token_id", 3199},
          {"torch_dtype", "float16"}};
}

// Writes the HF folder; `shards` > 1 splits the tensors over several files
// with model.safetensors.index.json; `drop` leaves one tensor out; `edit`
// changes the tensor list before it is written.
fs::path write_hf(const std::string& shared, const std::string& tag, const json& config, int shards = 1,
                  const std::string& drop = "", const std::function<void(std::vector<StTensor>&)>& edit = nullptr) {
  auto g = GgufFile::open(shared + "/golden/models/tiny-llama.gguf");
  EXPECT_TRUE(g.is_ok());
  const fs::path dir = test::temp_path("hf-llama-" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<StTensor> ts;
  for (const GgufTensorInfo& t : (*g)->tensors()) {
    StTensor s;
    s.name = hf_name(t.name);
    if (s.name == drop) continue;
    s.dtype = t.type == GgmlType::F16 ? "F16" : "F32";
    s.shape.assign(t.ne.rbegin(), t.ne.rend());
    if (t.name.find("attn_q.weight") != std::string::npos) {
      s.bytes = unpermute(t, 4);
    } else if (t.name.find("attn_k.weight") != std::string::npos) {
      s.bytes = unpermute(t, 2);
    } else {
      s.bytes.assign(t.data, t.data + t.n_bytes);
    }
    ts.push_back(std::move(s));
  }
  if (edit) edit(ts);
  if (shards == 1) {
    write_safetensors(dir / "model.safetensors", ts);
  } else {
    json map = json::object();
    for (int k = 0; k < shards; ++k) {
      std::vector<StTensor> part;
      const std::string file = "model-0000" + std::to_string(k + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
      for (size_t i = (size_t)k; i < ts.size(); i += (size_t)shards) {
        part.push_back(ts[i]);
        map[ts[i].name] = file;
      }
      write_safetensors(dir / file, part);
    }
    std::ofstream(dir / "model.safetensors.index.json") << json{{"metadata", json::object()}, {"weight_map", map}}.dump();
  }
  std::ofstream(dir / "config.json") << config.dump(2);
  std::ofstream(dir / "tokenizer.json") << tokenizer_json().dump();
  std::ofstream(dir / "tokenizer_config.json") << json{{"add_bos_token", true}, {"bos_token", "<|begin_of_text|>"}}.dump();
  return dir;
}

TEST(HfLlamaConvert, LogitsAndKeysEqualTheGoldenGgufInOneFileAndSharded) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string golden = shared + "/golden/models/tiny-llama.gguf";
  const std::vector<float> want = logits_of(golden);
  auto gg = GgufFile::open(golden);
  ASSERT_TRUE(gg.is_ok());
  for (int shards : {1, 3}) {
    SCOPED_TRACE("shards=" + std::to_string(shards));
    const fs::path dir = write_hf(shared, "s" + std::to_string(shards), config_json(), shards);
    const std::string out = test::temp_path("hf-llama-" + std::to_string(shards) + ".gguf");
    std::vector<std::string> progressed;
    ConvertOptions o = hftest::checked();
    o.progress = [&](const std::string& n, const std::vector<int64_t>&, GgmlType) { progressed.push_back(n); };
    Status s = convert(dir.string(), out, o);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(progressed.size(), (*gg)->tensors().size());
    auto g = GgufFile::open(out);
    ASSERT_TRUE(g.is_ok());
    EXPECT_EQ((*g)->architecture(), "llama");
    // Every llama.* key llama.cpp's converter wrote for this model, same value;
    // same tensor names, shapes, types and bytes (Q/K permuted back).
    hftest::expect_arch_keys_equal(**g, **gg, "llama");
    hftest::expect_tensors_equal(**g, **gg);
    const std::vector<float> got = logits_of(out);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0);
    fs::remove(out);
    fs::remove_all(dir);
  }
}

TEST(HfLlamaConvert, TokenizerAndOutputTypes) {
  CHIMERA_REQUIRE_SHARED(shared);
  const fs::path dir = write_hf(shared, "tok", config_json());
  const std::string out = test::temp_path("hf-llama-tok.gguf");
  ConvertOptions o = hftest::checked();
  o.out_type = "bf16";
  ASSERT_TRUE(convert(dir.string(), out, o).is_ok());
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->get_string("tokenizer.ggml.pre"), "llama-bpe");
  EXPECT_EQ((*g)->get_int("tokenizer.ggml.bos_token_id"), 3198);
  EXPECT_EQ((*g)->find_tensor("blk.0.attn_q.weight")->type, GgmlType::BF16);
  EXPECT_EQ((*g)->find_tensor("blk.0.attn_norm.weight")->type, GgmlType::F32);
  auto tok = tokenizer::Tokenizer::from_gguf(**g);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  // hello -> he ll -> hell -> hello; " world" -> Ġw or l d.
  EXPECT_EQ((*tok)->encode("hello world", false, false), (std::vector<int32_t>{259, 260, 261, 'l', 'd'}));
  EXPECT_EQ((*tok)->encode("<|end_of_text|>hello", false, true), (std::vector<int32_t>{3199, 259}));
  // BF16 Q rows are the F16 values rounded (the permutation moved whole rows).
  auto golden = GgufFile::open(shared + "/golden/models/tiny-llama.gguf");
  ASSERT_TRUE(golden.is_ok());
  const GgufTensorInfo* q16 = (*golden)->find_tensor("blk.1.attn_q.weight");
  const GgufTensorInfo* qb = (*g)->find_tensor("blk.1.attn_q.weight");
  const auto* a = (const uint16_t*)q16->data;
  const auto* b = (const uint16_t*)qb->data;
  for (int64_t i = 0; i < q16->ne[0] * q16->ne[1]; i += 37) EXPECT_EQ(b[i], f32_to_bf16(f16_to_f32(a[i]))) << i;
  fs::remove(out);
  fs::remove_all(dir);
}

TEST(HfLlamaConvert, Llama3RopeScalingBecomesRopeFreqs) {
  CHIMERA_REQUIRE_SHARED(shared);
  json c = config_json();
  c["rope_theta"] = 500000.0;
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 32.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  const fs::path dir = write_hf(shared, "rope", c);
  const std::string out = test::temp_path("hf-llama-rope.gguf");
  ASSERT_TRUE(convert(dir.string(), out, hftest::checked()).is_ok());
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  const GgufTensorInfo* f = (*g)->find_tensor("rope_freqs.weight");
  ASSERT_NE(f, nullptr);
  const std::vector<float> want = llama3_rope_factors(16, 500000.0, 32.0, 1.0, 4.0, 8192.0);
  ASSERT_EQ(f->ne, (std::vector<int64_t>{8}));
  EXPECT_EQ(std::memcmp(f->data, want.data(), 32), 0);
  EXPECT_NE(want.front(), want.back());  // the factors are not all one value
  auto m = models::load_model(out);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  fs::remove(out);
  fs::remove_all(dir);
}

TEST(HfLlamaConvert, ErrorsNameTheMissingTensorOrKey) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string out = test::temp_path("hf-llama-bad.gguf");
  auto expect_error = [&](const fs::path& dir, const std::string& needle) {
    Status s = convert(dir.string(), out, hftest::checked());
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_FALSE(fs::exists(out));
    fs::remove_all(dir);
  };
  expect_error(write_hf(shared, "drop", config_json(), 1, "model.layers.1.mlp.up_proj.weight"),
               "model.layers.1.mlp.up_proj.weight");
  json c = config_json();
  c.erase("hidden_size");
  expect_error(write_hf(shared, "nokey", c), "hidden_size");
  c = config_json();
  c["num_attention_heads"] = 3;  // 64 q rows do not split into 3 heads
  expect_error(write_hf(shared, "heads", c), "num_attention_heads");
  c = config_json();
  c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  expect_error(write_hf(shared, "dyn", c), "dynamic");
}

// `chimera convert` checks the tensors it is about to write against the
// llama table: a checkpoint tensor of the wrong shape (the converter's rules
// know names, not shapes) is refused with the table's expectation, an unknown
// tensor by its HF name; non-zero exit, no output file.
TEST(HfLlamaConvert, CliRefusesWrongShapesAndUnknownTensorsBeforeWriting) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string out = test::temp_path("hf-llama-checked.gguf");
  auto expect_refused = [&](const fs::path& dir, const std::vector<std::string>& needles) {
    fs::remove(out);
    const test::ShellResult r = test::run_chimera("convert -q " + dir.string() + " -o " + out);
    EXPECT_NE(r.rc, 0) << r.output;
    for (const std::string& n : needles) EXPECT_NE(r.output.find(n), std::string::npos) << n << "\n" << r.output;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(out + ".partial"));
    fs::remove_all(dir);
  };
  // up_proj [n_ff, n_embd] = [128, 64] stored as [64, 128] (same bytes).
  expect_refused(write_hf(shared, "shape", config_json(), 1, "",
                          [](std::vector<StTensor>& ts) {
                            for (StTensor& t : ts)
                              if (t.name == "model.layers.0.mlp.up_proj.weight") {
                                ASSERT_EQ(t.shape, (std::vector<int64_t>{128, 64}));
                                t.shape = {64, 128};
                              }
                          }),
                 {"tensor 'blk.0.ffn_up.weight' has shape [128, 64", "expected [64, 128]", "not written"});
  expect_refused(write_hf(shared, "extra", config_json(), 1, "",
                          [](std::vector<StTensor>& ts) {
                            StTensor t = ts.back();
                            t.name = "model.layers.0.self_attn.q_norm.weight";
                            ts.push_back(t);
                          }),
                 {"model.layers.0.self_attn.q_norm.weight", "has no rule for arch llama"});
  // The unchanged checkpoint converts (the refusals are not the check refusing everything).
  const fs::path ok = write_hf(shared, "checked-ok", config_json());
  const test::ShellResult r = test::run_chimera("convert -q " + ok.string() + " -o " + out);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(fs::exists(out));
  fs::remove(out);
  fs::remove_all(ok);
}

// `chimera convert HF_DIR --type Q8_0`: converted and quantized in one run,
// with no temporary file left behind; the result loads and runs.
TEST(HfLlamaConvert, CliConvertsAndQuantizesInOneStep) {
  CHIMERA_REQUIRE_SHARED(shared);
  const fs::path dir = write_hf(shared, "cli", config_json());
  const std::string out = test::temp_path("hf-llama-q8.gguf");
  fs::remove(out);
  const std::string cmd = test::chimera_binary() + " convert -q " + dir.string() + " -o " + out + " --type q8_0";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_FALSE(fs::exists(out + ".unquantized.partial"));
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->find_tensor("blk.0.attn_q.weight")->type, GgmlType::Q8_0);
  const std::vector<float> q = logits_of(out), ref = logits_of(shared + "/golden/models/tiny-llama.gguf");
  ASSERT_EQ(q.size(), ref.size());
  float worst = 0, scale = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    worst = std::max(worst, std::fabs(q[i] - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  EXPECT_GT(worst, 0.f);             // it was quantized
  EXPECT_LT(worst, 0.03f * scale);  // within the golden Q8_0 tolerance
  // An unknown --type names the known ones and leaves nothing behind.
  const std::string bad = test::chimera_binary() + " convert -q " + dir.string() + " -o " + out + "x --type q9_9";
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_FALSE(fs::exists(out + "x"));
  fs::remove(out);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace chimera::format::hf
