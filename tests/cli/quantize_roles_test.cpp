// Quantization rules keyed on tensor-table roles (models/tensor_table.h)
// choose exactly the types the name patterns chose: for every synth model
// (8 layers, small vocabulary, plans only) and every mix, with and without
// roles; on the frozen quant-llama-Q4_K_M fixture (the types `chimera
// quantize` wrote before roles existed); and through quantize_model() on the
// granitehybrid fixture (Mamba-2, attention, MoE) with and without role_of.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "format/gguf/gguf.h"
#include "models/synth/synth.h"
#include "models/tensor_table.h"
#include "quant/quantize_model.h"
#include "test_util.h"

namespace chimera {
namespace {

using format::GgmlType;
using quant::TensorRole;

// What the mix rules choose for every tensor (F32 for the ones they leave alone).
std::vector<GgmlType> choices(const quant::QuantMix& mix, const std::vector<quant::TensorShape>& ts,
                              int64_t n_head, int64_t n_head_kv) {
  const quant::MixContext ctx = quant::make_mix_context(ts, n_head, n_head_kv);
  std::vector<GgmlType> v;
  for (const auto& t : ts) v.push_back(quant::is_quantizable(t) ? quant::choose_tensor_type(mix, ctx, t) : GgmlType::F32);
  return v;
}

TEST(QuantizeRoles, SameTypesAsNamesForEverySynthModel) {
  for (const auto& model : models::synth::synth_models()) {
    models::synth::SynthRequest req;
    req.like = std::string(model.name);
    req.n_layers = 8;
    req.n_vocab = 512;
    auto plan = models::synth::make_synth_plan(req);
    ASSERT_TRUE(plan.is_ok()) << model.name << ": " << plan.status().message();
    const std::string arch = plan->find("general.architecture")->s;
    const models::TensorTable* table = models::find_tensor_table(arch);
    auto head = [&](const char* k) {
      const auto* v = plan->find(arch + ".attention." + k);
      return v ? v->as_int().value_or(0) : 0;
    };
    std::vector<quant::TensorShape> by_role, by_name;
    size_t with_role = 0;
    for (const auto& t : plan->tensors) {
      by_role.push_back({t.name, t.ne, t.role});
      by_name.push_back({t.name, t.ne});
      if (t.role != TensorRole::kUnknown) ++with_role;
      // synth's roles are its table's
      if (table) {
        EXPECT_EQ(t.role, models::tensor_role(*table, t.name)) << model.name << " " << t.name;
      }
    }
    // Families with a table get a role on every tensor; the others none.
    EXPECT_EQ(with_role, table ? plan->tensors.size() : 0u) << model.name;
    for (const auto& mix : quant::quant_mixes()) {
      const auto a = choices(mix, by_role, head("head_count"), head("head_count_kv"));
      const auto b = choices(mix, by_name, head("head_count"), head("head_count_kv"));
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(a[i], b[i]) << model.name << " " << mix.name << " " << by_role[i].name << ": "
                              << format::ggml_type_name(a[i]) << " by role, " << format::ggml_type_name(b[i])
                              << " by name";
    }
  }
}

TEST(QuantizeRoles, FixtureQ4KMTypesUnchanged) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto g = format::GgufFile::open(shared + "/golden/models/quant-llama-Q4_K_M.gguf");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const models::TensorTable* table = models::find_tensor_table("llama");
  ASSERT_NE(table, nullptr);
  std::vector<quant::TensorShape> ts;
  for (const auto& t : (*g)->tensors()) {
    ts.push_back({t.name, t.ne, models::tensor_role(*table, t.name)});
    EXPECT_NE(ts.back().role, TensorRole::kUnknown) << t.name;
  }
  const auto got = choices(*quant::find_quant_mix("Q4_K_M"), ts, 4, 2);
  size_t n_q6k = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(got[i], (*g)->tensors()[i].type) << ts[i].name;
    n_q6k += got[i] == GgmlType::Q6_K;
  }
  EXPECT_EQ(n_q6k, 3u);  // tied head + the use_more_bits attn_v / ffn_down of layer 1
}

std::map<std::string, GgmlType> quantize_types(const std::string& in, const std::string& out, bool roles) {
  quant::QuantizeOptions o;
  size_t looked_up = 0;
  if (roles)
    o.role_of = [&](std::string_view arch, std::string_view name) {
      ++looked_up;
      const models::TensorTable* t = models::find_tensor_table(arch);
      return t ? models::tensor_role(*t, name) : TensorRole::kUnknown;
    };
  auto r = quant::quantize_model(in, out, *quant::find_quant_mix("Q4_K_M"), o);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  auto g = format::GgufFile::open(out);
  EXPECT_TRUE(g.is_ok());
  std::map<std::string, GgmlType> types;
  if (!g.is_ok()) return types;
  for (const auto& t : (*g)->tensors()) types[t.name] = t.type;
  if (roles) {
    EXPECT_EQ(looked_up, types.size());
  }
  return types;
}

TEST(QuantizeRoles, DriverWithRolesWritesTheSameTypes) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string in = shared + "/golden/models/tiny-granitehybrid.gguf";
  const auto by_role = quantize_types(in, test::temp_path("roles-granite-role.gguf"), true);
  const auto by_name = quantize_types(in, test::temp_path("roles-granite-name.gguf"), false);
  ASSERT_FALSE(by_role.empty());
  EXPECT_EQ(by_role, by_name);
}

}  // namespace
}  // namespace chimera
