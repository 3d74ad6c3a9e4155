// Expert placement: slices from the GGUF tensor table, tiers from the plan
// JSON, page-granular madvise/mlock per slice.
#include "runtime/expert_placement.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "format/gguf/tensor_names.h"

namespace chimera::runtime {

Result<std::vector<ExpertSlice>> expert_slices(const format::GgufFile& g) {
  std::vector<ExpertSlice> out;
  const std::string arch = g.get_string("general.architecture").value_or("");
  const int64_t n_layer = g.get_int(arch + ".block_count").value_or(0);
  for (int64_t l = 0; l < n_layer; ++l) {
    for (const char* pattern : {format::tn::kFfnGateExps, format::tn::kFfnUpExps, format::tn::kFfnDownExps}) {
      const std::string name = format::tn::at(pattern, l);
      const format::GgufTensorInfo* t = g.find_tensor(name);
      if (!t) continue;
      const int64_t n_expert = t->dim(2);
      if (n_expert < 1 || t->n_bytes % (uint64_t)n_expert != 0)
        return invalid_argument("tensor '" + name + "' (" + std::to_string(t->n_bytes) +
                                " bytes) does not split into " + std::to_string(n_expert) + " equal expert slices");
      const size_t s = (size_t)(t->n_bytes / (uint64_t)n_expert);
      for (int64_t e = 0; e < n_expert; ++e) out.push_back({l, e, t->data + (size_t)e * s, s, name});
    }
  }
  return out;
}

Result<std::vector<std::vector<ExpertTier>>> read_placement_tiers(const std::string& path,
                                                                  const std::vector<int64_t>& n_expert) {
  std::ifstream f(path);
  if (!f) return io_error("cannot read placement plan '" + path + "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    return invalid_argument("placement plan '" + path + "' is not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("placement") || !j["placement"].is_object())
    return invalid_argument("'" + path + "' has no \"placement\" object (write it with `chimera experts --budget-gb G -o " +
                            path + "`)");
  std::vector<std::vector<ExpertTier>> tiers(n_expert.size());
  for (size_t l = 0; l < n_expert.size(); ++l) tiers[l].assign((size_t)n_expert[l], ExpertTier::kCold);
  const nlohmann::json& p = j["placement"];
  for (const auto& [key, tier] : {std::pair{"prefetch", ExpertTier::kPrefetch}, {"resident", ExpertTier::kResident}}) {
    if (!p.contains(key)) continue;
    const nlohmann::json& lists = p[key];
    if (!lists.is_array()) return invalid_argument("placement." + std::string(key) + " must be an array of arrays");
    for (size_t l = 0; l < lists.size(); ++l) {
      if (!lists[l].is_array())
        return invalid_argument("placement." + std::string(key) + "[" + std::to_string(l) + "] must be an array");
      for (const auto& v : lists[l]) {
        if (!v.is_number_integer())
          return invalid_argument("placement." + std::string(key) + "[" + std::to_string(l) + "] holds a non-integer");
        const int64_t e = v.get<int64_t>();
        if (l >= n_expert.size() || e < 0 || e >= n_expert[l])
          return invalid_argument("placement." + std::string(key) + ": expert " + std::to_string(e) + " of layer " +
                                  std::to_string(l) + " does not exist in this model (plan made for another model?)");
        tiers[l][(size_t)e] = tier;
      }
    }
  }
  return tiers;
}

std::string PlacementReport::summary() const {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "expert placement: %lld resident, %lld prefetch, %lld cold experts; %.1f MB read ahead, "
                "%.1f MB locked%s, %.1f MB advised cold%s",
                (long long)resident, (long long)prefetch, (long long)cold, willneed_bytes / 1e6, locked_bytes / 1e6,
                lock_refused ? " (mlock refused: raise RLIMIT_MEMLOCK to pin)" : "", cold_bytes / 1e6,
                advice_failed ? " (some madvise calls were rejected)" : "");
  return buf;
}

PlacementReport apply_placement(const std::vector<ExpertSlice>& slices,
                                const std::vector<std::vector<ExpertTier>>& tiers, bool lock) {
  PlacementReport r;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  bool lock_ok = lock;
  for (const ExpertSlice& s : slices) {
    ExpertTier t = ExpertTier::kCold;
    if ((size_t)s.layer < tiers.size() && (size_t)s.expert < tiers[(size_t)s.layer].size())
      t = tiers[(size_t)s.layer][(size_t)s.expert];
    if (t == ExpertTier::kCold) {
      const PageRange pr = page_range(s.data, s.bytes, page, /*outward=*/false);
      if (pr.bytes() == 0) continue;
#ifdef MADV_COLD
      if (madvise(reinterpret_cast<void*>(pr.begin), pr.bytes(), MADV_COLD) == 0) r.cold_bytes += pr.bytes();
      else ++r.advice_failed;
#else
      ++r.advice_failed;
#endif
      continue;
    }
    const PageRange pr = page_range(s.data, s.bytes, page, /*outward=*/true);
    if (madvise(reinterpret_cast<void*>(pr.begin), pr.bytes(), MADV_WILLNEED) == 0) r.willneed_bytes += pr.bytes();
    else ++r.advice_failed;
    if (t == ExpertTier::kResident && lock_ok) {
      if (mlock(reinterpret_cast<void*>(pr.begin), pr.bytes()) == 0) {
        r.locked_bytes += pr.bytes();
      } else {
        ++r.lock_refused;
        if (errno == EPERM) lock_ok = false;  // not allowed at all: stop trying
      }
    }
  }
  // Expert counts per tier (a slice per projection; count each expert once).
  for (const auto& layer : tiers)
    for (ExpertTier t : layer) (t == ExpertTier::kResident ? r.resident : t == ExpertTier::kPrefetch ? r.prefetch : r.cold)++;
  return r;
}

Result<PlacementReport> apply_placement_file(const format::GgufFile& g, const std::string& json_path, bool lock) {
  CHIMERA_ASSIGN_OR_RETURN(auto slices, expert_slices(g));
  if (slices.empty()) return invalid_argument("--expert-placement: the model has no expert tensors (not a MoE model)");
  std::vector<int64_t> n_expert;
  for (const ExpertSlice& s : slices) {
    if ((size_t)s.layer >= n_expert.size()) n_expert.resize((size_t)s.layer + 1, 0);
    n_expert[(size_t)s.layer] = std::max(n_expert[(size_t)s.layer], s.expert + 1);
  }
  CHIMERA_ASSIGN_OR_RETURN(auto tiers, read_placement_tiers(json_path, n_expert));
  return apply_placement(slices, tiers, lock);
}

}  // namespace chimera::runtime
