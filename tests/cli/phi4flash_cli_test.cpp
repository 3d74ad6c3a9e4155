// Phi-4-mini-flash through the CLI:
//  * `chimera convert` of the tiny golden checkpoint (hf/phi4flash-tiny-a), then
//    `chimera chat --show-prompt` with piped input: the first turn is rendered by
//    the checkpoint's Phi-4 chat template and tokenizes to exactly the golden
//    prompt tokens (the golden prompt is that template's output for the same
//    user message); the second turn feeds only "<|end|>"-closed new turn text;
//  * `chimera synth --like phi-4-mini-flash-reasoning`: the full-size plan has
//    the released model's parameter count and metadata; a --layers 4 Q8_0 file
//    with a small test vocabulary loads and runs; bad --layers is refused.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "core/thread_pool.h"
#include "models/context.h"
#include "models/model.h"
#include "models/synth/synth.h"
#include "test_util.h"

namespace chimera::test {
namespace {


std::string slurp(const std::string& path) {
  auto b = read_file_bytes(path);
  return std::string(b.begin(), b.end());
}

TEST(Phi4FlashCli, ChatUsesThePhi4TemplateOfAConvertedCheckpoint) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string hf = shared + "/golden/hf/phi4flash-tiny-a";
  ASSERT_TRUE(std::filesystem::is_directory(hf)) << "no " << hf;
  const auto meta = nlohmann::json::parse(slurp(shared + "/golden/phi4flash-a.json"));
  const auto want_ids = meta["prompt_tokens"].get<std::vector<int32_t>>();
  const std::string gguf = temp_path("p4f-chat.gguf"), in = temp_path("p4f-chat-in.txt"),
                    err = temp_path("p4f-chat-err.txt");
  auto conv = run_shell(chimera_binary() + " convert " + hf + " -o " + gguf + " --type f32 2>&1");
  ASSERT_EQ(conv.rc, 0) << conv.output;
  {
    std::ofstream f(in);
    f << "How to solve 3*x^2+4*x+5=1? Please show each step.\nAnd the second line?\n";
  }
  auto chat = run_shell(chimera_binary() + " chat -m " + gguf + " --temp 0 -n 3 --show-prompt < " + in +
                        " 2> " + err);
  const std::string log = slurp(err);
  std::filesystem::remove(gguf);
  ASSERT_EQ(chat.rc, 0) << log;
  std::regex text_re("\\[prompt text\\]([\\s\\S]*?)\\[/prompt text\\]\\n\\[prompt ids\\]([ 0-9]*)\\n");
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), text_re); it != std::sregex_iterator(); ++it) {
    texts.push_back((*it)[1]);
    std::vector<int32_t> v;
    std::istringstream ss((*it)[2].str());
    for (int32_t x; ss >> x;) v.push_back(x);
    ids.push_back(v);
  }
  ASSERT_EQ(texts.size(), 2u) << log;
  EXPECT_EQ(texts[0], meta["prompt"].get<std::string>());
  EXPECT_EQ(ids[0], want_ids) << "first turn must tokenize to the golden prompt tokens";
  // Turn 2: only the new turn, closed the Phi-4 way and opening the reply.
  const std::string tail = "<|user|>And the second line?<|end|><|assistant|>";
  ASSERT_GE(texts[1].size(), tail.size());
  EXPECT_EQ(texts[1].substr(texts[1].size() - tail.size()), tail) << texts[1];
  EXPECT_EQ(texts[1].find("<|system|>"), std::string::npos) << "earlier turns must not be fed again";
  EXPECT_EQ(ids[1].back(), 200019) << "<|assistant|>";
}

TEST(Phi4FlashCli, SynthPlanMatchesTheReleasedModel) {
  models::synth::SynthRequest req;
  req.like = "phi-4-mini-flash-reasoning";
  req.type = "Q4_K_M";
  auto plan = models::synth::make_synth_plan(req);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  // 3,852,562,944 = the checkpoint index's 7,706,608,640 bytes (BF16, A_log and λ in F32).
  EXPECT_EQ(plan->total_elements(), 3852562944ull);
  EXPECT_EQ(plan->find("general.architecture")->s, "phi4flash");
  EXPECT_EQ(plan->find("phi4flash.block_count")->u, 32u);
  EXPECT_EQ(plan->find("phi4flash.embedding_length")->u, 2560u);
  EXPECT_EQ(plan->find("phi4flash.attention.head_count")->u, 40u);
  EXPECT_EQ(plan->find("phi4flash.attention.head_count_kv")->u, 20u);
  EXPECT_EQ(plan->find("phi4flash.attention.sliding_window")->u, 512u);
  EXPECT_EQ(plan->find("phi4flash.ssm.inner_size")->u, 5120u);
  EXPECT_EQ(plan->find("phi4flash.ssm.time_step_rank")->u, 160u);
  EXPECT_EQ(plan->find("tokenizer.ggml.tokens")->arr.size(), 200064u);
  for (const auto& t : plan->tensors) {
    if (t.name == "blk.0.ssm_a" || t.name == "blk.0.ssm_conv1d.weight" || t.name == "blk.1.attn_sub_norm.weight") {
      EXPECT_EQ(t.type, format::GgmlType::F32) << t.name;
    }
    if (t.name == "blk.1.attn_qkv.weight") {
      EXPECT_EQ(t.ne, (std::vector<int64_t>{2560, 5120}));
    }
    if (t.name == "blk.19.attn_q.weight") {
      EXPECT_EQ(t.ne, (std::vector<int64_t>{2560, 2560}));
    }
  }
  req.n_layers = 6;
  EXPECT_FALSE(models::synth::make_synth_plan(req).is_ok()) << "6 layers cannot keep the layer plan";
}

TEST(Phi4FlashCli, SynthSmallFileLoadsAndRuns) {
  const std::string out = temp_path("p4f-synth.gguf");
  auto r = run_shell(chimera_binary() + " synth --like phi-4-mini-flash-reasoning --type Q8_0 --layers 4 --vocab 512 -o " +
                     out + " 2>&1");
  ASSERT_EQ(r.rc, 0) << r.output;
  auto m = models::load_model(out);
  std::filesystem::remove(out);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ThreadPool pool(2);
  models::Context ctx = (*m)->new_context();
  auto st = ctx.new_state(600);
  std::vector<int32_t> toks(8);  // the ring itself is covered by tests/models/phi4flash_test.cpp
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = (int32_t)(3 + (i * 7) % 500);
  std::vector<float> logits(512);
  ASSERT_TRUE(ctx.forward(*st, toks.data(), (int64_t)toks.size(), models::Logits::kLast, logits.data(), &pool).is_ok());
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  // --layers 4: Mamba, SWA (ring of 512 rows), Mamba (memory), full KV (600 rows
  // at a full context, one 64-row block after 8 tokens); K and V rows of 20·64
  // floats; Mamba conv 3 × 5120 + SSM 5120 × 16.
  const size_t kv_row = 2 * 1280 * sizeof(float);
  const size_t mamba = 2 * (size_t)(5120 * 3 + 5120 * 16) * sizeof(float);
  EXPECT_EQ(st->bytes(true), (512 + 600) * kv_row + mamba);
  EXPECT_EQ(st->bytes(), (512 + layers::KvCache::kBlockRows) * kv_row + mamba);
}

}  // namespace
}  // namespace chimera::test
