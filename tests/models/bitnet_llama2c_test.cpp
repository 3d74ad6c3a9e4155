// Ternary llama2.c-style checkpoints (format/bitnet_llama2c, models/
// bitnet_llama2c.cpp): both real models in $CHIMERA_SHARED/models/
// bitnet-llama2c are converted to GGUF (TQ2_0 codes + F32 per-tensor scales)
// and must reproduce their reference greedy sequences (bitnet-*.reference.json:
// BOS + prompt tokens teacher-forced, then 252 greedy tokens) token for token;
// batched prefill and one-token-at-a-time decoding agree bit for bit; the
// converter is lossless (codes and scales read back exactly) and rejects
// corrupt files with a clear error.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/bitnet_llama2c/bitnet_llama2c.h"
#include "format/gguf/gguf.h"
#include "kernels/type_traits.h"
#include "models/context.h"
#include "models/model.h"
#include "test_util.h"

namespace chimera::test {
namespace {

int32_t argmax(const float* x, int64_t n) {
  int64_t b = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[b]) b = i;
  return (int32_t)b;
}

std::string convert_model(const std::string& dir, const std::string& name) {
  const std::string out = temp_path(name + ".gguf");
  format::bitnet_llama2c::ConvertOptions opts;
  opts.check = &models::check_model_header;
  opts.name = name;
  Status st = format::bitnet_llama2c::convert(dir + "/" + name + ".bin", dir + "/tok512.bin", out, opts);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return out;
}

// Every entry of the reference sequence must match the greedy choice.
void check_reference(const std::string& name) {
  const std::string dir = shared_dir() + "/models/bitnet-llama2c";
  std::ifstream jf(dir + "/" + name + ".reference.json");
  ASSERT_TRUE(jf.good());
  const nlohmann::json ref = nlohmann::json::parse(jf);
  const std::vector<int32_t> prompt = ref["prompt_tokens"].get<std::vector<int32_t>>();
  const std::vector<int32_t> seq = ref["sequence"].get<std::vector<int32_t>>();
  const std::string path = convert_model(dir, name);
  auto m = models::load_model(path);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  models::Model& model = **m;
  EXPECT_EQ(model.info().arch, "bitnet");
  const int64_t nv = model.info().n_vocab;
  std::vector<float> logits((size_t)nv);
  models::Context ctx = model.new_context();
  auto st = ctx.new_state(512);
  // Prefill BOS + prompt in one batch, then greedy.
  ASSERT_TRUE(ctx.forward(*st, prompt.data(), (int64_t)prompt.size(), models::Logits::kLast, logits.data(), nullptr)
                  .is_ok());
  std::vector<int32_t> got(prompt.begin() + 1, prompt.end());
  int first_diff = -1;
  while (got.size() < seq.size()) {
    const int32_t next = argmax(logits.data(), nv);
    if (first_diff < 0 && next != seq[got.size()]) first_diff = (int)got.size();
    got.push_back(seq[got.size()]);  // continue on the reference path
    ASSERT_TRUE(ctx.forward(*st, &got.back(), 1, models::Logits::kLast, logits.data(), nullptr).is_ok());
  }
  ::testing::Test::RecordProperty("first_mismatch", first_diff);
  EXPECT_EQ(first_diff, -1) << name << ": first greedy mismatch at sequence index " << first_diff;

  // Token-by-token decoding of the prompt gives the same logits as the batch.
  auto st2 = ctx.new_state(512);
  std::vector<float> l2((size_t)nv);
  for (int32_t t : prompt) ASSERT_TRUE(ctx.forward(*st2, &t, 1, models::Logits::kLast, l2.data(), nullptr).is_ok());
  auto st3 = ctx.new_state(512);
  std::vector<float> l3((size_t)nv);
  ASSERT_TRUE(ctx.forward(*st3, prompt.data(), (int64_t)prompt.size(), models::Logits::kLast, l3.data(), nullptr).is_ok());
  EXPECT_EQ(std::memcmp(l2.data(), l3.data(), l2.size() * 4), 0);
  std::remove(path.c_str());
}

TEST(BitnetLlama2c, Reproduces1M) {
  CHIMERA_REQUIRE_SHARED(shared);
  check_reference("bitnet-1M");
}

// bitnet-3M is the sensitive one: with a different (equally valid) f32 order
// of bitnorm and of the dequantization scale it leaves the reference at
// sequence index 108 (see models/bitnet_llama2c.cpp).
TEST(BitnetLlama2c, Reproduces3M) {
  CHIMERA_REQUIRE_SHARED(shared);
  check_reference("bitnet-3M");
}

TEST(BitnetLlama2c, ConversionIsLossless) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string dir = shared + "/models/bitnet-llama2c";
  auto ck = format::bitnet_llama2c::Checkpoint::open(dir + "/bitnet-1M.bin");
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  const std::string path = convert_model(dir, "bitnet-1M");
  auto g = format::GgufFile::open(path);
  ASSERT_TRUE(g.is_ok());
  const char* names[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down", "ffn_up"};
  for (int k = 0; k < 7; ++k) {
    for (int l : {0, 7}) {
      const auto& m = ck->kinds[k][(size_t)l];
      const std::string base = "blk." + std::to_string(l) + "." + names[k];
      const format::GgufTensorInfo* t = (*g)->find_tensor(base + ".weight");
      ASSERT_NE(t, nullptr) << base;
      EXPECT_EQ(t->type, format::GgmlType::TQ2_0);
      std::vector<float> f((size_t)(m.out * m.in));
      kernels::weight_type_traits(t->type)->row_to_f32(t->data, f.data(), (int64_t)f.size());
      for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(f[i], (float)m.codes[i]) << base << " " << i;
      const format::GgufTensorInfo* s = (*g)->find_tensor(base + ".scale");
      ASSERT_NE(s, nullptr);
      float sc;
      std::memcpy(&sc, s->data, 4);
      EXPECT_EQ(sc, m.scale);
      EXPECT_GT(sc, 0.f);
    }
  }
  std::remove(path.c_str());
}

TEST(BitnetLlama2c, CorruptFilesAreClearErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  std::vector<uint8_t> b = read_file_bytes(shared + "/models/bitnet-llama2c/bitnet-1M.bin");
  ASSERT_GT(b.size(), 300u);
  auto r = format::bitnet_llama2c::Checkpoint::parse(b.data(), b.size() - 1, "x");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("bytes"), std::string::npos) << r.status().message();
  std::vector<uint8_t> bad = b;
  bad[0] ^= 1;
  r = format::bitnet_llama2c::Checkpoint::parse(bad.data(), bad.size(), "x");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("magic"), std::string::npos);
}

}  // namespace
}  // namespace chimera::test
