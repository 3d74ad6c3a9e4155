// `chimera quantize`: the per-tensor mix rules in-process (llama.cpp's choices on
// known shapes), then the binary end to end on stories260K (F32, 64-wide rows:
// K-quants fall back to legacy types, ffn_down's 172-wide rows to F16) and on a
// one-layer synth llama-3.2-1b (2048-wide rows: the real K-quant mixes). Each
// output's tensor types are checked, the model is loaded and its logits compared
// with the original's (error relative to the logit scale, budget per type), and
// `chimera run` generates from it. Bad TYPE / input / output paths exit 1.
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
#include "models/model.h"
#include "models/synth/synth.h"
#include "quant/quantize_model.h"
#include "gguf_inspect.h"
#include "logit_compare.h"
#include "test_util.h"

namespace chimera {
namespace {

using format::GgmlType;
using RunResult = test::ShellResult;
using test::run_chimera;
using test::all_logits;
using test::relative_errors;
using test::tensor_types;

struct Budget {
  double max_rel, rms_rel;  // max |dlogit| and RMS dlogit, both over RMS(logit)
};

TEST(QuantizeRules, FollowLlamaCppMixes) {
  const auto* q4km = quant::find_quant_mix("q4_k_m");
  ASSERT_NE(q4km, nullptr);
  EXPECT_EQ(q4km->ftype, 15u);
  EXPECT_EQ(quant::find_quant_mix("Q5_K_M")->ftype, 17u);
  EXPECT_EQ(quant::find_quant_mix("Q8_0")->ftype, 7u);
  EXPECT_EQ(quant::find_quant_mix("Q9_9"), nullptr);
  // A 16-layer, 4096-wide model with a separate output head.
  std::vector<quant::TensorShape> ts = {{"token_embd.weight", {4096, 32000}}, {"output.weight", {4096, 32000}}};
  for (int i = 0; i < 16; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    ts.push_back({b + "attn_v.weight", {4096, 1024}});
    ts.push_back({b + "ffn_down.weight", {14336, 4096}});
    ts.push_back({b + "attn_norm.weight", {4096}});
  }
  const auto ctx = quant::make_mix_context(ts, 32, 8);
  EXPECT_EQ(ctx.n_attn_v, 16);
  EXPECT_TRUE(ctx.has_output);
  auto type_of = [&](const char* mix, const std::string& name, std::vector<int64_t> ne) {
    return quant::choose_tensor_type(*quant::find_quant_mix(mix), ctx, {name, ne});
  };
  EXPECT_EQ(type_of("Q4_K_M", "output.weight", {4096, 32000}), GgmlType::Q6_K);
  EXPECT_EQ(type_of("Q4_K_M", "token_embd.weight", {4096, 32000}), GgmlType::Q4_K);
  EXPECT_EQ(type_of("Q8_0", "output.weight", {4096, 32000}), GgmlType::Q8_0);
  EXPECT_EQ(type_of("Q4_0", "output.weight", {4096, 32000}), GgmlType::Q6_K);
  EXPECT_EQ(type_of("Q4_K_M", "blk.0.attn_norm.weight", {4096}), GgmlType::F32);
  // use_more_bits(i, 16): i < 2, i >= 14, (i - 2) % 3 == 2 -> 0 1 4 7 10 13 14 15.
  for (int i = 0; i < 16; ++i) {
    const bool more = i < 2 || i >= 14 || (i - 2) % 3 == 2;
    const std::string b = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(type_of("Q4_K_M", b + "attn_v.weight", {4096, 1024}), more ? GgmlType::Q6_K : GgmlType::Q4_K) << i;
    EXPECT_EQ(type_of("Q5_K_M", b + "ffn_down.weight", {14336, 4096}), more ? GgmlType::Q6_K : GgmlType::Q5_K) << i;
    EXPECT_EQ(type_of("Q4_K_S", b + "attn_v.weight", {4096, 1024}), i < 4 ? GgmlType::Q5_K : GgmlType::Q4_K) << i;
    EXPECT_EQ(type_of("Q4_K_S", b + "ffn_down.weight", {14336, 4096}), i < 2 ? GgmlType::Q5_K : GgmlType::Q4_K) << i;
  }
  EXPECT_EQ(type_of("Q2_K", "blk.3.attn_v.weight", {4096, 1024}), GgmlType::Q4_K);  // n_gqa = 4
  EXPECT_EQ(type_of("Q2_K", "blk.3.ffn_down.weight", {14336, 4096}), GgmlType::Q3_K);
  EXPECT_EQ(type_of("Q3_K_M", "blk.1.attn_v.weight", {4096, 1024}), GgmlType::Q5_K);
  EXPECT_EQ(type_of("Q3_K_M", "blk.0.ffn_down.weight", {14336, 4096}), GgmlType::Q5_K);  // i < 16/16
  EXPECT_EQ(type_of("Q3_K_M", "blk.5.ffn_down.weight", {14336, 4096}), GgmlType::Q4_K);
  // Row-length fallbacks.
  bool fb = false;
  EXPECT_EQ(quant::choose_tensor_type(*q4km, ctx, {"blk.5.attn_q.weight", {64, 64}}, &fb), GgmlType::Q5_0);
  EXPECT_TRUE(fb);
  EXPECT_EQ(type_of("Q6_K", "blk.5.attn_q.weight", {64, 64}), GgmlType::Q8_0);
  EXPECT_EQ(type_of("Q5_K_S", "blk.5.attn_q.weight", {64, 64}), GgmlType::Q5_1);
  EXPECT_EQ(type_of("Q2_K", "blk.5.attn_q.weight", {64, 64}), GgmlType::Q4_0);
  // Fused QKV follows the attn_v rules.
  EXPECT_EQ(type_of("Q4_K_M", "blk.0.attn_qkv.weight", {4096, 6144}), GgmlType::Q6_K);
  EXPECT_EQ(type_of("Q4_K_M", "blk.2.attn_qkv.weight", {4096, 6144}), GgmlType::Q4_K);
  EXPECT_EQ(type_of("Q4_K_M", "blk.5.ffn_down.weight", {172, 64}), GgmlType::F16);
  EXPECT_EQ(type_of("Q8_0", "blk.5.ffn_down.weight", {172, 64}), GgmlType::F16);
  EXPECT_EQ(type_of("Q4_K_M", "output.weight", {64, 512}), GgmlType::Q8_0);
}

TEST(QuantizeRules, EncodeIsThreadCountInvariant) {
  std::vector<float> x(512 * 37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * (float)i) * (1.0f + (float)(i % 7));
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    std::vector<uint8_t> a(format::ggml_row_size(t, 512) * 37), b(a.size());
    ASSERT_TRUE(quant::encode_rows(t, x.data(), 37, 512, a.data(), nullptr).is_ok());
    ThreadPool pool(3);
    ASSERT_TRUE(quant::encode_rows(t, x.data(), 37, 512, b.data(), &pool).is_ok());
    EXPECT_EQ(a, b) << format::ggml_type_name(t);
  }
  EXPECT_FALSE(quant::encode_rows(GgmlType::Q4_K, x.data(), 1, 64, nullptr).is_ok());
}

// Quantizes `src` to each type, checks types, logits and generation.
void check_model(const std::string& src, const std::string& tag,
                 const std::map<std::string, std::map<std::string, GgmlType>>& want_types,
                 const std::map<std::string, Budget>& budget) {
  const std::vector<int32_t> ids = {1, 300, 45, 12, 99, 7, 260, 33, 150, 2, 61, 88};
  int64_t nv = 0;
  const std::vector<float> ref = all_logits(src, ids, &nv);
  ASSERT_FALSE(ref.empty());
  for (const auto& [type, expect] : want_types) {
    const std::string out = test::temp_path(tag + "-" + type + ".gguf");
    RunResult r = run_chimera("quantize " + src + " " + out + " " + type + " --threads 2");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_NE(r.output.find("quantized"), std::string::npos) << r.output;
    auto types = tensor_types(out);
    for (const auto& [name, t] : expect) {
      ASSERT_TRUE(types.count(name)) << name;
      EXPECT_EQ(format::ggml_type_name(types[name]), format::ggml_type_name(t)) << type << " " << name;
    }
    auto f = format::GgufFile::open(out);
    ASSERT_TRUE(f.is_ok());
    EXPECT_EQ((uint32_t)(*f)->get_int("general.file_type").value_or(-1), quant::find_quant_mix(type)->ftype);
    int64_t nv2 = 0;
    const std::vector<float> q = all_logits(out, ids, &nv2);
    ASSERT_EQ(q.size(), ref.size());
    const auto [max_rel, rms_rel] = relative_errors(ref, q);
    EXPECT_LT(max_rel, budget.at(type).max_rel) << tag << " " << type;
    EXPECT_LT(rms_rel, budget.at(type).rms_rel) << tag << " " << type;
    std::printf("%s %s: max |dlogit| / RMS(logit) = %.4f, RMS(dlogit) / RMS(logit) = %.4f\n", tag.c_str(),
                type.c_str(), max_rel, rms_rel);
    RunResult g = run_chimera("run -m " + out + " -t 1,300,45 -n 8 --temp 0 --ids --ignore-eos -q");
    EXPECT_EQ(g.rc, 0) << g.output;
    int n_ids = 0;  // --ids prints the generated ids separated by spaces
    for (size_t i = 0; i < g.output.size(); ++i)
      n_ids += std::isdigit((unsigned char)g.output[i]) && (i + 1 == g.output.size() || !std::isdigit((unsigned char)g.output[i + 1]));
    EXPECT_EQ(n_ids, 8) << g.output;
    std::filesystem::remove(out);
  }
}

TEST(QuantizeCli, Stories260K) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string src = shared + "/models/stories260K.gguf";
  using T = GgmlType;
  std::map<std::string, std::map<std::string, T>> want = {
      {"Q8_0", {{"output.weight", T::Q8_0}, {"blk.0.attn_q.weight", T::Q8_0}, {"blk.0.ffn_down.weight", T::F16},
                {"blk.0.attn_norm.weight", T::F32}, {"token_embd.weight", T::Q8_0}}},
      {"Q4_0", {{"output.weight", T::Q8_0}, {"blk.0.attn_q.weight", T::Q4_0}, {"blk.0.ffn_down.weight", T::F16}}},
      {"Q4_K_M", {{"output.weight", T::Q8_0}, {"blk.0.attn_v.weight", T::Q5_0}, {"blk.1.ffn_up.weight", T::Q5_0},
                  {"blk.0.ffn_down.weight", T::F16}, {"token_embd.weight", T::Q5_0}, {"output_norm.weight", T::F32}}},
      {"Q6_K", {{"output.weight", T::Q8_0}, {"blk.2.attn_k.weight", T::Q8_0}, {"blk.4.ffn_down.weight", T::F16}}},
  };
  check_model(src, "stories", want,
              {{"Q8_0", {0.05, 0.01}}, {"Q4_0", {0.5, 0.1}}, {"Q4_K_M", {0.3, 0.05}}, {"Q6_K", {0.05, 0.01}}});
  // Requantizing a quantized input works and warns.
  const std::string q8 = test::temp_path("quant-stories-q8.gguf"), q4 = test::temp_path("quant-stories-q4.gguf");
  ASSERT_EQ(run_chimera("quantize " + src + " " + q8 + " Q8_0").rc, 0);
  RunResult rq = run_chimera("quantize " + q8 + " " + q4 + " Q4_0");
  EXPECT_EQ(rq.rc, 0) << rq.output;
  EXPECT_NE(rq.output.find("warning: "), std::string::npos) << rq.output;
  EXPECT_EQ(tensor_types(q4)["blk.0.attn_q.weight"], GgmlType::Q4_0);
  std::filesystem::remove(q8);
  std::filesystem::remove(q4);
}

