// Expert statistics implementation: accumulation, balance figures, the greedy
// placement plan, trace replay and the JSON / CSV / heat-map renderers.
// Everything is integer counting over the recorded routings, so the plan's
// prediction and the replay agree exactly on the same trace.
#include "runtime/expert_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <nlohmann/json.hpp>

namespace chimera::runtime {

void ExpertStatsCollector::on_routing(int64_t layer, int64_t n_tokens, int64_t k, int64_t n_expert,
                                      const int32_t* experts, const float* weights) {
  if (layer < 0 || n_tokens <= 0 || k <= 0 || n_expert <= 0) return;
  std::lock_guard<std::mutex> lk(mu_);
  if ((int64_t)layers_.size() <= layer) layers_.resize((size_t)layer + 1);
  Layer& L = layers_[(size_t)layer];
  if (L.n_expert == 0) {
    L.n_expert = n_expert;
    L.k = k;
    L.count.assign((size_t)n_expert, 0);
    L.mass.assign((size_t)n_expert, 0.0);
  }
  for (int64_t r = 0; r < n_tokens * k; ++r) {
    const int32_t e = experts[r];
    if (e < 0 || e >= L.n_expert) continue;  // cannot happen for a valid router; never index out of range
    L.count[(size_t)e] += 1;
    L.mass[(size_t)e] += weights[r];
  }
  if (keep_trace_) L.trace.insert(L.trace.end(), experts, experts + n_tokens * k);
  L.tokens += n_tokens;
}

int64_t ExpertStatsCollector::total_routings() const {
  int64_t n = 0;
  for (const Layer& L : layers_) n += L.tokens * L.k;
  return n;
}

int64_t hot_set_size(const std::vector<int64_t>& counts, double fraction) {
  std::vector<int64_t> c = counts;
  std::sort(c.begin(), c.end(), std::greater<>());
  const int64_t total = std::accumulate(c.begin(), c.end(), (int64_t)0);
  if (total == 0) return 0;
  int64_t cum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    cum += c[i];
    // Integer-exact test of cum / total >= fraction (fraction given to 1e-9).
    if ((long double)cum >= (long double)fraction * (long double)total - 1e-9L) return (int64_t)i + 1;
  }
  return (int64_t)c.size();
}

std::vector<LayerBalance> layer_balance(const ExpertStatsCollector& s) {
  std::vector<LayerBalance> out;
  for (size_t l = 0; l < s.layers().size(); ++l) {
    const auto& L = s.layers()[l];
    if (L.n_expert == 0) continue;
    LayerBalance b;
    b.layer = (int64_t)l;
    b.n_expert = L.n_expert;
    b.tokens = L.tokens;
    b.routings = L.tokens * L.k;
    const double mean = (double)b.routings / (double)L.n_expert;
    double var = 0, h = 0;
    for (int64_t c : L.count) {
      var += ((double)c - mean) * ((double)c - mean);
      if (c > 0 && b.routings > 0) {
        const double p = (double)c / (double)b.routings;
        h -= p * std::log(p);
      }
    }
    var /= (double)L.n_expert;
    b.cv = mean > 0 ? std::sqrt(var) / mean : 0.0;
    b.norm_entropy = L.n_expert > 1 ? h / std::log((double)L.n_expert) : 1.0;
    b.hot50 = hot_set_size(L.count, 0.50);
    b.hot90 = hot_set_size(L.count, 0.90);
    b.hot99 = hot_set_size(L.count, 0.99);
    out.push_back(b);
  }
  return out;
}

int64_t PlacementPlan::n_resident() const {
  int64_t n = 0;
  for (const auto& t : tier) n += std::count(t.begin(), t.end(), ExpertTier::kResident);
  return n;
}
int64_t PlacementPlan::n_prefetch() const {
  int64_t n = 0;
  for (const auto& t : tier) n += std::count(t.begin(), t.end(), ExpertTier::kPrefetch);
  return n;
}

