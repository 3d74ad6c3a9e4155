// C API: every error path returns a status with a message (thread-wide and on
// the handle), never a crash, and leaves the handle usable.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "capi_fixture.h"

namespace chimera::capi_test {
namespace {

void expect_error(chimera_status got, chimera_status want, const std::string& what) {
  EXPECT_EQ(got, want) << what << ": " << chimera_last_error();
  EXPECT_STRNE(chimera_last_error(), "") << what;
}

TEST(CApiErrors, LoadFailuresNameTheProblem) {
  chimera_model* m = reinterpret_cast<chimera_model*>(0x1);
  expect_error(chimera_model_load("/nonexistent/model.gguf", nullptr, &m), CHIMERA_ERR_IO, "missing file");
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(chimera_last_error()).find("/nonexistent/model.gguf"), std::string::npos);
  expect_error(chimera_model_load(nullptr, nullptr, &m), CHIMERA_ERR_INVALID_ARGUMENT, "NULL path");
  expect_error(chimera_model_load("x.gguf", nullptr, nullptr), CHIMERA_ERR_INVALID_ARGUMENT, "NULL out");
  expect_error(chimera_model_load("/tmp", nullptr, &m), CHIMERA_ERR_INVALID_ARGUMENT, "directory");

  const std::string junk = test::temp_path("capi-junk.gguf");
  {
    std::ofstream f(junk, std::ios::binary);
    f << "this is not a GGUF file at all";
  }
  expect_error(chimera_model_load(junk.c_str(), nullptr, &m), CHIMERA_ERR_INVALID_ARGUMENT, "not a GGUF");
  EXPECT_NE(std::string(chimera_last_error()).find("GGUF"), std::string::npos) << chimera_last_error();
  std::filesystem::remove(junk);

