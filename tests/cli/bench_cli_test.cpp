// `chimera bench` end to end on stories260K: the JSON keys the quantization
// issue names, -p 0 / -n 0 skipping a test, -d (context depth before each
// test, as llama-bench -d) and bad arguments.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <filesystem>
#include <string>

#include "test_util.h"

namespace chimera::cli {
namespace {

using nlohmann::json;

using Out = test::ShellResult;

Out bench(const std::string& args) { return test::run_chimera("bench " + args, /*with_stderr=*/false); }

json bench_json(const std::string& model, const std::string& args) {
  const Out o = bench("-m " + model + " -r 1 --threads 1 --no-probe -o json " + args);
  EXPECT_EQ(o.rc, 0) << o.output;
  json j = json::parse(o.output, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << o.output;
  return j;
}

TEST(BenchCli, JsonHasTheDocumentedKeys) {
  CHIMERA_REQUIRE_SHARED(shared);
  const json j = bench_json(shared + "/models/stories260K.gguf", "-p 16 -n 8");
  for (const char* key : {"prefill_tok_s", "decode_tok_s", "bandwidth_gbs", "decode_bandwidth_pct", "peak_rss_bytes"})
    EXPECT_TRUE(j.contains(key)) << key << "\n" << j.dump();
  EXPECT_GT(j["prefill_tok_s"].get<double>(), 0);
  EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  EXPECT_GT(j["peak_rss_bytes"].get<double>(), 0);
  EXPECT_EQ(j["n_depth"], 0);
}

// With the probe: a probe after each timed decode run, and the % of bandwidth
// is the median of the per-run ratios (so it need not equal decode_gbs /
// bandwidth_gbs exactly, but both are positive and in the same ballpark).
TEST(BenchCli, ProbesBandwidthBesideEachDecodeRun) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Out o = bench("-m " + shared + "/models/stories260K.gguf -r 2 --threads 1 -p 0 -n 8 --probe-mib 64 -o json");
  ASSERT_EQ(o.rc, 0) << o.output;
  const json j = json::parse(o.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.output;
  const double bw = j["bandwidth_gbs"].get<double>(), pct = j["decode_bandwidth_pct"].get<double>();
  const double dec = j["decode_gbs"].get<double>();
  EXPECT_GT(bw, 0);
  EXPECT_GT(pct, 0);
  EXPECT_GT(dec, 0);
  EXPECT_LT(pct, 100.0 * dec / bw * 10) << j.dump();
  EXPECT_GT(pct, 100.0 * dec / bw / 10) << j.dump();
}

TEST(BenchCli, ZeroSkipsATest) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/models/stories260K.gguf";
  const json a = bench_json(model, "-p 0 -n 4");
  EXPECT_EQ(a["prefill_tok_s"].get<double>(), 0);
  EXPECT_GT(a["decode_tok_s"].get<double>(), 0);
  const json b = bench_json(model, "-p 8 -n 0");
  EXPECT_GT(b["prefill_tok_s"].get<double>(), 0);
  EXPECT_EQ(b["decode_tok_s"].get<double>(), 0);
}

// bench takes the load options of run/serve: --no-repack-cache writes no
// cache next to the model, and --cache-type-k/-v reach the KV cache (a family
// that reads only f32 caches refuses them by name).
TEST(BenchCli, TakesTheRepackCacheAndKvCacheOptions) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::filesystem::path dir = test::temp_path("bench-load-options");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "m.gguf").string();
  std::filesystem::copy_file(shared + "/golden/models/quant-llama-Q4_K_M.gguf", model);
  const json j = bench_json(model, "-p 8 -n 4 --no-repack-cache --cache-type-k q8_0 --cache-type-v f16");
  EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  for (const auto& e : std::filesystem::directory_iterator(dir))  // no MODEL.gguf.ISA.chimera-cache
    EXPECT_EQ(e.path().string().find(".chimera-cache"), std::string::npos) << e.path();
  // The llama2.c BitNet's reference-order attention reads only f32 caches.
  const std::string l2c = (dir / "bitnet-1M.gguf").string(), src = shared + "/models/bitnet-llama2c";
  ASSERT_EQ(test::run_chimera_split("convert --from bitnet-llama2c " + test::shell_quote(src + "/bitnet-1M.bin") +
                                    " --vocab " + test::shell_quote(src + "/tok512.bin") + " -o " + test::shell_quote(l2c))
                .exit_code,
            0);
  const test::SplitResult bad =
      test::run_chimera_split("bench -m " + test::shell_quote(l2c) + " -p 8 -n 4 -r 1 --no-probe --cache-type-k f16");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--cache-type-k"), std::string::npos) << bad.err;
  const test::SplitResult typo = test::run_chimera_split("bench -m " + test::shell_quote(model) + " -p 8 -n 4 --cache-type-v q4");
  EXPECT_NE(typo.exit_code, 0);
  std::filesystem::remove_all(dir);
}

TEST(BenchCli, DepthFillsTheContextBeforeEachTest) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/models/stories260K.gguf";
  const json j = bench_json(model, "-p 8 -n 4 -d 64");
  EXPECT_EQ(j["n_depth"], 64);
  EXPECT_GT(j["prefill_tok_s"].get<double>(), 0);
  EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  const Out md = bench("-m " + model + " -r 1 --threads 1 --no-probe -p 8 -n 4 -d 64");
  EXPECT_EQ(md.rc, 0);
  EXPECT_NE(md.output.find("pp8 @ d64"), std::string::npos) << md.output;
  EXPECT_NE(md.output.find("tg4 @ d64"), std::string::npos) << md.output;
}

TEST(BenchCli, BadArgumentsAreErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string model = shared + "/models/stories260K.gguf";
  EXPECT_EQ(bench("-m " + model + " -d -1 --no-probe").rc, 1);
  EXPECT_EQ(bench("-m " + model + " -r 0 --no-probe").rc, 1);
  EXPECT_EQ(bench("-m " + model + " -o xml --no-probe").rc, 1);
  EXPECT_EQ(bench("-m " + model + " --probe-mib 1").rc, 1);
  EXPECT_EQ(bench("-m /nonexistent.gguf --no-probe").rc, 1);
}

}  // namespace
}  // namespace chimera::cli
