// `chimera bench serve` against the real server: with some requests failing
// (prompts longer than the context, drawn by --random-range-ratio) the
// successful ones still get TTFT / ITL / throughput figures and the failures
// are counted; the chat endpoint works; a wrong --model or --endpoint fails
// clearly.
#include <gtest/gtest.h>

#include <fstream>

#include "server_fixture.h"

namespace chimera::test {
namespace {

struct BenchRun {
  int exit_code = -1;
  std::string out;
  json result;
};

BenchRun bench(const ServerProcess& srv, const std::string& args) {
  BenchRun r;
  const std::string file = temp_path("bench-serve-" + std::to_string(srv.port()) + ".json");
  std::remove(file.c_str());
  const std::string cmd = chimera_binary() + " bench serve --url http://127.0.0.1:" + std::to_string(srv.port()) +
                          " " + args + " --result-file " + file + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char b[4096];
  size_t k;
  while ((k = fread(b, 1, sizeof b, p)) > 0) r.out.append(b, k);
  const int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream f(file);
  if (f) r.result = json::parse(f, nullptr, false);
  return r;
}

void expect_partial_failure_metrics(const BenchRun& r, int num_prompts) {
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ASSERT_TRUE(r.result.is_object()) << r.out;
  const int ok = r.result["completed"], failed = r.result["failed"];
  EXPECT_EQ(ok + failed, num_prompts);
  EXPECT_GT(ok, 0) << r.out;
  EXPECT_GT(failed, 0) << r.out;
  EXPECT_GT(r.result["ttft_ms"]["mean"].get<double>(), 0) << r.out;
  EXPECT_GT(r.result["ttft_ms"]["median"].get<double>(), 0) << r.out;
  EXPECT_GT(r.result["e2el_ms"]["mean"].get<double>(), 0) << r.out;
  EXPECT_GT(r.result["total_output_tokens"].get<int64_t>(), 0) << r.out;
  EXPECT_GT(r.result["output_throughput"].get<double>(), 0) << r.out;
  EXPECT_GT(r.result["request_throughput"].get<double>(), 0) << r.out;
  EXPECT_NE(r.result["first_error"].get<std::string>().find("context length"), std::string::npos) << r.out;
  const size_t line = r.out.find("Failed requests:");
  ASSERT_NE(line, std::string::npos) << r.out;
  EXPECT_EQ(std::atoi(r.out.c_str() + line + 16), failed) << r.out;
  EXPECT_NE(r.out.find("first failure: HTTP 400"), std::string::npos) << r.out;
}

// Lengths drawn from [10, 190] prompt and [4, 12] output tokens against a
// 128-token context: some fit, some are refused with 400.
TEST(BenchServe, PartialFailuresStillReportLatencies) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--parallel", "2", "--ctx-size", "128");
  const BenchRun r = bench(srv, "--input-len 100 --output-len 8 --random-range-ratio 0.9 --num-prompts 12 "
                                "--concurrency 3 --seed 7");
  expect_partial_failure_metrics(r, 12);
  // Every success generated its drawn length (ignore_eos): ITL and TPOT exist.
  EXPECT_GT(r.result["itl_ms"]["mean"].get<double>(), 0) << r.out;
  EXPECT_GT(r.result["tpot_ms"]["mean"].get<double>(), 0) << r.out;
}

TEST(BenchServe, ChatEndpointWithFailures) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--parallel", "2", "--ctx-size", "128");
  const BenchRun r = bench(srv, "--endpoint /v1/chat/completions --model stories260K --input-len 100 "
                                "--output-len 8 --random-range-ratio 0.9 --num-prompts 12 --concurrency 3 --seed 3");
  expect_partial_failure_metrics(r, 12);
}

TEST(BenchServe, WrongModelOrEndpointFailsClearly) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared);
  BenchRun r = bench(srv, "--model no-such-model --input-len 8 --output-len 2 --num-prompts 2");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("every request failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("HTTP 404"), std::string::npos) << r.out;
  r = bench(srv, "--endpoint /v1/embeddings --num-prompts 1");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("--endpoint must be"), std::string::npos) << r.out;
  r = bench(srv, "--random-range-ratio 1.5 --num-prompts 1");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("--random-range-ratio"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace chimera::test
