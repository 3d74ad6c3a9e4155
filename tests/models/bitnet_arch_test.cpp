// Microsoft's BitNet b1.58 2B-4T architecture names (registry "bitnet-b1.58" and
// "bitnet-25", models/bitnet.cpp): their GGUFs carry no activation key — the
// arch name selects the squared-ReLU FFN relu(gate)^2 * up, with hyper-parameters
// under the arch's own key prefix. Fixture: the golden tiny-bitnet model
// rewritten under each name (keys renamed). Checks: it loads with that arch,
// its logits equal those of the same weights under arch "bitnet" with chimera's
// bitnet.ffn_activation = "relu2" switch bit for bit, and differ from the SiLU
// graph of plain "bitnet" (so the name really changes the activation).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "format/gguf/gguf.h"
#include "models/context.h"
#include "models/model.h"
#include "test_util.h"

namespace chimera::test {
namespace {

// tiny-bitnet with general.architecture = arch and "bitnet." keys moved to "arch.";
// extra keys appended.
std::string rewrite_arch(const std::string& src, const std::string& arch,
                         const std::vector<std::pair<std::string, format::GgufValue>>& extra = {}) {
  auto g = format::GgufFile::open(src);
  EXPECT_TRUE(g.is_ok());
  format::GgufWriter w;
  for (const auto& [k, v] : (*g)->metadata()) {
    if (k == "general.architecture") w.set(k, format::GgufValue::from_string(arch));
    else if (k.rfind("bitnet.", 0) == 0) w.set(arch + k.substr(6), v);
    else w.set(k, v);
  }
  for (const auto& [k, v] : extra) w.set(k, v);
  for (const auto& t : (*g)->tensors()) EXPECT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
  const std::string out = temp_path("bitnet-arch-" + arch + ".gguf");
  EXPECT_TRUE(w.write(out).is_ok());
  return out;
}

std::vector<float> logits(const std::string& path, std::string* arch) {
  auto m = models::load_model(path);
  EXPECT_TRUE(m.is_ok()) << path << ": " << m.status().message();
  if (!m) return {};
  *arch = (*m)->info().arch;
  const std::vector<int32_t> ids = {1, 9038, 2501, 263, 931, 29892};
  std::vector<int32_t> in;
  for (int32_t t : ids) in.push_back(t % (int32_t)(*m)->info().n_vocab);
  models::Context ctx = (*m)->new_context();
  auto st = ctx.new_state(64);
  std::vector<float> out(in.size() * (size_t)(*m)->info().n_vocab);
  EXPECT_TRUE(ctx.forward(*st, in.data(), (int64_t)in.size(), models::Logits::kAll, out.data(), nullptr).is_ok());
  return out;
}

TEST(BitnetArch, MicrosoftNamesSelectSquaredRelu) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string src = shared + "/golden/models/tiny-bitnet-TQ2_0.gguf";
  std::string a_silu, a_relu2;
  const std::vector<float> silu = logits(src, &a_silu);
  EXPECT_EQ(a_silu, "bitnet");
  const std::string relu2_path =
      rewrite_arch(src, "bitnet", {{"bitnet.ffn_activation", format::GgufValue::from_string("relu2")}});
  const std::vector<float> relu2 = logits(relu2_path, &a_relu2);
  ASSERT_EQ(relu2.size(), silu.size());
  double diff = 0;
  for (size_t i = 0; i < silu.size(); ++i) diff = std::max(diff, (double)std::fabs(silu[i] - relu2[i]));
  EXPECT_GT(diff, 1e-2) << "relu2 and SiLU graphs should differ";
  for (const char* arch : {"bitnet-b1.58", "bitnet-25"}) {
    const std::string p = rewrite_arch(src, arch);
    std::string got_arch;
    const std::vector<float> l = logits(p, &got_arch);
    EXPECT_EQ(got_arch, arch);
    ASSERT_EQ(l.size(), relu2.size());
    EXPECT_EQ(std::memcmp(l.data(), relu2.data(), l.size() * sizeof(float)), 0) << arch;
    std::remove(p.c_str());
  }
  std::remove(relu2_path.c_str());
}

}  // namespace
}  // namespace chimera::test
