// Logprob values (stories260K): the logprobs the server returns — completions
// (token_logprobs, top_logprobs) and chat (content[].logprob, top_logprobs) —
// equal the log-softmax of the `chimera logits` rows for the same token ids
// (the prompt from /tokenize, the greedy continuation from `chimera run --ids`),
// and the top_logprobs are the row's best values in order.
//
// Tolerance: the server prefills the prompt in one batch and decodes one token
// per step, `chimera logits --mode batch` computes every row in one batch: the
// same float32 kernels with a different blocking, so rows differ by a few
// float32 roundings of the logit scale (measured ≈1e-6 on stories260K, whose
// logits reach ≈20); the server's log-sum-exp is float too (an ulp of 20 is
// 2e-6). |Δ logprob| <= 1e-5 × max|logit| + 1e-5 (≈2e-4) is ~100x the measured
// error yet far below what a wrong row, token or normalisation gives (>1e-2).
// The test prints the worst difference it saw.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "models/golden_case.h"
#include "server_fixture.h"

namespace chimera::test {
namespace {

constexpr int kGen = 12;

std::vector<int32_t> tokenize(httplib::Client& c, const std::string& text) {
  auto r = post_json(c, "/tokenize", json{{"content", text}}.dump());
  EXPECT_TRUE(r && r->status == 200);
  if (!r || r->status != 200) return {};
  return json::parse(r->body)["tokens"].get<std::vector<int32_t>>();
}

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

// Greedy continuation of `prompt` (ids, fed as given) by `chimera run --ids`.
std::vector<int32_t> greedy_ids(const std::string& model, const std::vector<int32_t>& prompt, int n) {
  const std::string out = command_output(chimera_binary() + " run -m " + shell_quote(model) + " -t " + join(prompt) +
                                         " -n " + std::to_string(n) + " --temp 0 --ignore-eos -q --ids --threads 1");
  std::vector<int32_t> ids;
  std::istringstream in(out);
  int32_t t;
  while (in >> t) ids.push_back(t);
  return ids;
}

// Log-softmax rows of `chimera logits` for `ids`; rows[i] = after ids[0..i].
struct LogSoftmax {
  int64_t nv = 0;
  std::vector<double> rows;
  float scale = 0;  // max |logit|
  double at(int64_t row, int32_t id) const { return rows[(size_t)(row * nv + id)]; }
  std::vector<double> top(int64_t row, size_t k) const {
    std::vector<double> r(rows.begin() + row * nv, rows.begin() + (row + 1) * nv);
    std::partial_sort(r.begin(), r.begin() + (std::ptrdiff_t)k, r.end(), std::greater<>());
    r.resize(k);
    return r;
  }
};

LogSoftmax log_softmax_rows(const std::string& model, const std::vector<int32_t>& ids) {
  const std::string out = temp_path("lp-logits.f32");
  const auto r = run_chimera("logits -m " + shell_quote(model) + " -t " + join(ids) + " -o " + out +
                             " --mode batch --threads 1");
  EXPECT_EQ(r.rc, 0) << r.output;
  const std::vector<float> l = read_f32(out);
  std::filesystem::remove(out);
  LogSoftmax s;
  const int64_t nv = (int64_t)(l.size() / ids.size());
  s.nv = nv;
  EXPECT_EQ(l.size(), ids.size() * (size_t)nv);
  if (nv == 0 || l.size() != ids.size() * (size_t)nv) return s;
  s.rows.resize(l.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* row = l.data() + i * nv;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < nv; ++j) mx = std::max(mx, (double)row[j]);
    for (int64_t j = 0; j < nv; ++j) sum += std::exp((double)row[j] - mx);
    const double lse = mx + std::log(sum);
    for (int64_t j = 0; j < nv; ++j) {
      s.rows[i * nv + j] = (double)row[j] - lse;
      s.scale = std::max(s.scale, std::fabs(row[j]));
    }
  }
  return s;
}

struct Served {
  std::vector<int32_t> prompt, gen;
  std::vector<double> lp;                  // logprob of each generated token
  std::vector<std::vector<double>> tops;   // top_logprobs values, in the server's order
  std::vector<std::string> pieces;         // the token strings
};

void compare(const std::string& model, const Served& s, size_t k) {
  ASSERT_EQ(s.gen.size(), (size_t)kGen);
  ASSERT_EQ(s.lp.size(), (size_t)kGen);
  std::vector<int32_t> seq = s.prompt;
  seq.insert(seq.end(), s.gen.begin(), s.gen.end() - 1);
  const LogSoftmax ref = log_softmax_rows(model, seq);
  ASSERT_FALSE(ref.rows.empty());
  const double tol = 1e-5 * ref.scale + 1e-5;
  double worst = 0;
  for (int j = 0; j < kGen; ++j) {
    const int64_t row = (int64_t)s.prompt.size() - 1 + j;
    const double want = ref.at(row, s.gen[(size_t)j]);
    EXPECT_NEAR(s.lp[(size_t)j], want, tol) << "token " << j;
    worst = std::max(worst, std::fabs(s.lp[(size_t)j] - want));
    // Greedy: the chosen token is the row's best.
    EXPECT_NEAR(want, ref.top(row, 1)[0], 1e-12) << "token " << j << " is not the argmax";
    ASSERT_EQ(s.tops[(size_t)j].size(), k) << "token " << j;
    const std::vector<double> best = ref.top(row, k);
    for (size_t i = 0; i < k; ++i) {
      EXPECT_NEAR(s.tops[(size_t)j][i], best[i], tol) << "token " << j << " top " << i;
      worst = std::max(worst, std::fabs(s.tops[(size_t)j][i] - best[i]));
    }
  }
  std::printf("[ logprobs ] worst |server - log_softmax(chimera logits)| = %.3g (tolerance %.3g)\n", worst, tol);
}

TEST(LogprobValues, CompletionsMatchLogSoftmaxOfChimeraLogits) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = model_path(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model, {}, &err)) << err;
  auto c = srv.client();
  const std::string prompt = "Once upon a time";
  Served s;
  s.prompt = tokenize(*c, prompt);
  ASSERT_FALSE(s.prompt.empty());
  const json body = {{"prompt", prompt}, {"max_tokens", kGen}, {"temperature", 0}, {"ignore_eos", true},
                     {"logprobs", 5}};
  auto r = post_json(*c, "/v1/completions", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json lp = json::parse(r->body)["choices"][0]["logprobs"];
  for (const auto& v : lp["token_logprobs"]) s.lp.push_back(v.get<double>());
  for (const auto& t : lp["top_logprobs"]) {
    std::vector<double> vals;
    for (const auto& [tok, v] : t.items()) vals.push_back(v.get<double>());
    std::sort(vals.begin(), vals.end(), std::greater<>());  // a JSON object has no order
    s.tops.push_back(vals);
  }
  s.gen = greedy_ids(model, s.prompt, kGen);
  compare(model, s, 5);
}

