// The repack cache (kernels/repack_cache.h) end to end on a copy of a golden
// quantized model: the first load writes MODEL.chimera-cache, the second maps
// every packed weight from it (no conversion) with bit-identical logits; a
// changed model byte, a truncated cache, another ISA and a cache path that
// cannot be written each fall back to converting (rebuilding the cache where
// possible) and never change results; and the CLI's --no-repack-cache writes
// nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "format/gguf/gguf.h"
#include "kernels/dispatch.h"
#include "kernels/repack_cache.h"
#include "models/context.h"
#include "models/model.h"
#include "test_util.h"

namespace chimera::test {
namespace {

namespace fs = std::filesystem;

struct LoadedRun {
  std::unique_ptr<models::Model> model;
  std::vector<float> logits;
};

LoadedRun load_and_run(const std::string& path) {
  LoadedRun r;
  auto m = models::load_model(path);
  if (!m.is_ok()) {
    ADD_FAILURE() << m.status().message();
    return r;
  }
  r.model = std::move(m).value();
  const std::vector<int32_t> ids = {1, 300, 45, 12, 99, 7};
  models::Context ctx = r.model->new_context();
  auto st = ctx.new_state(16);
  r.logits.resize(ids.size() * (size_t)r.model->info().n_vocab);
  ThreadPool pool(2);
  EXPECT_TRUE(ctx.forward(*st, ids.data(), (int64_t)ids.size(), models::Logits::kAll, r.logits.data(), &pool)
                  .is_ok());
  return r;
}

class RepackCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { kernels::set_repack_cache_enabled(true); }
  void TearDown() override { kernels::set_repack_cache_enabled(false); }
};

TEST_F(RepackCacheTest, SecondLoadMapsTheCacheWithIdenticalResults) {
  CHIMERA_REQUIRE_SHARED(shared);
  const fs::path dir = temp_path("repack-cache");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = (dir / "m.gguf").string(), cache = model + ".chimera-cache";
  fs::copy_file(shared + "/golden/models/quant-llama-Q4_K_M.gguf", model);

  kernels::set_repack_cache_enabled(false);
  const LoadedRun plain = load_and_run(model);
  ASSERT_TRUE(plain.model);
  EXPECT_EQ(plain.model->repack_cache_status(), "");
  EXPECT_FALSE(fs::exists(cache));
  ASSERT_GT(plain.model->repacked_bytes(), 0u) << "nothing is repacked: the cache would be untested";
  kernels::set_repack_cache_enabled(true);

  const LoadedRun first = load_and_run(model);
  ASSERT_TRUE(first.model);
  EXPECT_NE(first.model->repack_cache_status().find("written"), std::string::npos)
      << first.model->repack_cache_status();
  EXPECT_EQ(first.model->repack_cached_bytes(), 0u);
  ASSERT_TRUE(fs::exists(cache));
  EXPECT_EQ(first.logits, plain.logits);

  const LoadedRun second = load_and_run(model);
  ASSERT_TRUE(second.model);
  EXPECT_NE(second.model->repack_cache_status().find("hit"), std::string::npos)
      << second.model->repack_cache_status();
  EXPECT_EQ(second.model->repack_cached_bytes(), second.model->repacked_bytes());
  EXPECT_EQ(second.logits, plain.logits);

  // A truncated cache is a miss and is rebuilt.
  fs::resize_file(cache, fs::file_size(cache) / 2);
  const LoadedRun truncated = load_and_run(model);
  EXPECT_NE(truncated.model->repack_cache_status().find("written"), std::string::npos)
      << truncated.model->repack_cache_status();
  EXPECT_EQ(truncated.logits, plain.logits);

  // Another ISA: its own layouts, so a miss (and a rewrite) wherever it repacks.
  for (kernels::Isa isa : kernels::available_isas()) {
    if (isa == kernels::active_isa()) continue;
    kernels::ScopedIsa other_isa(isa);
    const LoadedRun other = load_and_run(model);
    ASSERT_TRUE(other.model);
    if (other.model->repacked_bytes() > 0) {
      EXPECT_NE(other.model->repack_cache_status().find("written"), std::string::npos)
          << kernels::isa_name(isa) << ": " << other.model->repack_cache_status();
    }
  }
}

TEST_F(RepackCacheTest, AChangedModelIsAMiss) {
  CHIMERA_REQUIRE_SHARED(shared);
  const fs::path dir = temp_path("repack-cache-stale");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = (dir / "m.gguf").string();
  fs::copy_file(shared + "/golden/models/quant-llama-Q4_K_M.gguf", model);
  const LoadedRun before = load_and_run(model);
  ASSERT_TRUE(before.model);
  // Flip one byte of a repacked weight (same size, same name: only the content hash sees it).
  uint64_t off = 0;
  {
    auto g = format::GgufFile::open(model);
    ASSERT_TRUE(g.is_ok());
    const format::GgufTensorInfo* t = (*g)->find_tensor("blk.0.attn_q.weight");
    ASSERT_NE(t, nullptr);
    off = (*g)->data_offset() + t->offset + 100;
  }
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg((std::streamoff)off);
    char c = 0;
    f.read(&c, 1);
    c = (char)(c ^ 0x5A);
    f.seekp((std::streamoff)off);
    f.write(&c, 1);
  }
  const LoadedRun after = load_and_run(model);
  ASSERT_TRUE(after.model);
  EXPECT_NE(after.model->repack_cache_status().find("written"), std::string::npos)
      << after.model->repack_cache_status();
  EXPECT_NE(after.logits, before.logits) << "the changed weight must change the result (not the stale cache)";
  kernels::set_repack_cache_enabled(false);
  EXPECT_EQ(load_and_run(model).logits, after.logits);
}

