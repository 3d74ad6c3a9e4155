// The repack cache (kernels/repack_cache.h) end to end on a copy of a golden
// quantized model: the first load writes MODEL.ISA.chimera-cache, the second
// maps every packed weight from it (no conversion) with bit-identical logits;
// a changed model byte, a truncated cache and a cache path that cannot be
// written each fall back to converting (rebuilding the cache where possible)
// and never change results; each ISA keeps its own file, so loads that
// alternate ISAs hit on the second load of each (library and CLI --isa); a
// write removes the untagged cache of an earlier chimera; and the CLI's
// --no-repack-cache writes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "format/gguf/gguf.h"
#include "kernels/dispatch.h"
#include "kernels/repack_cache.h"
#include "models/context.h"
#include "models/model.h"
#include "test_util.h"

namespace chimera::test {
namespace {

namespace fs = std::filesystem;

// The cache file of `model` for the active ISA (levels that share packed
// layouts share it: amx uses the avx512vnni file).
std::string cache_of(const std::string& model) {
  return kernels::repack_cache_path(model, kernels::isa_name(kernels::layout_isa(kernels::active_isa())));
}

// Every *.chimera-cache file in dir.
std::vector<std::string> cache_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    const std::string suffix = ".chimera-cache";
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) out.push_back(n);
  }
  return out;
}

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
  const std::string model = (dir / "m.gguf").string(), cache = cache_of(model);
  EXPECT_EQ(cache, model + "." + kernels::isa_name(kernels::layout_isa(kernels::active_isa())) + ".chimera-cache");
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

  // Another ISA: its own layouts in its own file, written wherever it repacks;
  // one that shares this ISA's layouts (amx and avx512vnni) maps this file.
  const kernels::Isa layout = kernels::layout_isa(kernels::active_isa());
  for (kernels::Isa isa : kernels::available_isas()) {
    if (isa == kernels::active_isa()) continue;
    kernels::ScopedIsa other_isa(isa);
    const LoadedRun other = load_and_run(model);
    ASSERT_TRUE(other.model);
    if (kernels::layout_isa(isa) == layout) {
      EXPECT_NE(other.model->repack_cache_status().find("hit"), std::string::npos)
          << kernels::isa_name(isa) << ": " << other.model->repack_cache_status();
      EXPECT_EQ(other.model->repack_cached_bytes(), other.model->repacked_bytes()) << kernels::isa_name(isa);
    } else if (other.model->repacked_bytes() > 0) {
      EXPECT_NE(other.model->repack_cache_status().find("written"), std::string::npos)
          << kernels::isa_name(isa) << ": " << other.model->repack_cache_status();
      EXPECT_TRUE(fs::exists(cache_of(model))) << kernels::isa_name(isa);
    }
  }
  // ... which left this ISA's file alone.
  const LoadedRun again = load_and_run(model);
  ASSERT_TRUE(again.model);
  EXPECT_NE(again.model->repack_cache_status().find("hit"), std::string::npos) << again.model->repack_cache_status();
  EXPECT_EQ(again.logits, plain.logits);
}

// Loads that alternate ISAs (e.g. --isa avx2 and the default) each write their
// own file once and then hit it, every ISA's results unchanged; levels that
// share packed layouts (amx, avx512vnni) share one file: the first of them
// writes it, the other hits it.
TEST_F(RepackCacheTest, AlternatingIsasHitOnTheSecondLoadOfEach) {
  CHIMERA_REQUIRE_SHARED(shared);
  const fs::path dir = temp_path("repack-cache-isas");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = (dir / "m.gguf").string();
  fs::copy_file(shared + "/golden/models/quant-llama-Q4_K_M.gguf", model);
  std::vector<kernels::Isa> isas;  // the ISAs that repack this model
  std::vector<std::vector<float>> want;
  for (kernels::Isa isa : kernels::available_isas()) {
    kernels::ScopedIsa scoped(isa);
    kernels::set_repack_cache_enabled(false);
    const LoadedRun plain = load_and_run(model);
    kernels::set_repack_cache_enabled(true);
    ASSERT_TRUE(plain.model);
    if (plain.model->repacked_bytes() == 0) continue;
    isas.push_back(isa);
    want.push_back(plain.logits);
  }
  if (isas.size() < 2) GTEST_SKIP() << "fewer than two ISAs repack on this CPU";
  std::vector<kernels::Isa> layouts;  // the distinct cache files, in first-write order
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < isas.size(); ++i) {
      kernels::ScopedIsa scoped(isas[i]);
      const LoadedRun r = load_and_run(model);
      ASSERT_TRUE(r.model);
      const std::string& st = r.model->repack_cache_status();
      const char* name = kernels::isa_name(isas[i]);
      const kernels::Isa layout = kernels::layout_isa(isas[i]);
      const bool first_of_layout = std::find(layouts.begin(), layouts.end(), layout) == layouts.end();
      if (first_of_layout) layouts.push_back(layout);
      if (round == 0 && first_of_layout) {
        EXPECT_NE(st.find("written"), std::string::npos) << name << ": " << st;
        EXPECT_EQ(r.model->repack_cached_bytes(), 0u) << name;
      } else {
        EXPECT_NE(st.find("hit"), std::string::npos) << "round " << round << " " << name << ": " << st;
        EXPECT_EQ(r.model->repack_cached_bytes(), r.model->repacked_bytes()) << name;
      }
      EXPECT_EQ(r.logits, want[i]) << "round " << round << " " << name;
    }
  }
  EXPECT_EQ(cache_files(dir).size(), layouts.size());
}

