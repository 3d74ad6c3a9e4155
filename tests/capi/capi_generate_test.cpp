// C API: loading, tokenizer, generation (greedy equals the CLI), callbacks,
// cancellation, samplers, grammars, several contexts on one model.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "capi_fixture.h"

namespace chimera::capi_test {
namespace {

TEST(CApiBasics, VersionMatchesTheHeader) {
  EXPECT_STREQ(chimera_version(), CHIMERA_VERSION_STRING);
  EXPECT_EQ(CHIMERA_VERSION, CHIMERA_VERSION_MAJOR * 10000 + CHIMERA_VERSION_MINOR * 100 + CHIMERA_VERSION_PATCH);
  EXPECT_STREQ(chimera_status_name(CHIMERA_ERR_BUSY), "CHIMERA_ERR_BUSY");
  EXPECT_STREQ(chimera_status_name(999), "unknown");
}

TEST(CApiModel, InfoAndTokenizerMatchTheCli) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  ASSERT_TRUE(m);
  chimera_model_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(chimera_model_info_get(m.get(), &info), CHIMERA_OK);
  EXPECT_STREQ(info.arch, "llama");
  EXPECT_EQ(info.n_vocab, 512);
  EXPECT_EQ(info.n_ctx, 4096);
  EXPECT_EQ(info.is_diffusion, 0);
  EXPECT_EQ(info.chat_template, nullptr);

  const std::string text = "Once upon a time, </s> a cat";
  const std::vector<int32_t> ids = tokenize(m.get(), text);
  auto cli = test::run_chimera("tokenize -m " + stories_path(shared) + " -p '" + text + "'", false);
  ASSERT_EQ(cli.rc, 0);
  EXPECT_EQ(join_ids(ids) + "\n", cli.output);
  // Without special parsing "</s>" is text; with it, it is EOS.
  const std::vector<int32_t> plain = tokenize(m.get(), text, true, false);
  EXPECT_NE(plain, ids);
  EXPECT_NE(std::find(ids.begin(), ids.end(), info.token_eos), ids.end());
  EXPECT_EQ(std::find(plain.begin(), plain.end(), info.token_eos), plain.end());

  char buf[256];
  size_t n = 0;
  ASSERT_EQ(chimera_detokenize(m.get(), plain.data(), plain.size(), 0, buf, sizeof buf, &n), CHIMERA_OK);
  EXPECT_EQ(std::string(buf, n), text);
  EXPECT_EQ(buf[n], '\0');
  int eog = -1;
  ASSERT_EQ(chimera_token_is_eog(m.get(), info.token_eos, &eog), CHIMERA_OK);
  EXPECT_EQ(eog, 1);
}

TEST(CApiModel, InstructionSetOverrideIsProcessWide) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string path = stories_path(shared);
  chimera_model_info info;
  info.struct_size = sizeof info;
  std::string best;
  {
    ModelPtr a = load(path);
    ASSERT_EQ(chimera_model_info_get(a.get(), &info), CHIMERA_OK);
    best = info.isa;
    if (best == "scalar") GTEST_SKIP() << "the CPU runs only scalar kernels";
    chimera_model_params p;
    chimera_model_params_init(&p);
    p.isa = "scalar";
    chimera_model* b = nullptr;
    EXPECT_EQ(chimera_model_load(path.c_str(), &p, &b), CHIMERA_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(chimera_last_error()).find("process-wide"), std::string::npos) << chimera_last_error();
    EXPECT_EQ(b, nullptr);
  }
  // With no model loaded the override applies; the output is the CLI's with --isa scalar.
  chimera_model_params p;
  chimera_model_params_init(&p);
  p.isa = "scalar";
  p.n_threads = 2;
  chimera_model* raw = nullptr;
  ASSERT_EQ(chimera_model_load(path.c_str(), &p, &raw), CHIMERA_OK) << chimera_last_error();
  {
    ModelPtr m(raw);
    ASSERT_EQ(chimera_model_info_get(m.get(), &info), CHIMERA_OK);
    EXPECT_STREQ(info.isa, "scalar");
    ContextPtr c = context(m.get());
    Generated g = generate(c.get(), tokenize(m.get(), "Once upon a time"), greedy(24));
    auto cli = test::run_chimera("run -q --isa scalar -m " + path + " -p 'Once upon a time' -n 24 --temp 0 --ids", false);
    EXPECT_EQ(join_ids(g.tokens) + "\n", cli.output);
  }
  // Back to the best one for the tests that follow in this process.
  p.isa = best.c_str();
  ASSERT_EQ(chimera_model_load(path.c_str(), &p, &raw), CHIMERA_OK) << chimera_last_error();
  ASSERT_EQ(chimera_model_info_get(raw, &info), CHIMERA_OK);
  EXPECT_EQ(std::string(info.isa), best);
  EXPECT_EQ(chimera_model_free(raw), CHIMERA_OK);
}