// Every TYPE `chimera quantize` lists, end to end on a file whose rows are all
// whole 256-blocks (quant-llama: 256 wide, ffn 512, so no fallback hides a
// type): the command succeeds, the big matrices get the mix's base type,
// general.file_type is the mix's, the model loads and generates, and its
// logits stay within a per-type budget of the source's (the source is Q8_0,
// so this is requantization). A type written as another would also break the
// bits ordering checked at the end.
TEST(QuantizeCli, EveryListedTypeEndToEnd) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string src = shared + "/golden/models/quant-llama-Q8_0.gguf";
  const std::vector<int32_t> ids = {1, 300, 45, 12, 99, 7, 260, 33};
  const std::vector<float> ref = all_logits(src, ids);
  ASSERT_FALSE(ref.empty());
  // RMS(dlogit) / RMS(logit) budgets, about 1.5x the measured value (random
  // weights amplify weight noise; the float types measure the source's own int8
  // activation rounding, 0.017; Q8_0 requantizes to the very same bytes).
  const std::map<std::string, double> rms_budget = {
      {"Q8_0", 1e-6},  {"Q4_0", 0.36},  {"Q4_1", 0.36},  {"Q5_0", 0.19},   {"Q5_1", 0.18},   {"Q2_K", 0.8},
      {"Q3_K_M", 0.4}, {"Q4_K_S", 0.26}, {"Q4_K_M", 0.28}, {"Q5_K_S", 0.16}, {"Q5_K_M", 0.16}, {"Q6_K", 0.1},
      {"IQ4_XS", 0.32}, {"F16", 0.025}, {"BF16", 0.027}, {"F32", 0.025},  {"TQ1_0", 1.2},   {"TQ2_0", 1.2}};
  std::map<std::string, double> rms_of;
  for (const auto& mix : quant::quant_mixes()) {
    const std::string type(mix.name);
    SCOPED_TRACE(type);
    ASSERT_TRUE(rms_budget.count(type)) << type << " is listed by quantize but has no budget here";
    const std::string out = test::temp_path("every-" + type + ".gguf");
    RunResult r = run_chimera("quantize " + src + " " + out + " " + type + " --threads 2");
    ASSERT_EQ(r.rc, 0) << r.output;
    const auto types = tensor_types(out);
    EXPECT_EQ(format::ggml_type_name(types.at("blk.1.attn_q.weight")), format::ggml_type_name(mix.base));
    EXPECT_EQ(format::ggml_type_name(types.at("blk.1.ffn_up.weight")), format::ggml_type_name(mix.base));
    auto f = format::GgufFile::open(out);
    ASSERT_TRUE(f.is_ok());
    EXPECT_EQ((uint32_t)(*f)->get_int("general.file_type").value_or(-1), mix.ftype);
    const std::vector<float> q = all_logits(out, ids);
    ASSERT_EQ(q.size(), ref.size());
    const double rms = relative_errors(ref, q).second;
    rms_of[type] = rms;
    std::printf("quant-llama Q8_0 -> %s: RMS(dlogit) / RMS(logit) = %.4f\n", type.c_str(), rms);
    EXPECT_LT(rms, rms_budget.at(type));
    RunResult g = run_chimera("run -m " + out + " -t 1,300,45 -n 4 --temp 0 --ids --ignore-eos -q");
    EXPECT_EQ(g.rc, 0) << g.output;
    std::filesystem::remove(out);
  }
  // More bits, less error.
  EXPECT_LT(rms_of["Q6_K"], rms_of["Q4_K_M"]);
  EXPECT_LT(rms_of["Q4_K_M"], rms_of["Q3_K_M"]);
  EXPECT_LT(rms_of["Q3_K_M"], rms_of["Q2_K"]);
  EXPECT_LT(rms_of["Q5_0"], rms_of["Q4_0"]);
  EXPECT_LT(rms_of["Q8_0"], rms_of["Q6_K"]);
  EXPECT_LT(rms_of["F16"], rms_of["Q6_K"]);
}

