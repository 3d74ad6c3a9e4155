// Expert placement acting on the mmap'd GGUF: the computed slices are exactly
// the expert slices the MoE block binds (same pointers, same sizes, the three
// tensors tiled without gaps); page rounding widens hot ranges and narrows cold
// ones; the plan JSON `chimera experts` writes is read back tier for tier;
// wrong plans are clear errors; applying a plan reports every expert once.
#include <gtest/gtest.h>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "layers/moe.h"
#include "runtime/expert_placement.h"
#include "runtime/expert_stats.h"
#include "test_util.h"

namespace chimera::runtime {
namespace {

TEST(ExpertPlacement, SlicesMatchTheBoundExpertTensors) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto g = format::GgufFile::open(shared + "/golden/models/tiny-phimoe-hf.gguf");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto slices = expert_slices(**g);
  ASSERT_TRUE(slices.is_ok()) << slices.status().message();
  const int64_t n_layer = (*g)->get_int("phimoe.block_count").value();
  const int64_t E = (*g)->get_int("phimoe.expert_count").value();
  const int64_t d = (*g)->get_int("phimoe.embedding_length").value();
  const int64_t ff = (*g)->get_int("phimoe.feed_forward_length").value();
  ASSERT_EQ((int64_t)slices->size(), n_layer * 3 * E);
  size_t i = 0;
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const struct {
      const char* name;
      int64_t cols, rows;
    } projs[] = {{"ffn_gate_exps", d, ff}, {"ffn_up_exps", d, ff}, {"ffn_down_exps", ff, d}};
    for (const auto& p : projs) {
      auto bound = layers::bind_expert_tensor(**g, b + p.name + ".weight", p.cols, p.rows, E);
      ASSERT_TRUE(bound.is_ok()) << bound.status().message();
      const format::GgufTensorInfo* t = (*g)->find_tensor(b + p.name + ".weight");
      for (int64_t e = 0; e < E; ++e, ++i) {
        const ExpertSlice& s = (*slices)[i];
        EXPECT_EQ(s.layer, l);
        EXPECT_EQ(s.expert, e);
        EXPECT_EQ(s.tensor, b + p.name + ".weight");
        EXPECT_EQ(s.data, static_cast<const uint8_t*>(bound->expert(e).data)) << s.tensor << " expert " << e;
        EXPECT_EQ(s.bytes, bound->expert_bytes);
        // Tiled without gaps: the last slice ends where the tensor ends.
        if (e == E - 1) {
          EXPECT_EQ(s.data + s.bytes, t->data + t->n_bytes);
        }
      }
    }
  }
}

TEST(ExpertPlacement, PageRangesWidenHotAndNarrowCold) {
  const size_t page = 4096;
  const uint8_t* base = reinterpret_cast<const uint8_t*>(uintptr_t{1} << 30);
  // A slice from 100 bytes into page 0 to 200 bytes into page 3.
  const uint8_t* p = base + 100;
  const size_t n = 3 * page + 100;
  PageRange out = page_range(p, n, page, true), in = page_range(p, n, page, false);
  EXPECT_EQ(out.begin, reinterpret_cast<uintptr_t>(base));
  EXPECT_EQ(out.end, reinterpret_cast<uintptr_t>(base) + 4 * page);
  EXPECT_EQ(in.begin, reinterpret_cast<uintptr_t>(base) + page);
  EXPECT_EQ(in.end, reinterpret_cast<uintptr_t>(base) + 3 * page);
  // Aligned slices are unchanged either way; a slice inside one page has no inner pages.
  EXPECT_EQ(page_range(base, 2 * page, page, true).bytes(), 2 * page);
  EXPECT_EQ(page_range(base, 2 * page, page, false).bytes(), 2 * page);
  EXPECT_EQ(page_range(base + 10, 100, page, false).bytes(), 0u);
  EXPECT_EQ(page_range(base + 10, 100, page, true).bytes(), page);
}

