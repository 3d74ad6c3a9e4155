// Acting on an expert placement plan (the `placement` object `chimera experts
// --budget-gb` writes): the experts of a MoE GGUF are byte slices of the
// memory-mapped file — expert e of layer L's tensor ffn_{gate,up,down}_exps
// (format/gguf/tensor_names.h: tn::kFfn{Gate,Up,Down}Exps) is bytes
// [e·S, (e+1)·S) of that tensor, S = tensor bytes / n_expert. Applying a plan
// advises the kernel per slice:
//   resident: madvise(MADV_WILLNEED) (read ahead now), then mlock when the
//             process may lock memory (RLIMIT_MEMLOCK / CAP_IPC_LOCK); a
//             refused lock is counted, not an error;
//   prefetch: madvise(MADV_WILLNEED);
//   cold:     madvise(MADV_COLD) (first to be reclaimed under memory pressure;
//             the mapping is read-only and file-backed, so nothing is lost).
// Pages are 4 KiB and slices are not page-aligned: WILLNEED/mlock ranges are
// widened to whole pages (a shared boundary page is harmless to keep), COLD
// ranges are narrowed to the pages entirely inside the slice, so advice on a
// cold expert never touches a page of a resident neighbour.
//
// The advice changes only what stays in memory, never results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/memory.h"  // page_range
#include "core/status.h"
#include "format/gguf/gguf.h"
#include "runtime/expert_stats.h"

namespace chimera::runtime {

// One expert's bytes in one of its three tensors.
struct ExpertSlice {
  int64_t layer = 0, expert = 0;
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  std::string tensor;  // its GGUF name: tn::at(tn::kFfnUpExps, layer), ...
};

// Every expert slice of the file: for each layer L with expert tensors
// (tn::kFfn{Gate,Up,Down}Exps), n_expert slices per tensor (in gate, up,
// down order).
// Errors on a tensor whose byte size is not a multiple of its expert count.
Result<std::vector<ExpertSlice>> expert_slices(const format::GgufFile& g);

// Tier per [layer][expert] read from a stats/plan JSON (`placement.resident`
// and `placement.prefetch`, lists of expert ids per layer); everything not
// listed is cold. Errors: unreadable file, no `placement` object, ids out of
// range for `n_expert_per_layer` (0 = no MoE block in that layer).
Result<std::vector<std::vector<ExpertTier>>> read_placement_tiers(const std::string& json_path,
                                                                  const std::vector<int64_t>& n_expert_per_layer);

struct PlacementReport {
  int64_t resident = 0, prefetch = 0, cold = 0;  // experts per tier
  uint64_t willneed_bytes = 0, locked_bytes = 0, cold_bytes = 0;
  int64_t lock_refused = 0;   // mlock calls refused (EPERM/ENOMEM/EAGAIN): residency is advice only
  int64_t advice_failed = 0;  // madvise calls the kernel rejected (e.g. MADV_COLD before Linux 5.4)
  std::string summary() const;
};

// Applies tiers to the slices (see the header comment). `lock` false skips mlock.
PlacementReport apply_placement(const std::vector<ExpertSlice>& slices,
                                const std::vector<std::vector<ExpertTier>>& tiers, bool lock = true);

// Reads the plan, checks it against the file's experts, applies it.
Result<PlacementReport> apply_placement_file(const format::GgufFile& g, const std::string& json_path,
                                             bool lock = true);

}  // namespace chimera::runtime