TEST(QuantizeCli, SynthLlamaOneLayer) {
  const std::string src = test::temp_path("quant-synth-f16.gguf");
  RunResult s = run_chimera("synth --like llama-3.2-1b --type F16 --layers 1 --vocab 512 -o " + src);
  ASSERT_EQ(s.rc, 0) << s.output;
  using T = GgmlType;
  // One layer: use_more_bits(0, 1) holds (0 >= 7/8), so attn_v/ffn_down get Q6_K; tied token_embd -> Q6_K.
  std::map<std::string, std::map<std::string, T>> want = {
      {"Q8_0", {{"token_embd.weight", T::Q8_0}, {"blk.0.ffn_down.weight", T::Q8_0}, {"blk.0.attn_norm.weight", T::F32}}},
      {"Q4_0", {{"token_embd.weight", T::Q6_K}, {"blk.0.attn_q.weight", T::Q4_0}}},
      {"Q4_K_M", {{"token_embd.weight", T::Q6_K}, {"blk.0.attn_v.weight", T::Q6_K}, {"blk.0.ffn_down.weight", T::Q6_K},
                  {"blk.0.attn_q.weight", T::Q4_K}, {"blk.0.ffn_up.weight", T::Q4_K}, {"rope_freqs.weight", T::F32}}},
      {"Q6_K", {{"token_embd.weight", T::Q6_K}, {"blk.0.attn_k.weight", T::Q6_K}}},
  };
  // Random weights amplify weight noise more than trained ones (no structure to preserve).
  check_model(src, "synth", want,
              {{"Q8_0", {0.25, 0.05}}, {"Q4_0", {1.5, 0.4}}, {"Q4_K_M", {1.2, 0.3}}, {"Q6_K", {0.5, 0.1}}});
  std::filesystem::remove(src);
}