  chimera_model_params p;
  chimera_model_params_init(&p);
  p.struct_size = sizeof p - 8;
  expect_error(chimera_model_load("x.gguf", &p, &m), CHIMERA_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_NE(std::string(chimera_last_error()).find("struct_size"), std::string::npos);
  chimera_model_params_init(&p);
  p.n_threads = -1;
  expect_error(chimera_model_load("x.gguf", &p, &m), CHIMERA_ERR_INVALID_ARGUMENT, "n_threads");
  chimera_model_params_init(&p);
  p.n_ctx = -5;
  expect_error(chimera_model_load("x.gguf", &p, &m), CHIMERA_ERR_INVALID_ARGUMENT, "n_ctx");
  chimera_model_params_init(&p);
  p.isa = "sse9";
  expect_error(chimera_model_load("x.gguf", &p, &m), CHIMERA_ERR_INVALID_ARGUMENT, "isa");
}

TEST(CApiErrors, TruncatedGgufIsAnError) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::vector<uint8_t> bytes = test::read_file_bytes(stories_path(shared));
  ASSERT_GT(bytes.size(), 4096u);
  const std::string cut = test::temp_path("capi-cut.gguf");
  for (size_t n : {(size_t)4, (size_t)24, (size_t)1000, bytes.size() / 2, bytes.size() - 1}) {
    {
      std::ofstream f(cut, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(bytes.data()), (std::streamsize)n);
    }
    chimera_model* m = nullptr;
    const chimera_status s = chimera_model_load(cut.c_str(), nullptr, &m);
    EXPECT_NE(s, CHIMERA_OK) << "cut at " << n;
    EXPECT_EQ(m, nullptr);
    EXPECT_STRNE(chimera_last_error(), "");
  }
  std::filesystem::remove(cut);
}

TEST(CApiErrors, NullHandlesAreRefused) {
  size_t n = 0;
  int32_t tok = 0;
  int flag = 0;
  char buf[8];
  chimera_context* c = nullptr;
  chimera_sampler* s = nullptr;
  expect_error(chimera_tokenize(nullptr, "a", 1, 1, 1, nullptr, 0, &n), CHIMERA_ERR_INVALID_ARGUMENT, "tokenize");
  expect_error(chimera_detokenize(nullptr, &tok, 1, 0, buf, sizeof buf, &n), CHIMERA_ERR_INVALID_ARGUMENT, "detokenize");
  expect_error(chimera_token_is_eog(nullptr, 0, &flag), CHIMERA_ERR_INVALID_ARGUMENT, "is_eog");
  expect_error(chimera_chat_render(nullptr, nullptr, 0, 1, buf, sizeof buf, &n), CHIMERA_ERR_INVALID_ARGUMENT, "chat");
  expect_error(chimera_chat_tokenize(nullptr, nullptr, 0, 1, &tok, 1, &n), CHIMERA_ERR_INVALID_ARGUMENT, "chat ids");
  chimera_model_info info;
  info.struct_size = sizeof info;
  expect_error(chimera_model_info_get(nullptr, &info), CHIMERA_ERR_INVALID_ARGUMENT, "info");
  expect_error(chimera_context_create(nullptr, nullptr, &c), CHIMERA_ERR_INVALID_ARGUMENT, "context_create");
  expect_error(chimera_context_reset(nullptr), CHIMERA_ERR_INVALID_ARGUMENT, "reset");
  expect_error(chimera_context_size(nullptr, nullptr, nullptr), CHIMERA_ERR_INVALID_ARGUMENT, "size");
  expect_error(chimera_decode(nullptr, &tok, 1, CHIMERA_LOGITS_NONE, nullptr, 0), CHIMERA_ERR_INVALID_ARGUMENT, "decode");
  expect_error(chimera_generate(nullptr, &tok, 1, nullptr, nullptr), CHIMERA_ERR_INVALID_ARGUMENT, "generate");
  expect_error(chimera_context_cancel(nullptr), CHIMERA_ERR_INVALID_ARGUMENT, "cancel");
  expect_error(chimera_sampler_create(nullptr, nullptr, &s), CHIMERA_ERR_INVALID_ARGUMENT, "sampler_create");
  expect_error(chimera_sampler_sample(nullptr, nullptr, &tok), CHIMERA_ERR_INVALID_ARGUMENT, "sample");
  expect_error(chimera_sampler_accept(nullptr, &tok, 1), CHIMERA_ERR_INVALID_ARGUMENT, "accept");
  expect_error(chimera_sampler_reset(nullptr), CHIMERA_ERR_INVALID_ARGUMENT, "sampler_reset");
  // Frees accept NULL.
  EXPECT_EQ(chimera_model_free(nullptr), CHIMERA_OK);
  chimera_context_free(nullptr);
  chimera_sampler_free(nullptr);
  EXPECT_STRNE(chimera_model_last_error(nullptr), "");
}

TEST(CApiErrors, BadTokensOverflowAndBuffersOnAModel) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  const int32_t nv = n_vocab(m.get());
  ContextPtr c = context(m.get(), 8);
  int64_t n_past = -1, n_ctx = -1;

  // Bad token ids: refused, the sequence unchanged, the context still usable.
  for (int32_t bad : {-1, nv, INT32_MAX}) {
    const int32_t ids[] = {1, bad};
    expect_error(chimera_decode(c.get(), ids, 2, CHIMERA_LOGITS_NONE, nullptr, 0), CHIMERA_ERR_INVALID_ARGUMENT,
                 "decode id " + std::to_string(bad));
    EXPECT_STRNE(chimera_context_last_error(c.get()), "");
    ASSERT_EQ(chimera_context_size(c.get(), &n_past, &n_ctx), CHIMERA_OK);
    EXPECT_EQ(n_past, 0);
    EXPECT_EQ(n_ctx, 8);
    Generated g = generate(c.get(), {1, bad}, greedy(2));
    EXPECT_EQ(g.status, CHIMERA_ERR_INVALID_ARGUMENT) << "generate id " << bad;
    char buf[64];
    size_t n = 0;
    expect_error(chimera_detokenize(m.get(), ids, 2, 0, buf, sizeof buf, &n), CHIMERA_ERR_INVALID_ARGUMENT,
                 "detokenize");
    EXPECT_STRNE(chimera_model_last_error(m.get()), "");
    int flag = 0;
    expect_error(chimera_token_is_eog(m.get(), bad, &flag), CHIMERA_ERR_INVALID_ARGUMENT, "is_eog");
  }
  // Empty input.
  expect_error(chimera_decode(c.get(), nullptr, 0, CHIMERA_LOGITS_NONE, nullptr, 0), CHIMERA_ERR_INVALID_ARGUMENT,
               "decode nothing");
  Generated empty = generate(c.get(), {}, greedy(2));
  EXPECT_EQ(empty.status, CHIMERA_ERR_INVALID_ARGUMENT) << "generate from an empty context";
  const int32_t one = 1;
  expect_error(chimera_decode(c.get(), &one, 1, 7, nullptr, 0), CHIMERA_ERR_INVALID_ARGUMENT,
               "logits mode");