// The single cache file of an earlier chimera (MODEL.gguf.chimera-cache, no
// ISA tag) is never read, and the first write of a tagged cache removes it.
TEST_F(RepackCacheTest, TheUntaggedCacheOfAnEarlierChimeraIsRemoved) {
  CHIMERA_REQUIRE_SHARED(shared);
  const fs::path dir = temp_path("repack-cache-legacy");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = (dir / "m.gguf").string(), legacy = model + ".chimera-cache";
  fs::copy_file(shared + "/golden/models/quant-llama-Q4_K_M.gguf", model);
  {
    std::ofstream f(legacy, std::ios::binary);
    f << "CHIMERA-RPCACHE1 an earlier chimera's cache";
  }
  const LoadedRun r = load_and_run(model);
  ASSERT_TRUE(r.model);
  EXPECT_NE(r.model->repack_cache_status().find("written"), std::string::npos) << r.model->repack_cache_status();
  EXPECT_NE(r.model->repack_cache_status().find("removed the stale " + legacy), std::string::npos)
      << r.model->repack_cache_status();
  EXPECT_FALSE(fs::exists(legacy));
  EXPECT_TRUE(fs::exists(cache_of(model)));
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
  fs::create_directories(cache_of(model));  // a directory where the file would go
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
  const std::string model = (dir / "m.gguf").string();
  fs::copy_file(shared + "/golden/models/quant-llama-Q4_K_M.gguf", model);
  const std::string run = "run -m " + shell_quote(model) + " -t 1,300,45 -n 4 --temp 0 --ids --ignore-eos";
  SplitResult off = run_chimera_split(run + " --no-repack-cache");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_TRUE(cache_files(dir).empty());
  SplitResult w = run_chimera_split(run);
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.err.find("repack cache: written"), std::string::npos) << w.err;
  SplitResult hit = run_chimera_split(run);
  ASSERT_EQ(hit.exit_code, 0) << hit.err;
  EXPECT_NE(hit.err.find("repack cache: hit"), std::string::npos) << hit.err;
  EXPECT_EQ(hit.out, off.out);  // the generated ids
  EXPECT_EQ(w.out, off.out);
  // --isa avx2 and the default alternating: each keeps its own file (where
  // AVX2 repacks and is not already the default).
  const auto isas = kernels::available_isas();
  if (kernels::active_isa() != kernels::Isa::kAvx2 &&
      std::find(isas.begin(), isas.end(), kernels::Isa::kAvx2) != isas.end()) {
    SplitResult a1 = run_chimera_split(run + " --isa avx2");
    ASSERT_EQ(a1.exit_code, 0) << a1.err;
    EXPECT_NE(a1.err.find("repack cache: written"), std::string::npos) << a1.err;
    EXPECT_TRUE(fs::exists(kernels::repack_cache_path(model, "avx2")));
    for (int i = 0; i < 2; ++i) {
      SplitResult d = run_chimera_split(run);
      ASSERT_EQ(d.exit_code, 0) << d.err;
      EXPECT_NE(d.err.find("repack cache: hit"), std::string::npos) << d.err;
      SplitResult a = run_chimera_split(run + " --isa avx2");
      ASSERT_EQ(a.exit_code, 0) << a.err;
      EXPECT_NE(a.err.find("repack cache: hit"), std::string::npos) << a.err;
      EXPECT_EQ(a.out, a1.out);
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace chimera::test
