// `chimera serve` on a masked diffusion LM (tiny-llada): the diffusion flags
// are server defaults, a request's JSON overrides them ("steps",
// "block_length", "remasking", "threshold", caches), greedy completions equal
// `chimera run` with the same options, and bad combinations are 400s. The
// request parsing (openai_json) is also checked without a server.
#include <gtest/gtest.h>

#include "server/openai_json.h"
#include "server_fixture.h"

namespace chimera::test {
namespace {

std::string llada_model(const std::string& shared) { return shared + "/golden/models/tiny-llada.gguf"; }

std::string golden_prompt_ids(const std::string& shared, json* ids) {
  std::ifstream f(shared + "/golden/tiny-llada.json");
  *ids = json::parse(f)["prompt_tokens"];
  std::string s;
  for (size_t i = 0; i < ids->size(); ++i) s += (i ? "," : "") + std::to_string((*ids)[i].get<int>());
  return s;
}

// `chimera run` text for the prompt ids with diffusion flags (EOS ignored, greedy).
std::string run_text(const std::string& model, const std::string& ids, const std::string& flags) {
  const std::string cmd = chimera_binary() + " run -q --threads 1 -m " + model + " -t " + ids +
                          " --temp 0 --ignore-eos " + flags + " 2>/dev/null";
  std::string out = command_output(cmd);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(DiffusionServer, DefaultsAndPerRequestOverridesMatchRun) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = llada_model(shared);
  json ids;
  const std::string id_list = golden_prompt_ids(shared, &ids);
  const std::string want_default = run_text(model, id_list, "-n 16 --steps 16 --block-length 16");
  const std::string want_blocks = run_text(model, id_list, "-n 16 --steps 16 --block-length 4 --dual-cache");
  ASSERT_NE(want_default, want_blocks);  // the override must be visible in the output
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model, {"--steps", "16", "--block-length", "16"}, &err)) << err;
  auto c = srv.client();
  json body = {{"prompt", ids}, {"max_tokens", 16}, {"temperature", 0}, {"ignore_eos", true}};
  auto r = post_json(*c, "/v1/completions", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], want_default);
  body["block_length"] = 4;
  body["dual_cache"] = true;
  r = post_json(*c, "/v1/completions", body.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], want_blocks);
  // Streamed: the same text.
  body["stream"] = true;
  StreamResult s = post_stream(*c, "/v1/completions", body);
  EXPECT_EQ(s.status, 200);
  EXPECT_EQ(s.text, want_blocks);
  // Bad combinations are 400s naming the parameter; the server stays healthy.
  struct Bad {
    json patch;
    const char* param;
  };
  for (const Bad& b : {Bad{{{"block_length", 5}}, "block_length"}, Bad{{{"block_length", 8}, {"steps", 3}}, "steps"},
                       Bad{{{"remasking", "best"}}, "remasking"}, Bad{{{"threshold", 1.0}}, "threshold"},
                       Bad{{{"steps", 0}}, "steps"}, Bad{{{"dual_cache", "yes"}}, "dual_cache"}}) {
    json bad = {{"prompt", ids}, {"max_tokens", 16}};
    bad.update(b.patch);
    auto e = post_json(*c, "/v1/completions", bad.dump());
    ASSERT_TRUE(e);
    EXPECT_EQ(e->status, 400) << b.patch.dump() << " " << e->body;
    EXPECT_EQ(json::parse(e->body)["error"]["param"], b.param) << e->body;
  }
  auto h = c->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  c.reset();
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(DiffusionServer, BadServerDefaultsAreCliErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const auto& [flag, msg] : {std::pair<std::string, std::string>{"--threshold 2", "--threshold must be in [0, 1)"},
                                  {"--visual", "--visual redraws one canvas"}}) {
    const std::string cmd = chimera_binary() + " serve -m " + llada_model(shared) + " --port 0 " + flag + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char b[4096];
    size_t k;
    while ((k = fread(b, 1, sizeof b, p)) > 0) out.append(b, k);
    const int status = pclose(p);
    EXPECT_NE(status, 0) << flag;
    EXPECT_NE(out.find(msg), std::string::npos) << out;
  }
}

TEST(DiffusionRequestParsing, DefaultsOverridesAndLength) {
  server::RequestLimits lim;
  lim.n_ctx = 256;
  lim.n_vocab = 100;
  lim.diffusion.steps = 32;
  lim.diffusion.block_length = 8;
  lim.diffusion.threshold = 0.9;
  server::ParsedRequest pr;
  server::ApiError err;
  ASSERT_TRUE(server::parse_generation_request(R"({"prompt": [1, 2]})", false, lim, &pr, &err)) << err.message;
  EXPECT_EQ(pr.diffusion.steps, 32);
  EXPECT_EQ(pr.diffusion.block_length, 8);
  EXPECT_DOUBLE_EQ(pr.diffusion.threshold, 0.9);
  ASSERT_TRUE(server::parse_generation_request(
      R"({"prompt": [1], "steps": 4, "block_length": 2, "remasking": "margin", "threshold": 0.25,
          "cfg_scale": 1.5, "prefix_cache": true, "dual_cache": true, "cache_refresh": 3})",
      false, lim, &pr, &err))
      << err.message;
  EXPECT_EQ(pr.diffusion.steps, 4);
  EXPECT_EQ(pr.diffusion.block_length, 2);
  EXPECT_EQ(pr.diffusion.remasking, runtime::Remasking::kMargin);
  EXPECT_DOUBLE_EQ(pr.diffusion.threshold, 0.25);
  EXPECT_DOUBLE_EQ(pr.diffusion.cfg_scale, 1.5);
  EXPECT_TRUE(pr.diffusion.prefix_cache && pr.diffusion.dual_cache);
  EXPECT_EQ(pr.diffusion.cache_refresh, 3);
  // No max_tokens: the default canvas (128) clipped to the room, rounded to blocks.
  ASSERT_TRUE(server::parse_generation_request(R"({"prompt": [1], "block_length": 24})", false, lim, &pr, &err));
  int64_t n = -1;
  EXPECT_TRUE(server::resolve_diffusion_length(pr, 100, &n, &err)) << err.message;
  EXPECT_EQ(n, 96);
  EXPECT_FALSE(server::resolve_diffusion_length(pr, 20, &n, &err));
  EXPECT_EQ(err.code, "context_length_exceeded");
  // max_tokens given: checked against the block length.
  ASSERT_TRUE(server::parse_generation_request(R"({"prompt": [1], "max_tokens": 10})", false, lim, &pr, &err));
  n = 10;
  EXPECT_FALSE(server::resolve_diffusion_length(pr, 100, &n, &err));
  EXPECT_EQ(err.param, "block_length");
}

}  // namespace
}  // namespace chimera::test