TEST(CApiModel, ChatFallsBackToThePlainFormat) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  const chimera_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi </s>"}};
  char buf[256];
  size_t n = 0;
  ASSERT_EQ(chimera_chat_render(m.get(), msgs, 2, 1, buf, sizeof buf, &n), CHIMERA_OK);
  EXPECT_EQ(std::string(buf, n), "system: Be brief.\nuser: Hi </s>\nassistant:");
  // Contents are plain text: "</s>" typed into a message is not EOS.
  size_t nt = 0;
  ASSERT_EQ(chimera_chat_tokenize(m.get(), msgs, 2, 1, nullptr, 0, &nt), CHIMERA_ERR_BUFFER_TOO_SMALL);
  std::vector<int32_t> ids(nt);
  ASSERT_EQ(chimera_chat_tokenize(m.get(), msgs, 2, 1, ids.data(), ids.size(), &nt), CHIMERA_OK);
  EXPECT_EQ(ids, tokenize(m.get(), std::string(buf, n), true, false));
}

TEST(CApiGenerate, GreedyTextEqualsTheCli) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const std::string& path : {stories_path(shared), granite_path(shared)}) {
    ModelPtr m = load(path);
    ContextPtr c = context(m.get());
    const std::string prompt = "Once upon a time";
    Generated g = generate(c.get(), tokenize(m.get(), prompt), greedy(40));
    ASSERT_EQ(g.status, CHIMERA_OK) << chimera_context_last_error(c.get());
    EXPECT_EQ(g.result.finish_reason, CHIMERA_FINISH_LENGTH);
    EXPECT_EQ(g.result.n_generated, 40);
    EXPECT_EQ((int64_t)g.tokens.size(), g.result.n_generated);
    auto cli = test::run_chimera("run -q -m " + path + " -p '" + prompt + "' -n 40 --temp 0", false);
    ASSERT_EQ(cli.rc, 0);
    EXPECT_EQ(prompt + g.text + "\n", cli.output) << path;
    auto ids = test::run_chimera("run -q -m " + path + " -p '" + prompt + "' -n 40 --temp 0 --ids", false);
    EXPECT_EQ(join_ids(g.tokens) + "\n", ids.output) << path;
  }
}

TEST(CApiGenerate, ExampleProgramPrintsWhatTheCliPrints) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = stories_path(shared);
  auto cli = test::run_chimera("run -q -m " + model + " -p 'Once upon a time' -n 48 --temp 0", false);
  ASSERT_EQ(cli.rc, 0);
  for (const std::string exe : {CHIMERA_EXAMPLE_C, CHIMERA_EXAMPLE_C_STATIC}) {  // libchimera.so, libchimera.a
    auto ex = test::run_shell(exe + " " + model + " 'Once upon a time' 48 2>/dev/null");
    ASSERT_EQ(ex.rc, 0) << exe;
    EXPECT_EQ(ex.output, cli.output) << exe;
    auto bad = test::run_shell(exe + " /nonexistent.gguf 2>&1");
    EXPECT_EQ(bad.rc, 1) << exe;
    EXPECT_NE(bad.output.find("error: loading '/nonexistent.gguf'"), std::string::npos) << bad.output;
  }
}

TEST(CApiGenerate, SampledTextEqualsTheCliWithTheSameSeed) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  ContextPtr c = context(m.get());
  chimera_generate_params p;
  chimera_generate_params_init(&p);
  p.max_tokens = 32;
  p.sampling.seed = 1234;
  p.sampling.repeat_penalty = 1.1f;
  Generated g = generate(c.get(), tokenize(m.get(), "Once upon a time"), p);
  ASSERT_EQ(g.status, CHIMERA_OK);
  auto cli = test::run_chimera("run -q -m " + stories_path(shared) +
                                   " -p 'Once upon a time' -n 32 --seed 1234 --repeat-penalty 1.1 --ids",
                               false);
  EXPECT_EQ(join_ids(g.tokens) + "\n", cli.output);
}

