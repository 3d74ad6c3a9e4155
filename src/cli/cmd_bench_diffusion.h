// `chimera bench` on a masked diffusion LM (LLaDA, Dream): instead of
// prefill / decode it times whole diffusion generations — a random prompt of
// -p tokens, a canvas of -n tokens decoded with the shared diffusion options
// (--steps, --block-length, ...) — once per acceleration mode, and reports
// generated tokens/s, denoising steps/s, steps taken and model rows per step
// (canvas positions run through the network: what the caches save).
// EOS never stops a run, so every row generates exactly -n tokens.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "models/model.h"
#include "runtime/diffusion_options.h"

namespace chimera::cli {

struct DiffusionBenchMode {
  std::string name;  // "exact", "prefix", "dual", "dual+threshold", ...
  runtime::DiffusionOptions options;
};

// Parses --diffusion-modes: a comma-separated list of modes, each "exact" or
// "+"-joined parts from prefix, dual, threshold (e.g. "exact,prefix,
// dual+threshold"). Cache refresh, steps, block length, remasking and cfg come
// from `base`; a mode with "threshold" uses base.threshold, or 0.9 (Fast-dLLM's
// τ) when none was given. An empty list means: the options as given when they
// name any acceleration, else "exact,prefix,dual+threshold".
Result<std::vector<DiffusionBenchMode>> parse_diffusion_modes(const std::string& list,
                                                              const runtime::DiffusionOptions& base);

struct DiffusionBenchConfig {
  int64_t n_prompt = 32, n_gen = 128;
  int reps = 1;
  std::vector<DiffusionBenchMode> modes;
};

// One warm-up pass, then reps timed generations per mode; appends one JSON
// row per mode to *rows.
Status bench_diffusion(models::Model& m, const DiffusionBenchConfig& cfg, ThreadPool& pool, nlohmann::json* rows);

// Prints the rows as a markdown table ("md") or CSV ("csv").
void print_diffusion_rows(const nlohmann::json& rows, const std::string& format);

}  // namespace chimera::cli