// synth's quantized TYPEs use the same rules: synth --type X gives the tensor types
// and file_type that quantizing synth's F16 output to X gives (written end to end
// for Q4_K_M with one layer, where use_more_bits bumps attn_v and ffn_down; the
// other types are checked on 2-layer plans in-process, where only layer 1 is bumped).
TEST(QuantizeCli, SynthQuantizedTypesMatchQuantize) {
  const std::string f16 = test::temp_path("synthq-f16.gguf");
  ASSERT_EQ(run_chimera("synth --like llama-3.2-1b --type F16 --layers 1 --vocab 512 -o " + f16).rc, 0);
  // The other quantized synth types, in-process (writing them costs seconds each).
  for (const char* type : {"Q8_0", "Q4_0", "Q5_K_M", "Q6_K"}) {
    models::synth::SynthRequest req;
    req.like = "llama-3.2-1b";
    req.type = type;
    req.n_layers = 2;
    req.n_vocab = 512;
    auto plan = models::synth::make_synth_plan(req);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    EXPECT_EQ(plan->find("general.file_type")->u, quant::find_quant_mix(type)->ftype);
    std::map<std::string, GgmlType> types;
    for (const auto& t : plan->tensors) types[t.name] = t.type;
    const GgmlType base = quant::find_quant_mix(type)->base;
    EXPECT_EQ(types.at("blk.0.attn_q.weight"), base) << type;
    EXPECT_EQ(types.at("blk.0.attn_norm.weight"), GgmlType::F32) << type;
    EXPECT_EQ(types.at("token_embd.weight"), base == GgmlType::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q6_K) << type;
    EXPECT_EQ(types.at("blk.1.ffn_down.weight"), std::string(type) == "Q5_K_M" ? GgmlType::Q6_K : base) << type;
  }
  for (const char* type : {"Q4_K_M"}) {
    const std::string direct = test::temp_path(std::string("synthq-direct-") + type + ".gguf");
    const std::string via = test::temp_path(std::string("synthq-via-") + type + ".gguf");
    RunResult r = run_chimera("synth --like llama-3.2-1b --type " + std::string(type) + " --layers 1 --vocab 512 -o " +
                              direct);
    ASSERT_EQ(r.rc, 0) << r.output;
    ASSERT_EQ(run_chimera("quantize " + f16 + " " + via + " " + type).rc, 0);
    const auto a = tensor_types(direct), b = tensor_types(via);
    EXPECT_EQ(a, b) << type;
    auto fa = format::GgufFile::open(direct);
    ASSERT_TRUE(fa.is_ok());
    EXPECT_EQ((*fa)->get_int("general.file_type"), (int64_t)quant::find_quant_mix(type)->ftype);
    if (std::string(type) == "Q4_K_M") {
      EXPECT_EQ(a.at("blk.0.attn_q.weight"), GgmlType::Q4_K);
      EXPECT_EQ(a.at("blk.0.attn_v.weight"), GgmlType::Q6_K);
      EXPECT_EQ(a.at("blk.0.ffn_down.weight"), GgmlType::Q6_K);
      RunResult g = run_chimera("run -m " + direct + " -t 1,300,45 -n 4 --temp 0 --ids --ignore-eos -q");
      EXPECT_EQ(g.rc, 0) << g.output;
    }
    std::filesystem::remove(direct);
    std::filesystem::remove(via);
  }
  std::filesystem::remove(f16);
}

TEST(QuantizeCli, Errors) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string src = shared + "/models/stories260K.gguf";
  const std::string out = test::temp_path("quant-err.gguf");
  RunResult r = run_chimera("quantize " + src + " " + out + " Q9_K");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.output.find("error: unknown quantization type 'Q9_K'"), std::string::npos) << r.output;
  r = run_chimera("quantize /no/such/file.gguf " + out + " Q8_0");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.output.find("error: cannot read '/no/such/file.gguf'"), std::string::npos) << r.output;
  r = run_chimera("quantize " + src + " /no/such/dir/out.gguf Q8_0");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.output.find("error: cannot create"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace chimera