TEST(CApiGenerate, CancelFromTheCallbackStopsAfterThatToken) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  const auto prompt = tokenize(m.get(), "Once upon a time");
  ContextPtr full = context(m.get());
  Generated all = generate(full.get(), prompt, greedy(12));
  ASSERT_EQ(all.tokens.size(), 12u);

  ContextPtr c = context(m.get());
  Generated g = generate(c.get(), prompt, greedy(12), /*stop_after=*/3);
  ASSERT_EQ(g.status, CHIMERA_OK);
  EXPECT_EQ(g.result.finish_reason, CHIMERA_FINISH_CANCELLED);
  EXPECT_EQ(g.result.n_generated, 3);
  ASSERT_EQ(g.tokens.size(), 3u);
  // The context goes on from where it stopped: the rest equals the uninterrupted run.
  Generated rest = generate(c.get(), {}, greedy(9));
  ASSERT_EQ(rest.status, CHIMERA_OK) << chimera_context_last_error(c.get());
  g.tokens.insert(g.tokens.end(), rest.tokens.begin(), rest.tokens.end());
  EXPECT_EQ(g.tokens, all.tokens);
}

struct CancelFromThread {
  chimera_context* ctx = nullptr;
  int tokens = 0;
};

int cancel_on_third(int32_t token, const char*, size_t, void* ud) {
  auto* s = static_cast<CancelFromThread*>(ud);
  if (token >= 0 && ++s->tokens == 3) {
    // Another thread cancels; the generation ends after this token.
    std::thread t([ctx = s->ctx] { EXPECT_EQ(chimera_context_cancel(ctx), CHIMERA_OK); });
    t.join();
  }
  return 0;
}

TEST(CApiGenerate, ContextCancelFromAnotherThread) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  ContextPtr c = context(m.get());
  const auto prompt = tokenize(m.get(), "Once upon a time");
  CancelFromThread s{c.get()};
  chimera_generate_params p = greedy(20);
  p.callback = cancel_on_third;
  p.user_data = &s;
  chimera_generate_result r;
  r.struct_size = sizeof r;
  ASSERT_EQ(chimera_generate(c.get(), prompt.data(), prompt.size(), &p, &r), CHIMERA_OK);
  EXPECT_EQ(r.finish_reason, CHIMERA_FINISH_CANCELLED);
  EXPECT_EQ(r.n_generated, 3);
  // A cancel before a call does not affect it.
  ASSERT_EQ(chimera_context_cancel(c.get()), CHIMERA_OK);
  Generated g = generate(c.get(), {}, greedy(5));
  EXPECT_EQ(g.result.finish_reason, CHIMERA_FINISH_LENGTH);
  EXPECT_EQ(g.tokens.size(), 5u);
}

struct Reentry {
  chimera_context* self = nullptr;
  chimera_context* other = nullptr;
  std::vector<chimera_status> self_calls, other_calls;
};

int reenter(int32_t token, const char*, size_t, void* ud) {
  auto* r = static_cast<Reentry*>(ud);
  if (token < 0) return 0;
  const int32_t t = token;
  r->self_calls.push_back(chimera_decode(r->self, &t, 1, CHIMERA_LOGITS_NONE, nullptr, 0));
  r->other_calls.push_back(chimera_decode(r->other, &t, 1, CHIMERA_LOGITS_NONE, nullptr, 0));
  return 0;
}

TEST(CApiGenerate, CallbackMayUseOtherContextsButNotItsOwn) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  ContextPtr c = context(m.get()), other = context(m.get());
  Reentry r{c.get(), other.get()};
  const auto prompt = tokenize(m.get(), "Once upon a time");
  chimera_generate_params p = greedy(4);
  p.callback = reenter;
  p.user_data = &r;
  ASSERT_EQ(chimera_generate(c.get(), prompt.data(), prompt.size(), &p, nullptr), CHIMERA_OK);
  ASSERT_EQ(r.self_calls.size(), 4u);
  for (chimera_status s : r.self_calls) EXPECT_EQ(s, CHIMERA_ERR_BUSY);
  for (chimera_status s : r.other_calls) EXPECT_EQ(s, CHIMERA_OK);
  EXPECT_NE(std::string(chimera_context_last_error(c.get())).find("in use"), std::string::npos);
  int64_t n_past = 0;
  ASSERT_EQ(chimera_context_size(other.get(), &n_past, nullptr), CHIMERA_OK);
  EXPECT_EQ(n_past, 4);
}

TEST(CApiGenerate, StopStringsEndTheTextBeforeThem) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  ContextPtr c = context(m.get());
  const auto prompt = tokenize(m.get(), "Once upon a time");
  Generated all = generate(c.get(), prompt, greedy(40));
  const size_t at = all.text.find("Lily");
  ASSERT_NE(at, std::string::npos) << all.text;
  ASSERT_EQ(chimera_context_reset(c.get()), CHIMERA_OK);
  const char* stops[] = {"Lily"};
  chimera_generate_params p = greedy(40);
  p.stop = stops;
  p.n_stop = 1;
  Generated g = generate(c.get(), prompt, p);
  ASSERT_EQ(g.status, CHIMERA_OK);
  EXPECT_EQ(g.result.finish_reason, CHIMERA_FINISH_STOP);
  EXPECT_EQ(g.text, all.text.substr(0, at));
}

