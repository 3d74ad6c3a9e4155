// `chimera synth --like bitnet-b1.58-2b-4t --type TQ2_0|TQ1_0`: the plan carries
// the real microsoft/bitnet-b1.58-2B-4T config (config.json: hidden_size 2560,
// num_hidden_layers 30, num_attention_heads 20, num_key_value_heads 5,
// intermediate_size 6912, vocab_size 128256, rope_theta 500000, rms_norm_eps
// 1e-5, max_position_embeddings 4096, hidden_act relu2, tied embeddings) and
// llama.cpp's TQ mix (matrices TQ, tied token_embd Q6_K, norms F32); a 1-layer
// file of each type loads and runs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "format/gguf/gguf.h"
#include "models/context.h"
#include "models/model.h"
#include "models/synth/synth.h"
#include "quant/quantize_model.h"
#include "test_util.h"

namespace chimera {
namespace {

using format::GgmlType;

TEST(SynthBitnet, RealConfigAndTernaryTypes) {
  for (const char* type : {"TQ2_0", "TQ1_0", "tq2_0"}) {
    models::synth::SynthRequest req;
    req.like = "bitnet-b1.58-2b-4t";
    req.type = type;
    auto plan = models::synth::make_synth_plan(req);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    auto u = [&](const char* k) { return plan->find(std::string("bitnet.") + k)->as_int().value_or(-1); };
    EXPECT_EQ(plan->find("general.architecture")->s, "bitnet");
    EXPECT_EQ(u("embedding_length"), 2560);
    EXPECT_EQ(u("block_count"), 30);
    EXPECT_EQ(u("attention.head_count"), 20);
    EXPECT_EQ(u("attention.head_count_kv"), 5);
    EXPECT_EQ(u("feed_forward_length"), 6912);
    EXPECT_EQ(u("context_length"), 4096);
    EXPECT_EQ(u("vocab_size"), 128256);
    EXPECT_EQ(plan->find("bitnet.rope.freq_base")->f, 500000.0f);
    EXPECT_FLOAT_EQ(plan->find("bitnet.attention.layer_norm_rms_epsilon")->f, 1e-5f);
    EXPECT_EQ(plan->find("bitnet.ffn_activation")->s, "relu2");
    const bool tq2 = type[2] == '2';
    EXPECT_EQ(plan->find("general.file_type")->u, tq2 ? 37u : 36u);
    std::map<std::string, GgmlType> types;
    for (const auto& t : plan->tensors) types[t.name] = t.type;
    EXPECT_EQ(types.count("output.weight"), 0u);  // tied head
    EXPECT_EQ(types.at("token_embd.weight"), GgmlType::Q6_K);
    const GgmlType tq = tq2 ? GgmlType::TQ2_0 : GgmlType::TQ1_0;
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
      EXPECT_EQ(types.at(std::string("blk.29.") + m + ".weight"), tq) << m;
    for (const char* n : {"attn_norm", "attn_sub_norm", "ffn_norm", "ffn_sub_norm"})
      EXPECT_EQ(types.at(std::string("blk.0.") + n + ".weight"), GgmlType::F32) << n;
    EXPECT_EQ(types.at("output_norm.weight"), GgmlType::F32);
  }
}

TEST(SynthBitnet, OneLayerTernaryFilesLoadAndRun) {
  for (const char* type : {"TQ2_0", "TQ1_0"}) {
    models::synth::SynthRequest req;
    req.like = "bitnet-b1.58-2b-4t";
    req.type = type;
    req.n_layers = 1;
    req.n_vocab = 512;
    auto plan = models::synth::make_synth_plan(req);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    const std::string out = test::temp_path(std::string("synth-bitnet-") + type + ".gguf");
    ASSERT_TRUE(models::synth::write_synth_gguf(*plan, 42, out, nullptr).is_ok());
    auto m = models::load_model(out);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_EQ((*m)->info().n_vocab, 512);
    models::Context ctx = (*m)->new_context();
    auto st = ctx.new_state(16);
    const int32_t toks[3] = {1, 300, 17};
    std::vector<float> logits(512);
    ASSERT_TRUE(ctx.forward(*st, toks, 3, models::Logits::kLast, logits.data(), nullptr).is_ok());
    float mx = 0;
    for (float v : logits) {
      ASSERT_TRUE(std::isfinite(v));
      mx = std::max(mx, std::fabs(v));
    }
    EXPECT_GT(mx, 0.f) << type;
    std::filesystem::remove(out);
  }
}

}  // namespace
}  // namespace chimera