Result<PlacementPlan> plan_placement(const ExpertStatsCollector& s, const std::vector<uint64_t>& expert_bytes,
                                     const PlacementOptions& o) {
  const auto& Ls = s.layers();
  if (expert_bytes.size() < Ls.size())
    return invalid_argument("placement: expert sizes are known for " + std::to_string(expert_bytes.size()) +
                            " layers, statistics cover " + std::to_string(Ls.size()));
  if (o.prefetch_slots < 0) return invalid_argument("placement: prefetch slots must be >= 0");
  PlacementPlan p;
  p.budget_bytes = o.budget_bytes;
  p.tier.resize(Ls.size());
  struct Item {
    int64_t count;
    size_t layer;
    int64_t expert;
  };
  std::vector<Item> items;
  uint64_t reserve = 0;
  for (size_t l = 0; l < Ls.size(); ++l) {
    p.tier[l].assign((size_t)Ls[l].n_expert, ExpertTier::kCold);
    p.total_expert_bytes += expert_bytes[l] * (uint64_t)Ls[l].n_expert;
    p.routings += Ls[l].tokens * Ls[l].k;
    for (int64_t e = 0; e < Ls[l].n_expert; ++e) items.push_back({Ls[l].count[(size_t)e], l, e});
    reserve += expert_bytes[l] * (uint64_t)std::min<int64_t>(o.prefetch_slots, Ls[l].n_expert);
  }
  // Staging takes at most a quarter of the budget (residents are worth more:
  // a hit needs no read at all); none is needed when everything fits.
  const bool all_fit = p.total_expert_bytes <= o.budget_bytes;
  if (all_fit || reserve > o.budget_bytes / 4) reserve = 0;
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.count > b.count; });
  uint64_t left = o.budget_bytes - reserve;
  for (const Item& it : items) {
    const uint64_t sz = expert_bytes[it.layer];
    if (sz > left) continue;
    left -= sz;
    p.resident_bytes += sz;
    p.tier[it.layer][(size_t)it.expert] = ExpertTier::kResident;
    p.resident_routings += it.count;
  }
  if (reserve > 0) {
    // Per layer, the hottest non-resident experts fill the staging slots.
    std::vector<int64_t> used(Ls.size(), 0);
    for (const Item& it : items) {
      if (p.tier[it.layer][(size_t)it.expert] != ExpertTier::kCold || used[it.layer] >= o.prefetch_slots) continue;
      ++used[it.layer];
      p.tier[it.layer][(size_t)it.expert] = ExpertTier::kPrefetch;
      p.prefetch_bytes += expert_bytes[it.layer];
      p.prefetch_routings += it.count;
    }
  }
  p.expected_hit_rate = p.routings ? (double)p.resident_routings / (double)p.routings : 0.0;
  p.expected_staged_rate =
      p.routings ? (double)(p.resident_routings + p.prefetch_routings) / (double)p.routings : 0.0;
  return p;
}

Result<ReplayResult> replay(const ExpertStatsCollector& s, const PlacementPlan& plan) {
  if (!s.has_trace()) return invalid_argument("replay needs a collector that keeps the trace");
  if (plan.tier.size() != s.layers().size()) return invalid_argument("replay: plan and trace have different layers");
  ReplayResult r;
  for (size_t l = 0; l < s.layers().size(); ++l) {
    const auto& tiers = plan.tier[l];
    for (int32_t e : s.layers()[l].trace) {
      ++r.routings;
      if (e < 0 || (size_t)e >= tiers.size()) continue;
      r.hits += tiers[(size_t)e] == ExpertTier::kResident;
      r.staged += tiers[(size_t)e] != ExpertTier::kCold;
    }
  }
  return r;
}

namespace {
const char* tier_name(ExpertTier t) {
  switch (t) {
    case ExpertTier::kResident: return "resident";
    case ExpertTier::kPrefetch: return "prefetch";
    default: return "cold";
  }
}
ExpertTier tier_of(const PlacementPlan* plan, size_t l, int64_t e) {
  if (!plan || l >= plan->tier.size() || (size_t)e >= plan->tier[l].size()) return ExpertTier::kCold;
  return plan->tier[l][(size_t)e];
}
}  // namespace

std::string stats_json(const ExpertStatsCollector& s, const PlacementPlan* plan) {
  nlohmann::json j;
  j["total_routings"] = s.total_routings();
  nlohmann::json layers = nlohmann::json::array();
  const auto bal = layer_balance(s);
  for (const LayerBalance& b : bal) {
    const auto& L = s.layers()[(size_t)b.layer];
    nlohmann::json lj;
    lj["layer"] = b.layer;
    lj["n_expert"] = b.n_expert;
    lj["k"] = L.k;
    lj["tokens"] = b.tokens;
    lj["routings"] = b.routings;
    lj["count"] = L.count;
    lj["weight_mass"] = L.mass;
    lj["cv"] = b.cv;
    lj["normalized_entropy"] = b.norm_entropy;
    lj["hot_set"] = {{"p50", b.hot50}, {"p90", b.hot90}, {"p99", b.hot99}};
    layers.push_back(lj);
  }
  j["layers"] = layers;
  if (plan) {
    nlohmann::json pj;
    pj["budget_bytes"] = plan->budget_bytes;
    pj["total_expert_bytes"] = plan->total_expert_bytes;
    pj["resident_bytes"] = plan->resident_bytes;
    pj["prefetch_bytes"] = plan->prefetch_bytes;
    pj["n_resident"] = plan->n_resident();
    pj["n_prefetch"] = plan->n_prefetch();
    pj["expected_hit_rate"] = plan->expected_hit_rate;
    pj["expected_staged_rate"] = plan->expected_staged_rate;
    nlohmann::json res = nlohmann::json::array(), pre = nlohmann::json::array();
    for (size_t l = 0; l < plan->tier.size(); ++l) {
      nlohmann::json rl = nlohmann::json::array(), pl = nlohmann::json::array();
      for (size_t e = 0; e < plan->tier[l].size(); ++e) {
        if (plan->tier[l][e] == ExpertTier::kResident) rl.push_back(e);
        if (plan->tier[l][e] == ExpertTier::kPrefetch) pl.push_back(e);
      }
      res.push_back(rl);
      pre.push_back(pl);
    }
    pj["resident"] = res;
    pj["prefetch"] = pre;
    j["placement"] = pj;
  }
  return j.dump(1) + "\n";
}

