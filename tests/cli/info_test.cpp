// `chimera info` end to end: runs the built binary (popen) on a valid file, a
// truncated copy, a hostile file and a missing path; checks exit codes (0 / 1),
// that errors go to stderr as "error: ...", that no signal ended the process,
// and the main parts of the text and JSON output.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "format/gguf_test_files.h"
#include "test_util.h"

namespace chimera::cli {
namespace {

namespace fs = std::filesystem;

using RunResult = test::SplitResult;
std::string quote(const std::string& s) { return test::shell_quote(s); }
RunResult run_chimera(const std::string& args) { return test::run_chimera_split(args); }

void write_bytes(const std::string& path, const std::vector<uint8_t>& b, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), (std::streamsize)n);
}

class InfoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(test::chimera_binary())) GTEST_FAIL() << "chimera binary not built";
    bytes_ = test::small_model_gguf();
    path_ = test::temp_path("info-model.gguf");
    write_bytes(path_, bytes_, bytes_.size());
  }
  void TearDown() override {
    if (!path_.empty()) fs::remove(path_);
  }
  std::vector<uint8_t> bytes_;
  std::string path_;
};

TEST_F(InfoTest, ValidFile) {
  auto r = run_chimera("info -m " + quote(path_));
  EXPECT_FALSE(r.signaled);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* s : {"GGUF version:    3", "alignment:       32", "architecture:    llama",
                        "name:            \"tiny test model\"", "t.arr_of_arr", "[arr x 3]", "token_embd.weight",
                        "[8, 3, 1, 2]", "Q4_K", "5 tensors, 468 bytes", "memory estimate (one sequence, KV cache k=f16 v=f16)",
                        "KV per token:    192 B",
                        "n_ctx 256", "(training context)"})
    EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in:\n" << r.out;
}

TEST_F(InfoTest, OptionsNoTensorsAndContext) {
  auto r = run_chimera("info --no-tensors -c 1000 -m " + quote(path_));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("blk.0.ffn_up.weight"), std::string::npos);
  EXPECT_NE(r.out.find("n_ctx 1000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KV cache 187.50 KiB"), std::string::npos) << r.out;  // 192 B (f16) x 1000
  auto bad = run_chimera("info -c -5 -m " + quote(path_));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err.rfind("error:", 0), 0u) << bad.err;
}

TEST_F(InfoTest, Json) {
  auto r = run_chimera("info --json -c 512 -m " + quote(path_));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["tensors"].size(), 5u);
  EXPECT_EQ(j["tensors"][2]["shape"], nlohmann::json({8, 3, 1, 2}));
  EXPECT_EQ(j["totals"]["by_type"]["F32"]["count"], 2);
  EXPECT_EQ(j["memory"]["kv_cache_type_k"], "f16");
  EXPECT_EQ(j["memory"]["kv_cache_type_v"], "f16");
  EXPECT_EQ(j["memory"]["kv_bytes_per_token"], 192);
  EXPECT_EQ(j["memory"]["contexts"][0]["n_ctx"], 512);
  EXPECT_EQ(j["memory"]["contexts"][0]["kv_cache_bytes"], 192 * 512);
  bool found = false;
  for (const auto& m : j["metadata"])
    if (m["key"] == "t.u64") {
      found = true;
      EXPECT_EQ(m["value"].get<uint64_t>(), 18000000000000000000ull);
    }
  EXPECT_TRUE(found);
}