TEST(CApiSampler, ManualLoopEqualsGenerate) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  const auto prompt = tokenize(m.get(), "Once upon a time");
  chimera_generate_params p;
  chimera_generate_params_init(&p);
  p.max_tokens = 24;
  p.sampling.seed = 77;
  p.sampling.temperature = 1.0f;
  p.sampling.presence_penalty = 0.5f;
  ContextPtr c1 = context(m.get());
  Generated g = generate(c1.get(), prompt, p);
  ASSERT_EQ(g.tokens.size(), 24u);

  ContextPtr c2 = context(m.get());
  chimera_sampler* raw = nullptr;
  ASSERT_EQ(chimera_sampler_create(m.get(), &p.sampling, &raw), CHIMERA_OK);
  SamplerPtr s(raw);
  ASSERT_EQ(chimera_sampler_accept(s.get(), prompt.data(), prompt.size()), CHIMERA_OK);
  ASSERT_EQ(chimera_decode(c2.get(), prompt.data(), prompt.size(), CHIMERA_LOGITS_NONE, nullptr, 0), CHIMERA_OK);
  std::vector<int32_t> mine;
  for (int i = 0; i < 24; ++i) {
    int32_t t = -1;
    ASSERT_EQ(chimera_sampler_sample(s.get(), c2.get(), &t), CHIMERA_OK) << chimera_sampler_last_error(s.get());
    mine.push_back(t);
    ASSERT_EQ(chimera_decode(c2.get(), &t, 1, CHIMERA_LOGITS_NONE, nullptr, 0), CHIMERA_OK);
  }
  EXPECT_EQ(mine, g.tokens);
}

TEST(CApiSampler, GrammarConstrainsTheOutput) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  ContextPtr c = context(m.get());
  chimera_generate_params p = greedy(32);
  p.sampling.grammar = "root ::= (\"yes\" | \"no\") \".\"";
  Generated g = generate(c.get(), tokenize(m.get(), "Once upon a time"), p);
  ASSERT_EQ(g.status, CHIMERA_OK) << chimera_context_last_error(c.get());
  EXPECT_TRUE(g.text == "yes." || g.text == "no.") << g.text;
  EXPECT_EQ(g.result.finish_reason, CHIMERA_FINISH_STOP);
}

TEST(CApiContexts, ThreadsOnOneModelGetTheSingleThreadedResult) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(granite_path(shared));
  const auto prompt = tokenize(m.get(), "Once upon a time");
  ContextPtr ref_ctx = context(m.get());
  const Generated ref = generate(ref_ctx.get(), prompt, greedy(24));
  ASSERT_EQ(ref.tokens.size(), 24u);
  constexpr int kThreads = 3;
  std::vector<Generated> got(kThreads);
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i)
    ts.emplace_back([&, i] {
      ContextPtr c = context(m.get());
      got[i] = generate(c.get(), prompt, greedy(24));
    });
  for (auto& t : ts) t.join();
  for (const Generated& g : got) {
    EXPECT_EQ(g.status, CHIMERA_OK);
    EXPECT_EQ(g.tokens, ref.tokens);
  }
}

TEST(CApiContexts, DecodeRowsEqualGenerateAndEachOther) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(granite_path(shared));
  const int32_t nv = n_vocab(m.get());
  const auto prompt = tokenize(m.get(), "Once upon a time, a small robot");
  ContextPtr a = context(m.get()), b = context(m.get());
  std::vector<float> all(prompt.size() * nv), last(nv);
  ASSERT_EQ(chimera_decode(a.get(), prompt.data(), prompt.size(), CHIMERA_LOGITS_ALL, all.data(), all.size()),
            CHIMERA_OK);
  ASSERT_EQ(chimera_decode(b.get(), prompt.data(), prompt.size(), CHIMERA_LOGITS_LAST, last.data(), last.size()),
            CHIMERA_OK);
  EXPECT_EQ(0, std::memcmp(all.data() + (prompt.size() - 1) * nv, last.data(), nv * sizeof(float)));
  // Greedy generation continues with the argmax of that row.
  int32_t best = 0;
  for (int32_t i = 1; i < nv; ++i)
    if (last[i] > last[best]) best = i;
  Generated g = generate(a.get(), {}, greedy(1));
  ASSERT_EQ(g.tokens.size(), 1u);
  EXPECT_EQ(g.tokens[0], best);
}

}  // namespace
}  // namespace chimera::capi_test