  // Context overflow: 9 tokens into 8.
  const std::vector<int32_t> nine(9, 5);
  expect_error(chimera_decode(c.get(), nine.data(), nine.size(), CHIMERA_LOGITS_NONE, nullptr, 0),
               CHIMERA_ERR_OUT_OF_RANGE, "decode overflow");
  ASSERT_EQ(chimera_context_size(c.get(), &n_past, nullptr), CHIMERA_OK);
  EXPECT_EQ(n_past, 0);
  EXPECT_EQ(generate(c.get(), nine, greedy(2)).status, CHIMERA_ERR_OUT_OF_RANGE);
  // Generation that reaches the end of the context stops there.
  Generated full = generate(c.get(), std::vector<int32_t>(nine.begin(), nine.begin() + 5), greedy(20));
  ASSERT_EQ(full.status, CHIMERA_OK);
  EXPECT_EQ(full.result.finish_reason, CHIMERA_FINISH_CONTEXT_FULL);
  EXPECT_EQ(full.result.n_generated, 4);  // the 4th fills position 8 and cannot be fed
  EXPECT_EQ(generate(c.get(), {}, greedy(2)).status, CHIMERA_ERR_OUT_OF_RANGE);

  // Buffers too small report the size needed.
  size_t n = 0;
  int32_t ids[2];
  EXPECT_EQ(chimera_tokenize(m.get(), "Once upon a time", 16, 1, 1, ids, 2, &n), CHIMERA_ERR_BUFFER_TOO_SMALL);
  EXPECT_GT(n, 2u);
  EXPECT_EQ(chimera_tokenize(m.get(), "Once", 4, 1, 1, nullptr, 5, &n), CHIMERA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(chimera_tokenize(m.get(), "Once", 4, 1, 1, ids, 2, nullptr), CHIMERA_ERR_INVALID_ARGUMENT);
  char small[3];
  const int32_t hello[] = {1, 400, 401, 402};
  EXPECT_EQ(chimera_detokenize(m.get(), hello, 4, 0, small, sizeof small, &n), CHIMERA_ERR_BUFFER_TOO_SMALL);
  ASSERT_EQ(chimera_context_reset(c.get()), CHIMERA_OK);
  std::vector<float> row(nv - 1);
  EXPECT_EQ(chimera_decode(c.get(), &one, 1, CHIMERA_LOGITS_LAST, row.data(), row.size()), CHIMERA_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(chimera_decode(c.get(), &one, 1, CHIMERA_LOGITS_LAST, nullptr, 0), CHIMERA_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(chimera_context_size(c.get(), &n_past, nullptr), CHIMERA_OK);
  EXPECT_EQ(n_past, 0) << "a refused decode fed nothing";

  // Output structs of another size.
  chimera_model_info info;
  info.struct_size = 3;
  EXPECT_EQ(chimera_model_info_get(m.get(), &info), CHIMERA_ERR_INVALID_ARGUMENT);
  chimera_generate_result r;
  r.struct_size = 1;
  chimera_generate_params gp = greedy(1);
  EXPECT_EQ(chimera_generate(c.get(), &one, 1, &gp, &r), CHIMERA_ERR_INVALID_ARGUMENT);
}

TEST(CApiErrors, BadSamplingAndGenerationParameters) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  ContextPtr c = context(m.get());
  const std::vector<int32_t> prompt = tokenize(m.get(), "Once");
  auto refused = [&](chimera_generate_params p, const std::string& word) {
    Generated g = generate(c.get(), prompt, p);
    EXPECT_EQ(g.status, CHIMERA_ERR_INVALID_ARGUMENT) << word;
    EXPECT_NE(std::string(chimera_context_last_error(c.get())).find(word), std::string::npos)
        << word << ": " << chimera_context_last_error(c.get());
    chimera_sampler* s = nullptr;
    if (word != "stop") {
      EXPECT_NE(chimera_sampler_create(m.get(), &p.sampling, &s), CHIMERA_OK) << word;
      EXPECT_EQ(s, nullptr);
    }
  };
  chimera_generate_params p = greedy(4);
  p.sampling.temperature = -1;
  refused(p, "temperature");
  p = greedy(4);
  p.sampling.top_p = NAN;
  refused(p, "top_p");
  p = greedy(4);
  p.sampling.top_k = -3;
  refused(p, "top_k");
  p = greedy(4);
  p.sampling.min_p = 2;
  refused(p, "min_p");
  p = greedy(4);
  p.sampling.repeat_penalty = 0;
  refused(p, "repeat_penalty");
  p = greedy(4);
  p.sampling.penalty_last_n = -2;
  refused(p, "penalty_last_n");
  p = greedy(4);
  p.sampling.grammar = "root ::= ";
  p.sampling.json_schema = "{}";
  refused(p, "at most one");
  p = greedy(4);
  p.sampling.grammar = "root ::= undefined_rule";
  refused(p, "grammar");
  p = greedy(4);
  p.sampling.struct_size = 0;
  refused(p, "struct_size");
  p = greedy(4);
  const char* stops[] = {""};
  p.stop = stops;
  p.n_stop = 1;
  refused(p, "stop");
  // Nothing was fed by any refused call.
  int64_t n_past = -1;
  ASSERT_EQ(chimera_context_size(c.get(), &n_past, nullptr), CHIMERA_OK);
  EXPECT_EQ(n_past, 0);
}

TEST(CApiErrors, LifetimesAndModelMismatch) {
  CHIMERA_REQUIRE_SHARED(shared);
  chimera_model* m = nullptr;
  ASSERT_EQ(chimera_model_load(stories_path(shared).c_str(), nullptr, &m), CHIMERA_OK);
  ModelPtr other = load(granite_path(shared));
  chimera_context* c = nullptr;
  ASSERT_EQ(chimera_context_create(m, nullptr, &c), CHIMERA_OK);
  chimera_sampler* s = nullptr;
  ASSERT_EQ(chimera_sampler_create(other.get(), nullptr, &s), CHIMERA_OK);
  int32_t t = 0;
  const auto prompt = tokenize(m, "Once");
  ASSERT_EQ(chimera_decode(c, prompt.data(), prompt.size(), CHIMERA_LOGITS_NONE, nullptr, 0), CHIMERA_OK);
  EXPECT_EQ(chimera_sampler_sample(s, c, &t), CHIMERA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(chimera_sampler_last_error(s)).find("another model"), std::string::npos);
  chimera_sampler_free(s);
  // A sampler on an empty context has nothing to draw from.
  ContextPtr fresh = context(other.get());
  ASSERT_EQ(chimera_sampler_create(other.get(), nullptr, &s), CHIMERA_OK);
  EXPECT_EQ(chimera_sampler_sample(s, fresh.get(), &t), CHIMERA_ERR_INVALID_ARGUMENT);
  chimera_sampler_free(s);
  // The model outlives its contexts: freeing it first is refused (and nothing is freed).
  EXPECT_EQ(chimera_model_free(m), CHIMERA_ERR_BUSY);
  EXPECT_NE(std::string(chimera_model_last_error(m)).find("still alive"), std::string::npos);
  EXPECT_EQ(chimera_decode(c, prompt.data(), 1, CHIMERA_LOGITS_NONE, nullptr, 0), CHIMERA_OK);
  chimera_context_free(c);
  EXPECT_EQ(chimera_model_free(m), CHIMERA_OK);
}

TEST(CApiErrors, DiffusionContextsOnlyGenerate) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(shared + "/golden/models/tiny-llada.gguf");
  ContextPtr c = context(m.get());
  const int32_t one = 1;
  EXPECT_EQ(chimera_decode(c.get(), &one, 1, CHIMERA_LOGITS_NONE, nullptr, 0), CHIMERA_ERR_UNSUPPORTED);
  size_t n = 0;
  EXPECT_EQ(chimera_state_save(c.get(), nullptr, 0, &n), CHIMERA_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(chimera_context_last_error(c.get())).find("diffusion"), std::string::npos);
  Generated g = generate(c.get(), tokenize(m.get(), "Once upon a time"), greedy(4));
  EXPECT_EQ(g.status, CHIMERA_OK) << chimera_context_last_error(c.get());
  EXPECT_EQ(g.result.n_generated, 4);
}

}  // namespace
}  // namespace chimera::capi_test
