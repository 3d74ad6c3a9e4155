// Diffusion rows of `chimera bench` (see cmd_bench_diffusion.h).
#include "cli/cmd_bench_diffusion.h"

#include <cstdio>
#include <random>
#include <sstream>

#include "cli/bench_stats.h"
#include "cli/common.h"
#include "core/memory.h"
#include "core/timer.h"
#include "kernels/dispatch.h"
#include "runtime/diffusion.h"

namespace chimera::cli {
namespace {

constexpr double kDefaultThreshold = 0.9;  // Fast-dLLM's τ

std::string mode_name(const runtime::DiffusionOptions& d) {
  std::string s = d.dual_cache ? "dual" : d.prefix_cache ? "prefix" : "exact";
  if (d.threshold > 0) s = (s == "exact" ? "" : s + "+") + "threshold";
  return s;
}

}  // namespace

Result<std::vector<DiffusionBenchMode>> parse_diffusion_modes(const std::string& list,
                                                              const runtime::DiffusionOptions& base) {
  std::vector<DiffusionBenchMode> modes;
  const bool accelerated = base.prefix_cache || base.dual_cache || base.threshold > 0;
  if (list.empty() && accelerated) {
    modes.push_back({mode_name(base), base});
    return modes;
  }
  std::stringstream ss(list.empty() ? std::string("exact,prefix,dual+threshold") : list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    runtime::DiffusionOptions d = base;
    d.prefix_cache = d.dual_cache = false;
    d.threshold = 0;
    if (item != "exact") {
      std::stringstream parts(item);
      std::string part;
      while (std::getline(parts, part, '+')) {
        if (part == "prefix") d.prefix_cache = true;
        else if (part == "dual") d.dual_cache = true;
        else if (part == "threshold") d.threshold = base.threshold > 0 ? base.threshold : kDefaultThreshold;
        else
          return invalid_argument("--diffusion-modes: unknown mode '" + item +
                                  "' (use exact, or prefix / dual / threshold joined by '+')");
      }
    }
    modes.push_back({mode_name(d), d});
  }
  if (modes.empty()) return invalid_argument("--diffusion-modes names no mode");
  return modes;
}

Status bench_diffusion(models::Model& m, const DiffusionBenchConfig& cfg, ThreadPool& pool, nlohmann::json* rows) {
  CHIMERA_ASSIGN_OR_RETURN(const models::DiffusionSpec spec, models::diffusion_spec(m));
  const int64_t nv = m.info().n_vocab;
  std::mt19937 rng(1234);
  std::vector<int32_t> prompt((size_t)cfg.n_prompt);
  for (auto& t : prompt) {
    do t = (int32_t)(rng() % (uint32_t)nv);
    while (t == spec.mask_id);
  }
  const int64_t n_ctx = cfg.n_prompt + cfg.n_gen;
  CHIMERA_ASSIGN_OR_RETURN(models::Context ctx, new_context(m));
  runtime::DiffusionGenerator gen(std::move(ctx), n_ctx, &pool);
  auto sink = [](int32_t) { return true; };
  for (const DiffusionBenchMode& mode : cfg.modes) {
    CHIMERA_ASSIGN_OR_RETURN(const runtime::DiffusionSchedule sched, runtime::diffusion_schedule(mode.options, cfg.n_gen));
    runtime::GenerateOptions go;
    go.n_predict = cfg.n_gen;
    go.stop_at_eog = false;
    go.sampling.temperature = 0;
    go.diffusion = mode.options;
    go.diffusion.visual = false;
    {  // warm-up: one full canvas pass (pages the weights in, sizes the buffers)
      runtime::GenerateOptions w = go;
      w.diffusion = runtime::DiffusionOptions{};
      w.diffusion.steps = 1;
      gen.reset();
      CHIMERA_RETURN_IF_ERROR(gen.generate(prompt, w, sink).status());
    }
    std::vector<double> tok_s, steps_s, secs, steps, rows_per_step;
    int64_t full = 0, partial = 0;
    for (int r = 0; r < cfg.reps; ++r) {
      gen.reset();
      Stopwatch sw;
      CHIMERA_ASSIGN_OR_RETURN(const runtime::GenerateStats st, gen.generate(prompt, go, sink));
      const double t = sw.elapsed();
      const runtime::DiffusionRunStats& run = gen.last_run();
      secs.push_back(t);
      tok_s.push_back(st.n_generated / t);
      steps_s.push_back(run.steps / t);
      steps.push_back((double)run.steps);
      rows_per_step.push_back(run.steps > 0 ? (double)run.rows / run.steps : 0.0);
      full = run.full_passes;
      partial = run.partial_passes;
    }
    const Stat ts = stats(tok_s), ss = stats(steps_s), sec = stats(secs), stp = stats(steps),
               rps = stats(rows_per_step);
    rows->push_back({{"model", m.info().name}, {"arch", m.info().arch}, {"model_bytes", m.info().weight_bytes},
                     {"threads", pool.size()}, {"isa", kernels::isa_name(kernels::active_isa())},
                     {"mode", mode.name}, {"n_prompt", cfg.n_prompt}, {"n_gen", cfg.n_gen}, {"reps", cfg.reps},
                     {"steps_requested", sched.steps}, {"block_length", sched.block},
                     {"remasking", runtime::remasking_name(mode.options.remasking)},
                     {"threshold", mode.options.threshold}, {"cache_refresh", mode.options.cache_refresh},
                     {"cfg", mode.options.cfg_scale},
                     {"gen_tok_s", ts.mean}, {"gen_tok_s_sd", ts.sd}, {"steps_s", ss.mean}, {"steps_s_sd", ss.sd},
                     {"seconds", sec.mean}, {"steps", stp.mean}, {"ms_per_step", ss.mean > 0 ? 1e3 / ss.mean : 0.0},
                     {"rows_per_step", rps.mean}, {"full_passes", full}, {"partial_passes", partial},
                     {"peak_rss_bytes", peak_rss_bytes()}});
  }
  return Status::ok();
}

void print_diffusion_rows(const nlohmann::json& rows, const std::string& format) {
  if (format == "csv") {
    std::printf("model,threads,isa,mode,n_prompt,n_gen,steps_requested,block_length,threshold,gen_tok_s,gen_tok_s_sd,"
                "steps_s,steps,ms_per_step,rows_per_step,seconds,peak_rss_bytes\n");
    for (const auto& r : rows)
      std::printf("%s,%d,%s,%s,%lld,%lld,%lld,%lld,%g,%.4f,%.4f,%.4f,%.1f,%.2f,%.1f,%.3f,%llu\n",
                  r["model"].get<std::string>().c_str(), r["threads"].get<int>(), r["isa"].get<std::string>().c_str(),
                  r["mode"].get<std::string>().c_str(), (long long)r["n_prompt"].get<int64_t>(),
                  (long long)r["n_gen"].get<int64_t>(), (long long)r["steps_requested"].get<int64_t>(),
                  (long long)r["block_length"].get<int64_t>(), r["threshold"].get<double>(),
                  r["gen_tok_s"].get<double>(), r["gen_tok_s_sd"].get<double>(), r["steps_s"].get<double>(),
                  r["steps"].get<double>(), r["ms_per_step"].get<double>(), r["rows_per_step"].get<double>(),
                  r["seconds"].get<double>(), (unsigned long long)r["peak_rss_bytes"].get<uint64_t>());
    return;
  }
  std::printf("| model | size | threads | isa | test | mode | gen t/s | steps/s | steps | ms/step | rows/step |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows) {
    std::string mode = r["mode"].get<std::string>();
    if (r["threshold"].get<double>() > 0) {
      char b[32];
      std::snprintf(b, sizeof b, " τ=%g", r["threshold"].get<double>());
      mode += b;
    }
    std::printf("| %s | %.1f MiB | %d | %s | p%lld dg%lld s%lld b%lld | %s | %.2f ± %.2f | %.2f | %.0f | %.1f | %.1f |\n",
                r["model"].get<std::string>().c_str(), r["model_bytes"].get<double>() / (1024.0 * 1024.0),
                r["threads"].get<int>(), r["isa"].get<std::string>().c_str(), (long long)r["n_prompt"].get<int64_t>(),
                (long long)r["n_gen"].get<int64_t>(), (long long)r["steps_requested"].get<int64_t>(),
                (long long)r["block_length"].get<int64_t>(), mode.c_str(), r["gen_tok_s"].get<double>(),
                r["gen_tok_s_sd"].get<double>(), r["steps_s"].get<double>(), r["steps"].get<double>(),
                r["ms_per_step"].get<double>(), r["rows_per_step"].get<double>());
  }
  std::printf("peak RSS: %.1f MiB\n", peak_rss_bytes() / (1024.0 * 1024.0));
}

}  // namespace chimera::cli
