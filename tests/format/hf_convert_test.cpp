// Hugging Face importer tests: converting the shared phi4flash-tiny-a folder
// gives the documented phi4flash keys (docs/PHI4FLASH.md), tensor names,
// shapes, types and transforms (A = -exp(A_log), squeezed conv weights, BF16
// payload copied bit for bit), a tokenizer whose encoding of the golden prompt
// equals the reference tokens, and the chat template. Also: --type f32, bad
// folders / configs / unknown model types / unclaimed tensors give errors and
// leave no output file, and the CLI picks the importer for a directory.
#include "format/hf/hf_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/fp16.h"
#include "format/gguf/gguf.h"
#include "format/safetensors/safetensors.h"
#include "hf_test_folder.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace chimera::format::hf {
namespace {

namespace fs = std::filesystem;

std::string hf_dir() {
  const std::string s = test::shared_dir();
  return s.empty() ? s : s + "/golden/hf/phi4flash-tiny-a";
}

TEST(HfConvert, Phi4FlashTinyKeysTensorsAndTokenizer) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string out = test::temp_path("p4f-bf16.gguf");
  Status s = convert(hf_dir(), out, hftest::checked());
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const GgufFile& f = *g.value();
  EXPECT_EQ(f.architecture(), "phi4flash");
  EXPECT_EQ(f.get_int("phi4flash.block_count"), 8);
  EXPECT_EQ(f.get_int("phi4flash.embedding_length"), 64);
  EXPECT_EQ(f.get_int("phi4flash.attention.head_count"), 4);
  EXPECT_EQ(f.get_int("phi4flash.attention.head_count_kv"), 2);
  EXPECT_EQ(f.get_int("phi4flash.attention.sliding_window"), 16);
  EXPECT_EQ(f.get_int("phi4flash.ssm.inner_size"), 128);
  EXPECT_EQ(f.get_int("phi4flash.ssm.time_step_rank"), 4);
  EXPECT_EQ(f.get_int("phi4flash.ssm.state_size"), 16);
  EXPECT_EQ(f.get_int("phi4flash.mamba_period"), 2);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 199999);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eot_token_id"), 200020);
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "gpt-4o");
  ASSERT_TRUE(f.get_string("tokenizer.chat_template").has_value());

  // Layer plan: 0,2 Mamba; 1,3 SWA attn; 4 memory Mamba; 5 full attn; 6 GMU; 7 cross attn.
  for (int i : {0, 2, 4}) EXPECT_NE(f.find_tensor("blk." + std::to_string(i) + ".ssm_a"), nullptr) << i;
  for (int i : {1, 3, 5}) EXPECT_NE(f.find_tensor("blk." + std::to_string(i) + ".attn_qkv.weight"), nullptr) << i;
  EXPECT_NE(f.find_tensor("blk.6.gmu_in.weight"), nullptr);
  EXPECT_NE(f.find_tensor("blk.7.attn_q.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.7.attn_qkv.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied

  auto ck = safetensors::Checkpoint::open(hf_dir());
  ASSERT_TRUE(ck.is_ok());
  const GgufTensorInfo* a = f.find_tensor("blk.2.ssm_a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, GgmlType::F32);
  EXPECT_EQ(a->ne, (std::vector<int64_t>{16, 128}));
  auto alog = safetensors::to_f32(*(*ck)->find("model.layers.2.attn.A_log"));
  ASSERT_TRUE(alog.is_ok());
  const float* ad = (const float*)a->data;
  for (size_t i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(ad[i * 37], -std::exp(alog.value()[i * 37]));
  const GgufTensorInfo* conv = f.find_tensor("blk.0.ssm_conv1d.weight");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->ne, (std::vector<int64_t>{4, 128}));
  const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, GgmlType::BF16);
  EXPECT_EQ(emb->ne, (std::vector<int64_t>{64, 200064}));
  const safetensors::TensorInfo* se = (*ck)->find("model.embed_tokens.weight");
  EXPECT_EQ(std::memcmp(emb->data, se->data, se->n_bytes()), 0);

  // The tokenizer reproduces the golden prompt tokens.
  auto tok = tokenizer::Tokenizer::from_gguf(f);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  auto golden = read_json(test::shared_dir() + "/golden/phi4flash-a.json");
  ASSERT_TRUE(golden.is_ok());
  const auto ids = (*tok)->encode(golden.value()["prompt"].get<std::string>(), true, true);
  const auto want = golden.value()["prompt_tokens"].get<std::vector<int64_t>>();
  ASSERT_EQ(ids.size(), want.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ((int64_t)ids[i], want[i]) << i;
  fs::remove(out);
}

TEST(HfConvert, F32OutputType) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string out = test::temp_path("p4f-f32.gguf");
  ConvertOptions o = hftest::checked();
  o.out_type = "f32";
  ASSERT_TRUE(convert(hf_dir(), out, o).is_ok());
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  const GgufTensorInfo* w = (*g)->find_tensor("blk.1.attn_qkv.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->type, GgmlType::F32);
  fs::remove(out);
  o.out_type = "q4";
  EXPECT_FALSE(convert(hf_dir(), out, o).is_ok());
  EXPECT_FALSE(fs::exists(out));
}

TEST(HfConvert, BadFoldersGiveErrorsAndNoFile) {
  const fs::path dir = test::temp_path("hf-bad");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string out = test::temp_path("hf-bad.gguf");
  EXPECT_FALSE(convert(dir.string(), out, hftest::checked()).is_ok());  // no config.json
  auto write = [&](const char* name, const std::string& text) { std::ofstream(dir / name) << text; };
  write("config.json", "{not json");
  EXPECT_FALSE(convert(dir.string(), out, hftest::checked()).is_ok());
  write("config.json", R"({"model_type":"gpt9"})");
  Status s = convert(dir.string(), out, hftest::checked());
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("phi4flash"), std::string::npos) << s.message();  // lists the supported types
  write("config.json", R"({"model_type":"phi4flash","num_attention_heads":3})");
  EXPECT_FALSE(convert(dir.string(), out, hftest::checked()).is_ok());
  EXPECT_FALSE(fs::exists(out));
  if (!hf_dir().empty()) {
    // A checkpoint tensor no rule claims (a layout the table does not know) is an error.
    for (const char* n : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
      fs::copy_file(fs::path(hf_dir()) / n, dir / n, fs::copy_options::overwrite_existing);
    std::string h = R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("model.extra":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    std::vector<char> b(8);
    for (int i = 0; i < 8; ++i) b[(size_t)i] = (char)((uint64_t)h.size() >> (8 * i));
    std::ofstream st(dir / "model.safetensors", std::ios::binary);
    st.write(b.data(), 8);
    st << h << std::string(8, '\0');
    st.close();
    s = convert(dir.string(), out, hftest::checked());
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("model.extra"), std::string::npos) << s.message();
    EXPECT_FALSE(fs::exists(out));
  }
  fs::remove_all(dir);
}

TEST(HfConvert, CliPicksTheHfImporterForADirectory) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string exe = test::chimera_binary();
  ASSERT_TRUE(fs::exists(exe)) << exe << " not built";
  const std::string out = test::temp_path("p4f-cli.gguf");
  const std::string cmd = exe + " convert -q " + hf_dir() + " -o " + out + " --type f16";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ((*g)->find_tensor("blk.0.ssm_in.weight")->type, GgmlType::F16);
  fs::remove(out);
}

}  // namespace
}  // namespace chimera::format::hf