std::string stats_csv(const ExpertStatsCollector& s, const PlacementPlan* plan) {
  std::string out = "layer,expert,count,share,weight_mass,mean_weight,tier\n";
  char buf[256];
  for (size_t l = 0; l < s.layers().size(); ++l) {
    const auto& L = s.layers()[l];
    const int64_t routings = L.tokens * L.k;
    for (int64_t e = 0; e < L.n_expert; ++e) {
      const int64_t c = L.count[(size_t)e];
      std::snprintf(buf, sizeof buf, "%zu,%lld,%lld,%.6f,%.6f,%.6f,%s\n", l, (long long)e, (long long)c,
                    routings ? (double)c / (double)routings : 0.0, L.mass[(size_t)e],
                    c ? L.mass[(size_t)e] / (double)c : 0.0, tier_name(tier_of(plan, l, e)));
      out += buf;
    }
  }
  return out;
}

std::string heat_map(const ExpertStatsCollector& s) {
  static const char kRamp[] = " .:-=+*#%@";  // 10 shades, ' ' = never chosen
  std::string out;
  char buf[256];
  int64_t max_e = 0;
  for (const auto& L : s.layers()) max_e = std::max(max_e, L.n_expert);
  std::snprintf(buf, sizeof buf, "expert heat map: shade = share of the layer's routings, relative to its hottest "
                "expert (' ' none, '@' hottest)\n");
  out += buf;
  std::string axis = "layer |";
  for (int64_t e = 0; e < max_e; ++e) axis += (char)('0' + e % 10);
  out += axis + "|    CV  entropy  hot50/90/99\n";
  for (const LayerBalance& b : layer_balance(s)) {
    const auto& L = s.layers()[(size_t)b.layer];
    const int64_t mx = *std::max_element(L.count.begin(), L.count.end());
    std::snprintf(buf, sizeof buf, "%5lld |", (long long)b.layer);
    out += buf;
    for (int64_t e = 0; e < max_e; ++e) {
      if (e >= L.n_expert) {
        out += ' ';
        continue;
      }
      const int64_t c = L.count[(size_t)e];
      const int shade = c == 0 || mx == 0 ? 0 : 1 + (int)std::min<int64_t>(8, (c * 9 - 1) / mx);
      out += kRamp[shade];
    }
    std::snprintf(buf, sizeof buf, "| %5.2f  %7.3f  %lld/%lld/%lld\n", b.cv, b.norm_entropy, (long long)b.hot50,
                  (long long)b.hot90, (long long)b.hot99);
    out += buf;
  }
  return out;
}

Result<std::unique_ptr<ExpertStatsSession>> ExpertStatsSession::attach(models::Model& m, bool keep_trace) {
  layers::MoeObservable* obs = m.moe();
  if (!obs) return invalid_argument("model architecture '" + m.info().arch + "' has no mixture-of-experts layers");
  std::unique_ptr<ExpertStatsSession> s(new ExpertStatsSession(obs, keep_trace));
  obs->set_moe_observer(&s->stats_);
  return s;
}

ExpertStatsSession::~ExpertStatsSession() { obs_->set_moe_observer(nullptr); }

Status ExpertStatsSession::write_json(const std::string& path, uint64_t budget_bytes) const {
  PlacementPlan plan;
  bool with_plan = false;
  if (budget_bytes > 0) {
    PlacementOptions po;
    po.budget_bytes = budget_bytes;
    CHIMERA_ASSIGN_OR_RETURN(plan, plan_placement(stats_, expert_bytes(), po));
    with_plan = true;
  }
  return write_text_file(path, stats_json(stats_, with_plan ? &plan : nullptr));
}

Status write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return io_error("cannot open '" + path + "' for writing");
  f.write(text.data(), (std::streamsize)text.size());
  if (!f) return io_error("cannot write '" + path + "'");
  return Status::ok();
}

}  // namespace chimera::runtime
