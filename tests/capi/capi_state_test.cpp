// C API: saved states — a restored context continues exactly as the
// uninterrupted one; every damaged or foreign blob is refused, never a crash.
#include <cstring>
#include <random>

#include "capi_fixture.h"

namespace chimera::capi_test {
namespace {

// FNV-1a 64, the blob's trailing checksum (so the tests can forge blobs that
// pass it and reach the structural checks).
uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
void reseal(std::vector<uint8_t>& b) {
  const uint64_t h = fnv1a(b.data(), b.size() - 8);
  std::memcpy(b.data() + b.size() - 8, &h, 8);
}

class CApiState : public ::testing::TestWithParam<const char*> {};

TEST_P(CApiState, RestoreContinuesLikeTheUninterruptedGeneration) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string path = std::string(GetParam()) == "stories" ? stories_path(shared) : granite_path(shared);
  ModelPtr m = load(path);
  const auto prompt = tokenize(m.get(), "Once upon a time");

  ContextPtr whole = context(m.get());
  const Generated all = generate(whole.get(), prompt, greedy(30));
  ASSERT_EQ(all.tokens.size(), 30u);

  ContextPtr first = context(m.get());
  const Generated head = generate(first.get(), prompt, greedy(12));
  ASSERT_EQ(head.tokens.size(), 12u);
  const std::vector<uint8_t> blob = save(first.get());

  // Into a fresh context (and into a used one: loading replaces its sequence).
  for (bool used : {false, true}) {
    ContextPtr second = context(m.get());
    if (used) generate(second.get(), tokenize(m.get(), "The dog"), greedy(5));
    ASSERT_EQ(chimera_state_load(second.get(), blob.data(), blob.size()), CHIMERA_OK)
        << chimera_context_last_error(second.get());
    int64_t n_past = 0;
    ASSERT_EQ(chimera_context_size(second.get(), &n_past, nullptr), CHIMERA_OK);
    EXPECT_EQ(n_past, (int64_t)(prompt.size() + 12));
    const Generated tail = generate(second.get(), {}, greedy(18));
    std::vector<int32_t> joined = head.tokens;
    joined.insert(joined.end(), tail.tokens.begin(), tail.tokens.end());
    EXPECT_EQ(joined, all.tokens) << (used ? "used context" : "fresh context");
  }
  // The saved context itself goes on the same way, and saving twice gives the same bytes.
  EXPECT_EQ(save(first.get()), blob);

  // Sampling: the same seed after a restore gives the same continuation as the original context.
  chimera_generate_params p;
  chimera_generate_params_init(&p);
  p.max_tokens = 16;
  p.sampling.seed = 99;
  ContextPtr restored = context(m.get());
  ASSERT_EQ(chimera_state_load(restored.get(), blob.data(), blob.size()), CHIMERA_OK);
  const Generated a = generate(first.get(), {}, p);
  const Generated b = generate(restored.get(), {}, p);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens.size(), 16u);
}

TEST_P(CApiState, LogitsAfterRestoreEqualTheOriginal) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string path = std::string(GetParam()) == "stories" ? stories_path(shared) : granite_path(shared);
  ModelPtr m = load(path);
  const int32_t nv = n_vocab(m.get());
  const auto prompt = tokenize(m.get(), "Once upon a time");
  ContextPtr a = context(m.get());
  ASSERT_EQ(chimera_decode(a.get(), prompt.data(), prompt.size(), CHIMERA_LOGITS_NONE, nullptr, 0), CHIMERA_OK);
  const std::vector<uint8_t> blob = save(a.get());
  ContextPtr b = context(m.get());
  ASSERT_EQ(chimera_state_load(b.get(), blob.data(), blob.size()), CHIMERA_OK);
  const int32_t next[] = {prompt[1], prompt[2]};
  std::vector<float> la(2 * nv), lb(2 * nv);
  ASSERT_EQ(chimera_decode(a.get(), next, 2, CHIMERA_LOGITS_ALL, la.data(), la.size()), CHIMERA_OK);
  ASSERT_EQ(chimera_decode(b.get(), next, 2, CHIMERA_LOGITS_ALL, lb.data(), lb.size()), CHIMERA_OK);
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Models, CApiState, ::testing::Values("stories", "granitehybrid"));

