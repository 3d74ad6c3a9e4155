// Expert statistics for mixture-of-experts models: a MoeObserver that records
// every routing decision (per layer and expert: selection counts and routing
// weight mass, plus the full trace), the derived load-balance figures
// (coefficient of variation, normalised entropy, the smallest hot set covering
// 50/90/99% of routings), a placement plan for a memory budget (which experts
// to keep resident, which to stage for prefetch, with the expected hit rate),
// a replay of the recorded trace against a plan, and the renderers (JSON, CSV,
// terminal heat map).
//
// Invariants: counts of a layer sum to tokens(layer) × k; the plan is a static
// placement, so its predicted hit rate (resident routing share) equals the hit
// rate of replaying the same trace exactly (both are integer counts over the
// same routings). Collection costs nothing unless the collector is attached
// (models hold a null observer by default).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "layers/moe.h"
#include "models/model.h"

namespace chimera::runtime {

// on_routing is thread-safe (a mutex): the collector is attached to the model,
// so every context running on it reports here, possibly at the same time; a
// call's routings are recorded together, calls in the order they take the
// lock. Read the results (layers(), the functions below) once the contexts
// have stopped.
class ExpertStatsCollector final : public layers::MoeObserver {
 public:
  explicit ExpertStatsCollector(bool keep_trace = true) : keep_trace_(keep_trace) {}
  // Copies and moves take the recorded data (not while contexts report to either).
  ExpertStatsCollector(const ExpertStatsCollector& o) : keep_trace_(o.keep_trace_), layers_(o.layers_) {}
  ExpertStatsCollector(ExpertStatsCollector&& o) noexcept
      : keep_trace_(o.keep_trace_), layers_(std::move(o.layers_)) {}
  ExpertStatsCollector& operator=(const ExpertStatsCollector& o) {
    keep_trace_ = o.keep_trace_;
    layers_ = o.layers_;
    return *this;
  }
  ExpertStatsCollector& operator=(ExpertStatsCollector&& o) noexcept {
    keep_trace_ = o.keep_trace_;
    layers_ = std::move(o.layers_);
    return *this;
  }
  void on_routing(int64_t layer, int64_t n_tokens, int64_t k, int64_t n_expert, const int32_t* experts,
                  const float* weights) override;

  struct Layer {
    int64_t n_expert = 0, k = 0, tokens = 0;
    std::vector<int64_t> count;   // [n_expert] selections
    std::vector<double> mass;     // [n_expert] sum of routing weights
    std::vector<int32_t> trace;   // [tokens][k] chosen experts, in order (when keep_trace)
  };
  // Indexed by layer; layers that never routed have n_expert == 0.
  const std::vector<Layer>& layers() const { return layers_; }
  bool has_trace() const { return keep_trace_; }
  int64_t total_routings() const;
  void reset() { layers_.clear(); }

 private:
  bool keep_trace_;
  std::mutex mu_;  // on_routing
  std::vector<Layer> layers_;
};

// Load balance of one layer.
struct LayerBalance {
  int64_t layer = 0, n_expert = 0, tokens = 0, routings = 0;
  double cv = 0;            // std / mean of the selection counts (population std)
  double norm_entropy = 0;  // H(counts / routings) / ln(n_expert), 1 = perfectly even
  int64_t hot50 = 0, hot90 = 0, hot99 = 0;  // fewest experts covering >= 50/90/99% of routings
};
std::vector<LayerBalance> layer_balance(const ExpertStatsCollector& s);
// Smallest number of experts whose counts cover at least `fraction` of the total.
int64_t hot_set_size(const std::vector<int64_t>& counts, double fraction);

// Static placement for a memory budget.
enum class ExpertTier : uint8_t { kCold = 0, kPrefetch = 1, kResident = 2 };
struct PlacementOptions {
  uint64_t budget_bytes = 0;
  int64_t prefetch_slots = 1;  // staged experts per layer (reserved first when that costs <= budget / 4)
};
struct PlacementPlan {
  uint64_t budget_bytes = 0, resident_bytes = 0, prefetch_bytes = 0, total_expert_bytes = 0;
  std::vector<std::vector<ExpertTier>> tier;  // [layer][expert]
  int64_t routings = 0, resident_routings = 0, prefetch_routings = 0;
  double expected_hit_rate = 0;       // resident_routings / routings
  double expected_staged_rate = 0;    // (resident + prefetch) / routings
  int64_t n_resident() const;
  int64_t n_prefetch() const;
};
// expert_bytes[layer]: bytes of one expert of that layer (Model's
// MoeObservable::expert_bytes_per_layer()). Prefetch staging (prefetch_slots
// per layer, filled with the hottest non-resident experts) is reserved first
// when it costs at most a quarter of the budget and not everything fits.
// Residents are then chosen greedily by
// selection count (ties: lower layer, then lower expert), each taken while it
// fits in the budget left after the prefetch reservation.
Result<PlacementPlan> plan_placement(const ExpertStatsCollector& s, const std::vector<uint64_t>& expert_bytes,
                                     const PlacementOptions& o);

// Replays the recorded trace against a plan: each routing is a hit when its
// expert is resident, staged when resident or prefetch.
struct ReplayResult {
  int64_t routings = 0, hits = 0, staged = 0;
  double hit_rate() const { return routings ? (double)hits / (double)routings : 0.0; }
  double staged_rate() const { return routings ? (double)staged / (double)routings : 0.0; }
};
Result<ReplayResult> replay(const ExpertStatsCollector& s, const PlacementPlan& plan);

// Renderers. The JSON holds the counts, mass, balance and (when given) plan.
std::string stats_json(const ExpertStatsCollector& s, const PlacementPlan* plan);
// CSV: layer,expert,count,share,weight_mass,mean_weight,tier
std::string stats_csv(const ExpertStatsCollector& s, const PlacementPlan* plan);
// Per-layer heat map (one row per layer, one cell per expert, shade = share of
// that layer's routings relative to the layer's hottest expert) with CV,
// entropy and hot-set columns.
std::string heat_map(const ExpertStatsCollector& s);

// Attaches a collector to a MoE model (error when the model has no MoE
// blocks); detaches on destruction.
class ExpertStatsSession {
 public:
  static Result<std::unique_ptr<ExpertStatsSession>> attach(models::Model& m, bool keep_trace = true);
  ~ExpertStatsSession();
  const ExpertStatsCollector& stats() const { return stats_; }
  std::vector<uint64_t> expert_bytes() const { return obs_->expert_bytes_per_layer(); }
  // Writes stats_json (with a plan when budget_bytes > 0) to path.
  Status write_json(const std::string& path, uint64_t budget_bytes = 0) const;

 private:
  explicit ExpertStatsSession(layers::MoeObservable* obs, bool keep_trace) : obs_(obs), stats_(keep_trace) {}
  layers::MoeObservable* obs_;
  ExpertStatsCollector stats_;
};

Status write_text_file(const std::string& path, const std::string& text);

}  // namespace chimera::runtime
