// `chimera quantize ... IQ4_XS`: llama.cpp's LLAMA_FTYPE_MOSTLY_IQ4_XS rules
// (no imatrix) in-process, then end to end on a one-layer synth llama-3.2-1b
// (2048-wide rows, so the matrices really are IQ4_XS): tensor types,
// general.file_type = 30, logits of the quantized model against the F16
// original within a stated budget, and generation from it.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
#include "models/model.h"
#include "quant/quantize_model.h"
#include "gguf_inspect.h"
#include "logit_compare.h"
#include "test_util.h"

namespace chimera {
namespace {

using format::GgmlType;

TEST(QuantizeIq4xs, FollowsLlamaCppRules) {
  const quant::QuantMix* mix = quant::find_quant_mix("iq4_xs");
  ASSERT_NE(mix, nullptr);
  EXPECT_EQ(mix->ftype, 30u);
  EXPECT_EQ(mix->base, GgmlType::IQ4_XS);
  std::vector<quant::TensorShape> ts = {{"token_embd.weight", {4096, 32000}}, {"output.weight", {4096, 32000}}};
  for (int i = 0; i < 16; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    ts.push_back({b + "attn_v.weight", {4096, 1024}});
    ts.push_back({b + "ffn_down.weight", {14336, 4096}});
  }
  const auto gqa4 = quant::make_mix_context(ts, 32, 8), gqa1 = quant::make_mix_context(ts, 32, 32);
  auto type_of = [&](const quant::MixContext& ctx, const std::string& name, std::vector<int64_t> ne,
                     bool* fb = nullptr) {
    return quant::choose_tensor_type(*mix, ctx, {name, ne}, fb);
  };
  EXPECT_EQ(type_of(gqa4, "output.weight", {4096, 32000}), GgmlType::Q6_K);
  EXPECT_EQ(type_of(gqa4, "token_embd.weight", {4096, 32000}), GgmlType::IQ4_XS);  // untied: base type
  EXPECT_EQ(type_of(gqa4, "blk.3.attn_q.weight", {4096, 4096}), GgmlType::IQ4_XS);
  EXPECT_EQ(type_of(gqa4, "blk.3.attn_output.weight", {4096, 4096}), GgmlType::IQ4_XS);
  EXPECT_EQ(type_of(gqa4, "blk.0.attn_norm.weight", {4096}), GgmlType::F32);
  for (int i = 0; i < 16; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(type_of(gqa4, b + "attn_v.weight", {4096, 1024}), GgmlType::Q5_K) << i;   // n_gqa >= 4
    EXPECT_EQ(type_of(gqa1, b + "attn_v.weight", {4096, 1024}), GgmlType::IQ4_XS) << i;
    EXPECT_EQ(type_of(gqa4, b + "ffn_down.weight", {14336, 4096}), i < 2 ? GgmlType::Q5_K : GgmlType::IQ4_XS) << i;
  }
  // Row-length fallbacks: IQ4_XS -> IQ4_NL (rows of 32s), else F16; output head -> Q8_0.
  bool fb = false;
  EXPECT_EQ(type_of(gqa4, "blk.5.attn_q.weight", {64, 64}, &fb), GgmlType::IQ4_NL);
  EXPECT_TRUE(fb);
  EXPECT_EQ(type_of(gqa4, "blk.5.ffn_up.weight", {172, 64}), GgmlType::F16);
  EXPECT_EQ(type_of(gqa4, "output.weight", {64, 512}), GgmlType::Q8_0);
}

// Budget (random synth weights, which amplify weight noise more than trained
// ones): max |dlogit| < 1.0 * RMS(logit), RMS(dlogit) < 0.25 * RMS(logit)
// (measured 0.70 / 0.19; Q4_0 on the same model has budget 1.5 / 0.4).
TEST(QuantizeIq4xs, SynthLlamaOneLayerEndToEnd) {
  const std::string src = test::temp_path("iq4xs-synth-f16.gguf"), out = test::temp_path("iq4xs-synth.gguf");
  test::ShellResult s = test::run_chimera("synth --like llama-3.2-1b --type F16 --layers 1 --vocab 512 -o " + src);
  ASSERT_EQ(s.rc, 0) << s.output;
  test::ShellResult r = test::run_chimera("quantize " + src + " " + out + " IQ4_XS --threads 2");
  ASSERT_EQ(r.rc, 0) << r.output;
  auto types = test::tensor_types(out);
  // One layer, n_gqa = 32/8 = 4: attn_v Q5_K; ffn_down layer 0 < 1/8 is false -> IQ4_XS; tied head Q6_K.
  EXPECT_EQ(types.at("token_embd.weight"), GgmlType::Q6_K);
  EXPECT_EQ(types.at("blk.0.attn_v.weight"), GgmlType::Q5_K);
  for (const char* n : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_output.weight",
                        "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"})
    EXPECT_EQ(types.at(n), GgmlType::IQ4_XS) << n;
  EXPECT_EQ(types.at("blk.0.attn_norm.weight"), GgmlType::F32);
  auto f = format::GgufFile::open(out);
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ((*f)->get_int("general.file_type").value_or(-1), 30);

  const std::vector<int32_t> ids = {1, 300, 45, 7, 211, 90, 402, 13, 77, 5};
  const std::vector<float> ref = test::all_logits(src, ids), q = test::all_logits(out, ids);
  ASSERT_EQ(ref.size(), q.size());
  ASSERT_FALSE(ref.empty());
  const auto [max_rel, rms_rel] = test::relative_errors(ref, q);
  std::printf("IQ4_XS synth: max |dlogit| / RMS(logit) = %.4f, RMS(dlogit) / RMS(logit) = %.4f\n", max_rel, rms_rel);
  EXPECT_LT(max_rel, 1.0);
  EXPECT_LT(rms_rel, 0.25);

  test::ShellResult g = test::run_chimera("run -m " + out + " -t 1,300,45 -n 6 --temp 0 --ids --ignore-eos -q");
  EXPECT_EQ(g.rc, 0) << g.output;
  int n_ids = 0;
  for (size_t i = 0; i < g.output.size(); ++i)
    n_ids += std::isdigit((unsigned char)g.output[i]) &&
             (i + 1 == g.output.size() || !std::isdigit((unsigned char)g.output[i + 1]));
  EXPECT_EQ(n_ids, 6) << g.output;
  std::filesystem::remove(src);
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace chimera