TEST(CApiStateErrors, DamagedForeignAndMisfittingBlobsAreRefused) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(stories_path(shared));
  ModelPtr g = load(granite_path(shared));
  ContextPtr c = context(m.get());
  generate(c.get(), tokenize(m.get(), "Once upon a time"), greedy(6));
  const std::vector<uint8_t> blob = save(c.get());
  int64_t n_past = 0;
  ASSERT_EQ(chimera_context_size(c.get(), &n_past, nullptr), CHIMERA_OK);

  ContextPtr target = context(m.get());
  auto refused = [&](const std::vector<uint8_t>& b, const std::string& why) {
    const chimera_status s = chimera_state_load(target.get(), b.data(), b.size());
    EXPECT_NE(s, CHIMERA_OK) << why;
    EXPECT_STRNE(chimera_context_last_error(target.get()), "") << why;
    int64_t np = -1;
    EXPECT_EQ(chimera_context_size(target.get(), &np, nullptr), CHIMERA_OK);
    EXPECT_EQ(np, 0) << why << ": a refused blob left the context changed";
  };
  // Every truncation.
  for (size_t n = 0; n < blob.size(); n += (n < 64 ? 1 : 97))
    refused(std::vector<uint8_t>(blob.begin(), blob.begin() + n), "truncated to " + std::to_string(n));
  refused(std::vector<uint8_t>(blob.begin(), blob.end() - 1), "last byte cut");
  // Truncations that carry a valid checksum reach the structural checks.
  for (size_t n = 8; n + 8 < blob.size(); n += (n < 128 ? 3 : 257)) {
    std::vector<uint8_t> b(blob.begin(), blob.begin() + n);
    b.resize(n + 8);
    reseal(b);
    refused(b, "resealed truncation to " + std::to_string(n));
  }
  // Bit flips anywhere (the checksum catches them).
  for (size_t i = 0; i < blob.size(); i += 61) {
    std::vector<uint8_t> b = blob;
    b[i] ^= 0x10;
    refused(b, "bit flip at " + std::to_string(i));
  }
  // Another format version, resealed.
  {
    std::vector<uint8_t> b = blob;
    b[8] = 2;
    reseal(b);
    refused(b, "version 2");
    EXPECT_NE(std::string(chimera_context_last_error(target.get())).find("version"), std::string::npos);
  }
  // A sealed blob whose token count is absurd: offset of n_past = 8 + 4 + 4 + 8 + len("llama") + 3 * 8.
  {
    std::vector<uint8_t> b = blob;
    const size_t at = 8 + 4 + 4 + 8 + 5 + 3 * 8;
    int64_t was = 0;
    std::memcpy(&was, b.data() + at, 8);
    ASSERT_EQ(was, n_past - 1);  // tokens fed; the last generated one is pending
    for (int64_t bad : {(int64_t)-1, (int64_t)1 << 40, was + 1, was - 1}) {
      std::memcpy(b.data() + at, &bad, 8);
      reseal(b);
      refused(b, "n_past " + std::to_string(bad));
    }
  }
  // Extra bytes.
  {
    std::vector<uint8_t> b = blob;
    b.insert(b.end() - 8, {1, 2, 3});
    reseal(b);
    refused(b, "extra bytes");
  }
  // A blob of another model.
  ContextPtr gc = context(g.get());
  generate(gc.get(), tokenize(g.get(), "Once upon a time"), greedy(3));
  refused(save(gc.get()), "granitehybrid blob into a llama context");
  // A context too small for the saved tokens.
  ContextPtr small = context(m.get(), 4);
  EXPECT_EQ(chimera_state_load(small.get(), blob.data(), blob.size()), CHIMERA_ERR_INVALID_ARGUMENT);
  // Arguments.
  EXPECT_EQ(chimera_state_load(nullptr, blob.data(), blob.size()), CHIMERA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(chimera_state_load(target.get(), nullptr, 10), CHIMERA_ERR_INVALID_ARGUMENT);
  size_t n = 0;
  EXPECT_EQ(chimera_state_save(nullptr, nullptr, 0, &n), CHIMERA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(chimera_state_save(c.get(), nullptr, 0, nullptr), CHIMERA_ERR_INVALID_ARGUMENT);
  std::vector<uint8_t> small_buf(blob.size() - 1);
  EXPECT_EQ(chimera_state_save(c.get(), small_buf.data(), small_buf.size(), &n), CHIMERA_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, blob.size());
  // And the original still loads.
  EXPECT_EQ(chimera_state_load(target.get(), blob.data(), blob.size()), CHIMERA_OK);
}

TEST(CApiStateErrors, RandomlyMutatedSealedBlobsNeverCrash) {
  CHIMERA_REQUIRE_SHARED(shared);
  ModelPtr m = load(granite_path(shared));
  ContextPtr c = context(m.get(), 64);
  generate(c.get(), tokenize(m.get(), "Once upon a time"), greedy(4));
  const std::vector<uint8_t> blob = save(c.get());
  std::mt19937 rng(12345);
  int loaded = 0, refused = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<uint8_t> b = blob;
    const int flips = 1 + (int)(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Half of the mutations hit the header and token lists, where the structure is.
      const size_t span = (iter % 2 == 0) ? std::min<size_t>(160, b.size() - 8) : b.size() - 8;
      b[rng() % span] = (uint8_t)rng();
    }
    reseal(b);
    ContextPtr t = context(m.get(), 64);
    if (chimera_state_load(t.get(), b.data(), b.size()) == CHIMERA_OK) {
      ++loaded;  // only the floats changed: the context must still run
      Generated g = generate(t.get(), {}, greedy(2));
      EXPECT_EQ(g.status, CHIMERA_OK) << chimera_context_last_error(t.get());
    } else {
      ++refused;
      EXPECT_STRNE(chimera_context_last_error(t.get()), "");
    }
  }
  EXPECT_GT(refused, 50);
  EXPECT_GT(loaded, 10);
}

}  // namespace
}  // namespace chimera::capi_test