TEST(LogprobValues, ChatMatchesLogSoftmaxOfChimeraLogits) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = model_path(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model, {}, &err)) << err;
  auto c = srv.client();
  const json body = {{"messages", json::array({{{"role", "user"}, {"content", "Tell me a story"}}})},
                     {"max_tokens", kGen},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"logprobs", true},
                     {"top_logprobs", 3}};
  auto r = post_json(*c, "/v1/chat/completions", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json resp = json::parse(r->body);
  Served s;
  // stories260K has no chat template: the fallback renders "<role>: <content>\n" + "assistant:"
  // (tokenizer/chat_template.h); BOS comes from the vocabulary.
  s.prompt = tokenize(*c, "user: Tell me a story\nassistant:");
  ASSERT_EQ((int)s.prompt.size(), resp["usage"]["prompt_tokens"].get<int>()) << "prompt rendered differently";
  bool ordered = true;
  for (const auto& e : resp["choices"][0]["logprobs"]["content"]) {
    s.lp.push_back(e["logprob"].get<double>());
    std::vector<double> vals;
    for (const auto& t : e["top_logprobs"]) vals.push_back(t["logprob"].get<double>());
    ordered = ordered && std::is_sorted(vals.begin(), vals.end(), std::greater<>());
    s.tops.push_back(vals);
  }
  EXPECT_TRUE(ordered) << "chat top_logprobs are not best first";
  s.gen = greedy_ids(model, s.prompt, kGen);
  compare(model, s, 3);
}

}  // namespace
}  // namespace chimera::test