// A plan written by the same code `chimera experts --budget-gb` uses.
std::string write_plan(const std::string& name, int64_t n_layer, int64_t E, uint64_t expert_bytes, uint64_t budget,
                       PlacementPlan* plan_out) {
  ExpertStatsCollector s;
  for (int64_t l = 0; l < n_layer; ++l) {
    std::vector<int32_t> e;
    std::vector<float> w;
    for (int64_t t = 0; t < 20; ++t) {
      e.push_back((int32_t)((t * t + l) % E));
      e.push_back((int32_t)((t * t + l + 1) % E));
      w.push_back(1.f);
      w.push_back(1.f);
    }
    s.on_routing(l, 20, 2, E, e.data(), w.data());
  }
  PlacementOptions o;
  o.budget_bytes = budget;
  auto plan = plan_placement(s, std::vector<uint64_t>((size_t)n_layer, expert_bytes), o);
  EXPECT_TRUE(plan.is_ok());
  *plan_out = *plan;
  const std::string path = test::temp_path(name);
  EXPECT_TRUE(write_text_file(path, stats_json(s, &*plan)).is_ok());
  return path;
}

TEST(ExpertPlacement, ReadsThePlanTierForTier) {
  PlacementPlan plan;
  const std::string path = write_plan("placement-plan.json", 2, 4, 1000, 3500, &plan);
  auto tiers = read_placement_tiers(path, {4, 4});
  ASSERT_TRUE(tiers.is_ok()) << tiers.status().message();
  ASSERT_EQ(tiers->size(), 2u);
  EXPECT_EQ(*tiers, plan.tier);
  int64_t res = 0, pre = 0;
  for (const auto& l : *tiers)
    for (ExpertTier t : l) {
      res += t == ExpertTier::kResident;
      pre += t == ExpertTier::kPrefetch;
    }
  EXPECT_EQ(res, plan.n_resident());
  EXPECT_EQ(pre, plan.n_prefetch());
  EXPECT_GT(res, 0);
}

TEST(ExpertPlacement, WrongPlansAreClearErrors) {
  PlacementPlan plan;
  const std::string path = write_plan("placement-plan-big.json", 2, 4, 1000, 3500, &plan);
  auto fewer = read_placement_tiers(path, {2, 2});  // a model with fewer experts
  ASSERT_FALSE(fewer.is_ok());
  EXPECT_NE(fewer.status().message().find("does not exist"), std::string::npos);
  const std::string no_plan = test::temp_path("placement-noplan.json");
  ASSERT_TRUE(write_text_file(no_plan, "{\"layers\": []}\n").is_ok());
  auto r = read_placement_tiers(no_plan, {4});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("placement"), std::string::npos);
  EXPECT_FALSE(read_placement_tiers(test::temp_path("placement-missing.json"), {4}).is_ok());
}

TEST(ExpertPlacement, ApplyOnTheMappedModelReportsEveryExpertOnce) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto g = format::GgufFile::open(shared + "/golden/models/tiny-phimoe-hf.gguf");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const int64_t n_layer = (*g)->get_int("phimoe.block_count").value();
  const int64_t E = (*g)->get_int("phimoe.expert_count").value();
  auto slices = expert_slices(**g);
  ASSERT_TRUE(slices.is_ok());
  const uint64_t eb = 3 * (*slices)[0].bytes;
  PlacementPlan plan;
  const std::string path = write_plan("placement-apply.json", n_layer, E, eb, 3 * eb, &plan);
  auto rep = apply_placement_file(**g, path, /*lock=*/false);
  ASSERT_TRUE(rep.is_ok()) << rep.status().message();
  EXPECT_EQ(rep->resident, plan.n_resident());
  EXPECT_EQ(rep->prefetch, plan.n_prefetch());
  EXPECT_EQ(rep->resident + rep->prefetch + rep->cold, n_layer * E);
  EXPECT_GE(rep->willneed_bytes, (uint64_t)(rep->resident + rep->prefetch) * eb);
  EXPECT_EQ(rep->locked_bytes, 0u);
  EXPECT_FALSE(rep->summary().empty());
}

}  // namespace
}  // namespace chimera::runtime
