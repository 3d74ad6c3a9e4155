// `chimera synth`: the full-size llama-3.2-1b plan is checked in-process (shapes,
// parameter count, metadata) without writing data; the binary is run end to end
// with --layers 1 and a small test-only --vocab, and the output read back with
// GgufFile. Bad NAME/TYPE/--layers exit 1 with "error:".
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
#include "models/context.h"
#include "models/model.h"
#include "models/synth/synth.h"
#include "test_util.h"

namespace chimera {
namespace {

namespace synth = models::synth;
using format::GgmlType;
using RunResult = test::ShellResult;
using test::run_chimera;

std::vector<int64_t> shape(const format::GgufTensorInfo* t) { return t ? t->ne : std::vector<int64_t>{}; }

TEST(Synth, FullLlama32PlanHasRealShapes) {
  synth::SynthRequest req;
  req.like = "llama-3.2-1b";
  req.type = "F16";
  auto plan = synth::make_synth_plan(req);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  // 16 layers x 9 tensors + token_embd + rope_freqs + output_norm; tied output.
  EXPECT_EQ(plan->tensors.size(), 16u * 9 + 3);
  // Llama 3.2 1B has 1,235,814,400 parameters; rope_freqs adds 32 factors.
  EXPECT_EQ(plan->total_elements(), 1235814400ull + 32);
  EXPECT_EQ(plan->find("llama.block_count")->u, 16u);
  EXPECT_EQ(plan->find("llama.vocab_size")->u, 128256u);
  EXPECT_EQ(plan->find("tokenizer.ggml.tokens")->arr.size(), 128256u);
  EXPECT_EQ(plan->find("general.file_type")->u, 1u);
  for (const auto& t : plan->tensors) {
    EXPECT_NE(t.name, "output.weight");
    EXPECT_EQ(t.type, t.ne.size() == 1 ? GgmlType::F32 : GgmlType::F16) << t.name;
    if (t.name == "token_embd.weight") {
      EXPECT_EQ(t.ne, (std::vector<int64_t>{2048, 128256}));
    }
    if (t.name == "blk.15.ffn_down.weight") {
      EXPECT_EQ(t.ne, (std::vector<int64_t>{8192, 2048}));
    }
  }
}

TEST(Synth, TypeRuleKeepsVectorsF32) {
  for (const char* type : {"F32", "f16", "BF16"}) {
    synth::SynthRequest req;
    req.like = "llama-3.2-1b";
    req.type = type;
    req.n_layers = 1;
    req.n_vocab = 300;
    auto plan = synth::make_synth_plan(req);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    const GgmlType want = *format::ggml_type_from_name(type);
    for (const auto& t : plan->tensors) EXPECT_EQ(t.type, t.ne.size() == 1 ? GgmlType::F32 : want) << t.name;
  }
}

TEST(Synth, ValuesAreDeterministicAndChunkIndependent) {
  synth::SynthTensor t{"blk.0.attn_q.weight", {64, 64}, synth::SynthInit::normal(0.02f)};
  std::vector<float> a(4096), b(4096), c(4096);
  synth::synth_values(t, 7, 0, 4096, a.data());
  synth::synth_values(t, 7, 0, 1000, b.data());
  synth::synth_values(t, 7, 1000, 3096, b.data() + 1000);
  synth::synth_values(t, 8, 0, 4096, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double sum = 0, sq = 0;
  for (float v : a) sum += v, sq += (double)v * v;
  const double mean = sum / a.size(), sd = std::sqrt(sq / a.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 0.02, 0.002);
}

TEST(Synth, Llama3RopeFactorsMatchConverter) {
  // Llama 3.2: theta 5e5, factor 32, low 1, high 4, original context 8192.
  auto f = format::llama3_rope_factors(64, 500000.0, 32.0, 1.0, 4.0, 8192.0);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_EQ(f.front(), 1.0f);  // high-frequency dims are not scaled
  EXPECT_EQ(f.back(), 32.0f);  // low-frequency dims are scaled by factor
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
}

TEST(Synth, WritesLoadableOneLayerFile) {
  const std::string out = test::temp_path("synth-1l.gguf");
  RunResult r = run_chimera("synth --like llama-3.2-1b --type F16 --layers 1 --vocab 512 --seed 3 -o " + out);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("wrote"), std::string::npos) << r.output;

  auto file = format::GgufFile::open(out);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  const auto& g = **file;
  EXPECT_EQ(g.architecture(), "llama");
  EXPECT_EQ(g.get_int("llama.block_count"), 1);
  EXPECT_EQ(g.get_int("llama.context_length"), 131072);
  EXPECT_EQ(g.get_int("llama.embedding_length"), 2048);
  EXPECT_EQ(g.get_int("llama.feed_forward_length"), 8192);
  EXPECT_EQ(g.get_int("llama.attention.head_count"), 32);
  EXPECT_EQ(g.get_int("llama.attention.head_count_kv"), 8);
  EXPECT_EQ(g.get_int("llama.rope.dimension_count"), 64);
  EXPECT_EQ(g.get_int("llama.vocab_size"), 512);
  EXPECT_EQ(g.get_int("general.file_type"), 1);
  EXPECT_DOUBLE_EQ(*g.get_float("llama.rope.freq_base"), 500000.0);
  EXPECT_NEAR(*g.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-12);
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(g.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(g.get_int("tokenizer.ggml.eos_token_id"), 2);
  const auto* tokens = g.get_array("tokenizer.ggml.tokens");
  const auto* types = g.get_array("tokenizer.ggml.token_type");
  const auto* scores = g.get_array("tokenizer.ggml.scores");
  ASSERT_TRUE(tokens && types && scores);
  ASSERT_EQ(tokens->arr.size(), 512u);
  EXPECT_EQ(types->arr.size(), 512u);
  EXPECT_EQ(scores->arr.size(), 512u);
  EXPECT_EQ(tokens->arr[0].s, "<unk>");
  EXPECT_EQ(tokens->arr[1].s, "<s>");
  EXPECT_EQ(tokens->arr[2].s, "</s>");
  EXPECT_EQ(tokens->arr[3].s, "<0x00>");
  EXPECT_EQ(tokens->arr[3 + 0x0A].s, "<0x0A>");
  EXPECT_EQ(tokens->arr[258].s, "<0xFF>");
  EXPECT_EQ(types->arr[3].as_int(), 6);
  EXPECT_EQ(types->arr[1].as_int(), 3);
  EXPECT_EQ(tokens->arr[300].s, "\xE2\x96\x81tok300");

  EXPECT_EQ(g.tensors().size(), 12u);
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(shape(g.find_tensor("token_embd.weight")), (std::vector<int64_t>{2048, 512}));
  EXPECT_EQ(shape(g.find_tensor("rope_freqs.weight")), (std::vector<int64_t>{32}));
  EXPECT_EQ(shape(g.find_tensor("blk.0.attn_norm.weight")), (std::vector<int64_t>{2048}));
  EXPECT_EQ(shape(g.find_tensor("blk.0.attn_q.weight")), (std::vector<int64_t>{2048, 2048}));
  EXPECT_EQ(shape(g.find_tensor("blk.0.attn_k.weight")), (std::vector<int64_t>{2048, 512}));
  EXPECT_EQ(shape(g.find_tensor("blk.0.attn_v.weight")), (std::vector<int64_t>{2048, 512}));
  EXPECT_EQ(shape(g.find_tensor("blk.0.attn_output.weight")), (std::vector<int64_t>{2048, 2048}));
  EXPECT_EQ(shape(g.find_tensor("blk.0.ffn_norm.weight")), (std::vector<int64_t>{2048}));
  EXPECT_EQ(shape(g.find_tensor("blk.0.ffn_gate.weight")), (std::vector<int64_t>{2048, 8192}));
  EXPECT_EQ(shape(g.find_tensor("blk.0.ffn_up.weight")), (std::vector<int64_t>{2048, 8192}));
  EXPECT_EQ(shape(g.find_tensor("blk.0.ffn_down.weight")), (std::vector<int64_t>{8192, 2048}));
  EXPECT_EQ(shape(g.find_tensor("output_norm.weight")), (std::vector<int64_t>{2048}));
  for (const auto& t : g.tensors()) EXPECT_EQ(t.type, t.ne.size() == 1 ? GgmlType::F32 : GgmlType::F16) << t.name;

  // Data: norms are 1, rope factors as computed, weights small and random, and
  // a tensor's values do not depend on --layers (keyed by seed and name).
  const auto* norm = g.find_tensor("blk.0.ffn_norm.weight");
  float v;
  std::memcpy(&v, norm->data + 4 * 100, 4);
  EXPECT_EQ(v, 1.0f);
  const auto* rope = g.find_tensor("rope_freqs.weight");
  std::memcpy(&v, rope->data + 4 * 31, 4);
  EXPECT_EQ(v, 32.0f);
  const auto* q = g.find_tensor("blk.0.attn_q.weight");
  std::vector<float> want(1000);
  synth::SynthTensor tq{"blk.0.attn_q.weight", {2048, 2048}, synth::SynthInit::normal(0.02f)};
  synth::synth_values(tq, 3, 5000, want.size(), want.data());
  for (size_t i = 0; i < want.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, q->data + 2 * (5000 + i), 2);
    ASSERT_EQ(h, f32_to_f16(want[i])) << i;
  }
  EXPECT_FALSE(std::filesystem::exists(out + ".partial"));
  std::filesystem::remove(out);
}

// Every non-llama family: the full plan has the real key values, and a truncated
// file (real widths, --layers small, test --vocab 512) loads with models::load_model
// and one forward call gives finite logits.
struct FamilyCase {
  const char* name;
  const char* arch;
  int layers;  // smallest count that keeps the family's layer pattern
  const char* type;
};

TEST(Synth, NewFamiliesLoadAndRunForward) {
  const FamilyCase cases[] = {
      {"granite-4.0-h-micro", "granitehybrid", 2, "F16"},  // layers: Mamba-2, then attention
      {"granite-4.0-h-tiny", "granitehybrid", 2, "F16"},
      {"mamba2-1.3b", "mamba2", 2, "Q8_0"},  // a quantization mix through the shared rules
      {"mamba-1.4b", "mamba", 2, "Q4_K_M"},
      {"phi-tiny-moe", "phimoe", 1, "F16"},
      {"llada-8b", "llada", 1, "F16"},
      {"bitnet-b1.58-2b-4t", "bitnet", 1, "F16"},
  };
  ThreadPool pool(2);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string out = test::temp_path(std::string("synth-") + c.name + ".gguf");
    RunResult r = run_chimera(std::string("synth --like ") + c.name + " --type " + c.type + " --layers " +
                              std::to_string(c.layers) + " --vocab 512 -o " + out);
    ASSERT_EQ(r.rc, 0) << r.output;
    {
      auto file = format::GgufFile::open(out);
      ASSERT_TRUE(file.is_ok()) << file.status().message();
      EXPECT_EQ((*file)->architecture(), c.arch);
    }
    auto m = models::load_model(out);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    auto& model = **m;
    const int64_t nv = model.info().n_vocab;
    EXPECT_EQ(nv, 512);
    models::Context ctx = model.new_context();
    auto st = ctx.new_state(16);
    const int32_t toks[3] = {1, 300, 17};
    std::vector<float> logits((size_t)nv);
    ASSERT_TRUE(ctx.forward(*st, toks, 3, models::Logits::kLast, logits.data(), &pool).is_ok());
    float max_abs = 0;
    for (float v : logits) {
      ASSERT_TRUE(std::isfinite(v));
      max_abs = std::max(max_abs, std::fabs(v));
    }
    EXPECT_GT(max_abs, 0.0f);
    std::filesystem::remove(out);
  }
}

TEST(Synth, GraniteHybridPlansMatchConfig) {
  synth::SynthRequest req;
  req.like = "granite-4.0-h-tiny";
  auto plan = synth::make_synth_plan(req);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  const auto* kv = plan->find("granitehybrid.attention.head_count_kv");
  ASSERT_TRUE(kv && kv->arr.size() == 40u);
  int n_attn = 0;
  for (size_t i = 0; i < kv->arr.size(); ++i) n_attn += kv->arr[i].as_int().value_or(0) != 0;
  EXPECT_EQ(n_attn, 4);
  EXPECT_EQ(kv->arr[5].as_int(), 4);
  EXPECT_EQ(plan->find("granitehybrid.expert_count")->u, 64u);
  EXPECT_EQ(plan->find("granitehybrid.expert_used_count")->u, 6u);
  EXPECT_EQ(plan->find("tokenizer.ggml.tokens")->arr.size(), 100352u);
  for (const auto& t : plan->tensors) {
    if (t.name == "blk.0.ssm_in.weight") {
      EXPECT_EQ(t.ne, (std::vector<int64_t>{1536, 2 * 3072 + 2 * 128 + 48}));
    }
    if (t.name == "blk.0.ffn_gate_exps.weight") {
      EXPECT_EQ(t.ne, (std::vector<int64_t>{1536, 512, 64}));
    }
    if (t.name == "blk.0.ssm_a" || t.name == "blk.0.ssm_conv1d.weight" || t.name == "blk.0.ffn_gate_inp.weight") {
      EXPECT_EQ(t.type, GgmlType::F32) << t.name;
    }
  }
  // Micro is dense; --layers 2 keeps one Mamba-2 and one attention layer.
  req.like = "granite-4.0-h-micro";
  req.n_layers = 2;
  plan = synth::make_synth_plan(req);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  EXPECT_EQ(plan->find("granitehybrid.expert_count"), nullptr);
  kv = plan->find("granitehybrid.attention.head_count_kv");
  ASSERT_EQ(kv->arr.size(), 2u);
  EXPECT_EQ(kv->arr[0].as_int(), 0);
  EXPECT_EQ(kv->arr[1].as_int(), 8);
}

TEST(Synth, FullMamba14BPlanHasRealShapes) {
  synth::SynthRequest req;
  req.like = "mamba-1.4b";
  auto plan = synth::make_synth_plan(req);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  // 48 layers x 10 tensors (norm, in, conv w/b, x, dt w/b, A, D, out) + token_embd + output_norm; tied head.
  EXPECT_EQ(plan->tensors.size(), 48u * 10 + 2);
  // d_model 2048, d_inner 4096, d_state 16, dt_rank 128, vocab 50280: 1,372,178,432 parameters.
  EXPECT_EQ(plan->total_elements(), 1372178432ull);
  EXPECT_EQ(plan->find("mamba.ssm.time_step_rank")->u, 128u);
  EXPECT_EQ(plan->find("mamba.ssm.inner_size")->u, 4096u);
  EXPECT_EQ(plan->find("tokenizer.ggml.tokens")->arr.size(), 50280u);
  std::map<std::string, std::vector<int64_t>> want = {
      {"token_embd.weight", {2048, 50280}},  {"blk.47.ssm_in.weight", {2048, 8192}},
      {"blk.0.ssm_conv1d.weight", {4, 4096}}, {"blk.0.ssm_x.weight", {4096, 160}},
      {"blk.0.ssm_dt.weight", {128, 4096}},   {"blk.0.ssm_a", {16, 4096}},
      {"blk.0.ssm_out.weight", {4096, 2048}},
  };
  for (const auto& t : plan->tensors) {
    EXPECT_NE(t.name, "output.weight");
    if (auto it = want.find(t.name); it != want.end()) {
      EXPECT_EQ(t.ne, it->second) << t.name;
      want.erase(it);
    }
  }
  EXPECT_TRUE(want.empty());
}

TEST(Synth, FullPlansHaveRealParameterCounts) {
  // Plans only (no data written): totals within the published sizes.
  struct Want {
    const char* name;
    double billions_lo, billions_hi;
  };
  for (const Want& w : {Want{"granite-4.0-h-micro", 3.0, 3.3}, Want{"granite-4.0-h-tiny", 6.7, 7.1},
                        Want{"mamba2-1.3b", 1.2, 1.45}, Want{"phi-tiny-moe", 3.6, 3.9},
                        Want{"phi-3.5-moe", 41.5, 42.2}, Want{"llada-8b", 7.8, 8.2},
                        Want{"bitnet-b1.58-2b-4t", 2.3, 2.5}}) {
    synth::SynthRequest req;
    req.like = w.name;
    auto plan = synth::make_synth_plan(req);
    ASSERT_TRUE(plan.is_ok()) << w.name << ": " << plan.status().message();
    const double b = (double)plan->total_elements() / 1e9;
    EXPECT_GE(b, w.billions_lo) << w.name;
    EXPECT_LE(b, w.billions_hi) << w.name;
  }
}

TEST(Synth, ListsModelsAndTypes) {
  RunResult r = run_chimera("synth --list");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("llama-3.2-1b"), std::string::npos);
  EXPECT_NE(r.output.find("BF16"), std::string::npos);
}

TEST(Synth, BadRequestsExitOneWithError) {
  const std::string out = test::temp_path("synth-bad.gguf");
  for (const std::string& args : std::vector<std::string>{
           "synth --like no-such-model --type F16 -o " + out,
           "synth --like llama-3.2-1b --type F99 -o " + out,
           "synth --like llama-3.2-1b --type Q4_K -o " + out,  // not supported yet
           "synth --like llama-3.2-1b --type F16 --layers 0 -o " + out,
           std::string("synth --like llama-3.2-1b --type F16"),  // no output
           "synth --type F16 -o " + out,            // no model
           "synth --like llama-3.2-1b --type F16 --layers abc -o " + out,
       }) {
    RunResult r = run_chimera(args);
    EXPECT_EQ(r.rc, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("error:"), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
    std::filesystem::remove(out);
  }
  RunResult r = run_chimera("synth --like no-such-model -o " + out);
  EXPECT_NE(r.output.find("llama-3.2-1b"), std::string::npos) << "error lists known names: " << r.output;
}

}  // namespace
}  // namespace chimera
