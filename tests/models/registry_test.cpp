// Model registry and loader: every registered family has a golden fixture that
// loads; unknown architectures, missing tensors and wrong shapes are clear
// errors naming the problem.
#include <gtest/gtest.h>

#include <set>

#include "format/gguf/gguf.h"
#include "golden_case.h"
#include "models/context.h"
#include "models/model.h"

namespace chimera::test {
namespace {

// Rewrites `src` with tensors renamed/dropped/reshaped by `edit` and metadata
// key overrides; returns the path of the new file.
std::string rewrite(const std::string& src, const std::string& name,
                    const std::function<bool(format::GgufTensorInfo&)>& edit,
                    const std::vector<std::pair<std::string, format::GgufValue>>& kv = {}) {
  auto g = format::GgufFile::open(src);
  EXPECT_TRUE(g.is_ok());
  format::GgufWriter w;
  for (const auto& [k, v] : (*g)->metadata()) w.set(k, v);
  for (const auto& [k, v] : kv) w.set(k, v);
  for (auto t : (*g)->tensors()) {
    if (!edit(t)) continue;
    EXPECT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
  }
  const std::string out = temp_path(name);
  EXPECT_TRUE(w.write(out).is_ok());
  return out;
}

TEST(Registry, EveryFamilyHasALoadableGoldenFixture) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string dir = shared + "/golden";
  // Families the shared golden set has no case for; their fixture is built by
  // the named test instead (dream: a rewritten tiny-llada, tests/models/llada_test.cpp;
  // phi4flash: its case is a Hugging Face folder, converted by tests/models/phi4flash_test.cpp;
  // bitnet-b1.58 / bitnet-25: a rewritten tiny-bitnet, tests/models/bitnet_arch_test.cpp).
  const std::set<std::string> built_elsewhere = {"dream", "phi4flash", "bitnet-b1.58", "bitnet-25"};
  for (const auto& e : models::model_registry()) {
    if (built_elsewhere.count(e.arch)) continue;
    bool found = false;
    for (const auto& name : list_golden_cases(dir)) {
      GoldenCase gc;
      if (!load_golden(dir, name, &gc) || gc.arch != e.arch) continue;
      auto m = models::load_model(gc.model_path);
      // Every type and family of the golden set is listed in the README: kUnsupported is a failure too.
      ASSERT_TRUE(m.is_ok()) << name << ": " << m.status().message();
      EXPECT_EQ((*m)->info().arch, e.arch);
      // What `chimera info` reads from the metadata alone is what loading gives.
      auto f = format::GgufFile::open(gc.model_path);
      ASSERT_TRUE(f.is_ok());
      EXPECT_EQ(models::default_kv_types_for(*f.value()), (*m)->default_kv_types()) << name;
      found = true;
    }
    EXPECT_TRUE(found) << "no loadable golden fixture for arch " << e.arch;
  }
}

TEST(Registry, UnknownArchitectureIsAClearError) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string p = rewrite(shared + "/models/stories260K.gguf", "unknown-arch.gguf",
                                [](format::GgufTensorInfo&) { return true; },
                                {{"general.architecture", format::GgufValue::from_string("warpdrive")}});
  auto m = models::load_model(p);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(m.status().message().find("warpdrive"), std::string::npos) << m.status().message();
}

TEST(Registry, MissingTensorIsNamed) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string p = rewrite(shared + "/models/stories260K.gguf", "missing.gguf",
                                [](format::GgufTensorInfo& t) { return t.name != "blk.3.ffn_up.weight"; });
  auto m = models::load_model(p);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("blk.3.ffn_up.weight"), std::string::npos) << m.status().message();
}

TEST(Registry, WrongShapeIsNamed) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string p = rewrite(shared + "/models/stories260K.gguf", "shape.gguf", [](format::GgufTensorInfo& t) {
    if (t.name == "blk.1.attn_k.weight") std::swap(t.ne[0], t.ne[1]);
    return true;
  });
  auto m = models::load_model(p);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("blk.1.attn_k.weight"), std::string::npos) << m.status().message();
}

TEST(Registry, BadHyperParametersAreErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string p = rewrite(shared + "/models/stories260K.gguf", "heads.gguf",
                                [](format::GgufTensorInfo&) { return true; },
                                {{"llama.attention.head_count_kv", format::GgufValue::from_u32(3)}});
  auto m = models::load_model(p);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("head_count"), std::string::npos) << m.status().message();
}

TEST(Forward, ContextOverflowAndBadIdsAreErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto m = models::load_model(shared + "/models/stories260K.gguf");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  models::Context ctx = (*m)->new_context();
  auto st = ctx.new_state(4);
  std::vector<float> logits((size_t)(*m)->info().n_vocab * 8);
  std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  Status s = ctx.forward(*st, ids.data(), 5, models::Logits::kAll, logits.data(), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(st->n_past(), 0);
  int32_t bad = 512;
  s = ctx.forward(*st, &bad, 1, models::Logits::kLast, logits.data(), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st->n_past(), 0);
}

}  // namespace
}  // namespace chimera::test