// The estimate follows the cache types a run would use: the model's default
// (f16 here), or --cache-type-k / --cache-type-v as run / serve take them.
TEST_F(InfoTest, CacheTypeFlagsChangeTheEstimate) {
  auto f32 = run_chimera("info --json --no-tensors --cache-type-k f32 --cache-type-v f32 -m " + quote(path_));
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  auto j = nlohmann::json::parse(f32.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << f32.out;
  EXPECT_EQ(j["memory"]["kv_bytes_per_token"], 384);
  auto mixed = run_chimera("info --json --no-tensors --cache-type-v f32 -m " + quote(path_));
  ASSERT_EQ(mixed.exit_code, 0) << mixed.err;
  j = nlohmann::json::parse(mixed.out, nullptr, false);
  EXPECT_EQ(j["memory"]["kv_cache_type_k"], "f16");
  EXPECT_EQ(j["memory"]["kv_bytes_per_token"], 96 + 192);
  // The tiny model's heads are narrower than a Q8_0 block: no estimate, a note.
  auto q8 = run_chimera("info --no-tensors --cache-type-k q8_0 -m " + quote(path_));
  ASSERT_EQ(q8.exit_code, 0) << q8.err;
  EXPECT_NE(q8.out.find("multiples of 32"), std::string::npos) << q8.out;
  auto bad = run_chimera("info --cache-type-k f8 -m " + quote(path_));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("cache-type-k"), std::string::npos) << bad.err;
}

TEST_F(InfoTest, TruncatedFileIsAnError) {
  const std::string dir = test::temp_path("info-trunc");
  fs::create_directories(dir);
  const std::string trunc = dir + "/truncated.gguf";
  for (size_t n : {size_t{0}, size_t{3}, size_t{40}, bytes_.size() / 2, bytes_.size() - 100}) {
    write_bytes(trunc, bytes_, n);
    auto r = run_chimera("info -m " + quote(trunc));
    EXPECT_FALSE(r.signaled) << n;
    EXPECT_EQ(r.exit_code, 1) << n;
    EXPECT_EQ(r.err.rfind("error:", 0), 0u) << n << ": " << r.err;
    EXPECT_NE(r.err.find(trunc), std::string::npos) << r.err;  // names the file
  }
  fs::remove_all(dir);
}

TEST_F(InfoTest, HostileFileIsAnError) {
  const std::string hostile = test::temp_path("info-hostile.gguf");
  test::RawGguf g;
  g.header(3, 0, 1).str("a").u32(9).u32(0).u64(1ull << 62);
  write_bytes(hostile, g.b, g.b.size());
  auto r = run_chimera("info -m " + quote(hostile));
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
  fs::remove(hostile);
}

TEST_F(InfoTest, ControlBytesInNamesAreEscaped) {
  format::GgufWriter w;
  w.set("evil\x1b[2Jkey", format::GgufValue::from_string("v\x1b]0;x\x07"));
  std::vector<uint8_t> data(16, 0);
  ASSERT_TRUE(w.add_tensor("t\nname", format::GgmlType::F32, {4}, data.data(), data.size()).is_ok());
  const std::string p = test::temp_path("info-evil.gguf");
  ASSERT_TRUE(w.write(p).is_ok());
  auto r = run_chimera("info -m " + quote(p));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.out.find('\x07'), std::string::npos);
  EXPECT_NE(r.out.find("evil\\x1b[2Jkey"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("t\\x0aname"), std::string::npos) << r.out;
  fs::remove(p);
}

TEST_F(InfoTest, MissingFileIsAnError) {
  auto r = run_chimera("info -m /nonexistent/model.gguf");
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  auto no_arg = run_chimera("info");
  EXPECT_EQ(no_arg.exit_code, 1);
  EXPECT_EQ(no_arg.err.rfind("error:", 0), 0u) << no_arg.err;
}

TEST(InfoSharedTest, RealModels) {
  CHIMERA_REQUIRE_SHARED(shared);
  if (!fs::exists(test::chimera_binary())) GTEST_FAIL() << "chimera binary not built";
  auto r = run_chimera("info -m " + quote(shared + "/models/stories260K.gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("48 tensors, 1171200 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KV per token:    640 B"), std::string::npos) << r.out;  // f16: half of f32's 1.25 KiB
  auto g = run_chimera("info --no-tensors -m " + quote(shared + "/golden/models/tiny-granitehybrid.gguf"));
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find("layers:          4 (2 attention, 2 recurrent)"), std::string::npos) << g.out;
}

}  // namespace
}  // namespace chimera::cli