TEST_F(RepackCacheTest, AnUnwritableCacheLeavesTheLoadAsItWas) {
  CHIMERA_REQUIRE_SHARED(shared);
  const fs::path dir = temp_path("repack-cache-ro");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = (dir / "m.gguf").string();
  fs::copy_file(shared + "/golden/models/quant-llama-Q4_K_M.gguf", model);
  fs::create_directories(model + ".chimera-cache");  // a directory where the file would go
  const LoadedRun r = load_and_run(model);
  ASSERT_TRUE(r.model);
  EXPECT_NE(r.model->repack_cache_status().find("not written"), std::string::npos) << r.model->repack_cache_status();
  EXPECT_GT(r.model->repacked_bytes(), 0u);
  // And the shared model loads as before (with the cache off: the shared
  // folder may be writable, and tests never write into it).
  kernels::set_repack_cache_enabled(false);
  const LoadedRun shared_run = load_and_run(shared + "/golden/models/quant-llama-Q4_K_M.gguf");
  EXPECT_EQ(shared_run.logits, r.logits);
}

TEST(RepackCacheCli, WrittenByDefaultAndNotWithTheFlag) {
  CHIMERA_REQUIRE_SHARED(shared);
  // Test binaries start with CHIMERA_REPACK_CACHE=0 (tests/test_env.cpp);
  // this one needs the default, on, for its subprocesses.
  const char* prev = std::getenv("CHIMERA_REPACK_CACHE");
  const std::string saved = prev ? prev : "";
  ::unsetenv("CHIMERA_REPACK_CACHE");
  struct Restore {
    bool had;
    std::string value;
    ~Restore() {
      if (had) ::setenv("CHIMERA_REPACK_CACHE", value.c_str(), 1);
    }
  } restore{prev != nullptr, saved};
  const fs::path dir = temp_path("repack-cache-cli");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = (dir / "m.gguf").string(), cache = model + ".chimera-cache";
  fs::copy_file(shared + "/golden/models/quant-llama-Q4_K_M.gguf", model);
  const std::string run = "run -m " + shell_quote(model) + " -t 1,300,45 -n 4 --temp 0 --ids --ignore-eos";
  SplitResult off = run_chimera_split(run + " --no-repack-cache");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_FALSE(fs::exists(cache));
  SplitResult w = run_chimera_split(run);
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.err.find("repack cache: written"), std::string::npos) << w.err;
  SplitResult hit = run_chimera_split(run);
  ASSERT_EQ(hit.exit_code, 0) << hit.err;
  EXPECT_NE(hit.err.find("repack cache: hit"), std::string::npos) << hit.err;
  EXPECT_EQ(hit.out, off.out);  // the generated ids
  EXPECT_EQ(w.out, off.out);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace chimera::test
