// `chimera bench`: llama-bench-style throughput of a model — prefill tok/s
// (pp: p tokens in one call on an empty context) and decode tok/s (tg: n
// tokens one per call), mean ± sd over repetitions, time to first token, peak
// RSS, and decode bandwidth (weight bytes read per token × tok/s) against the
// machine's measured read bandwidth. Output: md (default), json, csv.
// Masked diffusion LMs are timed differently: whole generations per
// acceleration mode (cmd_bench_diffusion.h).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "cli/bench_stats.h"
#include "cli/cmd_bench_diffusion.h"
#include "cli/common.h"
#include "cli/diffusion_options.h"
#include "core/bandwidth.h"
#include "core/cpu_features.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "kernels/dispatch.h"

namespace chimera::cli {
namespace {

struct BenchOptions {
  std::string model, threads = "", output = "md";
  int64_t n_prompt = 512, n_gen = 128;
  int64_t depth = 0;  // context tokens already in the state before each test (llama-bench -d)
  int reps = 5;
  std::string isa;
  bool no_probe = false;
  int64_t probe_mib = 1024;
  bool no_repack_cache = false;
  std::string cache_type_k, cache_type_v;  // "" = the model's default (chosen_kv_types)
  DiffusionCliOptions diffusion;  // diffusion LMs (cmd_bench_diffusion.h)
  std::string diffusion_modes;
};

// Diffusion LMs: whole generations per acceleration mode (cmd_bench_diffusion.h).
int run_diffusion(const BenchOptions& o, models::Model& m, const std::vector<int32_t>& thread_list) {
  auto base = o.diffusion.resolve();
  if (!base) return report_error(base.status());
  auto modes = parse_diffusion_modes(o.diffusion_modes, *base);
  if (!modes) return report_error(modes.status());
  if (o.n_prompt < 1 || o.n_gen < 1) return report_error("diffusion bench: -p and -n must be >= 1");
  DiffusionBenchConfig cfg;
  cfg.n_prompt = o.n_prompt;
  cfg.n_gen = o.n_gen;
  cfg.reps = o.reps;
  cfg.modes = std::move(*modes);
  nlohmann::json rows = nlohmann::json::array();
  for (int32_t threads : thread_list) {
    ThreadPool pool(threads);
    if (Status s = bench_diffusion(m, cfg, pool, &rows); !s) return report_error(s);
  }
  if (o.output == "json")
    std::printf("%s\n", (rows.size() == 1 ? rows[0] : rows).dump(2).c_str());
  else
    print_diffusion_rows(rows, o.output);
  return 0;
}

int run(const BenchOptions& o) {
  std::vector<int32_t> thread_list;
  if (o.threads.empty()) {
    thread_list.push_back(default_thread_count());
  } else {
    auto r = parse_id_list(o.threads);
    if (!r || r->empty()) return report_error("--threads takes a list like 1,2");
    for (int32_t t : *r)
      if (t < 1 || t > 1024) return report_error("thread count " + std::to_string(t) + " out of range");
    thread_list = *r;
  }
  if (o.output != "md" && o.output != "json" && o.output != "csv") return report_error("-o must be md, json or csv");
  if (o.n_prompt < 0 || o.n_gen < 0 || o.reps < 1) return report_error("-p, -n must be >= 0 and -r >= 1");
  if (o.depth < 0) return report_error("-d must be >= 0");
  ComputeOptions co;
  co.isa = o.isa;
  co.no_repack_cache = o.no_repack_cache;
  co.cache_type_k = o.cache_type_k;
  co.cache_type_v = o.cache_type_v;
  if (Status s = co.apply(); !s) return report_error(s);
  auto mr = load_model_verbose(o.model, o.output != "md");
  if (!mr) return report_error(mr.status());
  models::Model& m = **mr;
  if (m.info().is_diffusion) return run_diffusion(o, m, thread_list);
  const int64_t nv = m.info().n_vocab;
  std::mt19937 rng(1234);
  std::vector<int32_t> prompt((size_t)std::max<int64_t>(o.n_prompt, 1));
  for (auto& t : prompt) t = (int32_t)(rng() % (uint32_t)nv);
  std::vector<float> logits((size_t)nv);
  nlohmann::json rows = nlohmann::json::array();
  auto cr = new_context(m);
  if (!cr) return report_error(cr.status());
  models::Context& ctx = *cr;
  for (int32_t threads : thread_list) {
    ThreadPool pool(threads);
    BandwidthResult bw;
    if (!o.no_probe && o.n_gen <= 0) bw = measure_read_bandwidth(pool, (size_t)o.probe_mib << 20, 3);
    std::vector<double> pp, tg, ttft;
    // A shared host's bandwidth drifts within minutes: each timed decode run
    // is compared with a probe taken right after it (median over the runs).
    const double bytes_per_tok = (double)m.info().decode_bytes_per_token;
    std::vector<double> probes, pcts;
    const int64_t n_ctx = o.depth + std::max<int64_t>(o.n_prompt, 1) + o.n_gen + 8;
    // -d: the context is filled once (untimed); every test starts from a copy.
    std::unique_ptr<layers::SequenceState> base;
    if (o.depth > 0) {
      std::vector<int32_t> fill((size_t)o.depth);
      for (auto& t : fill) t = (int32_t)(rng() % (uint32_t)nv);
      base = ctx.new_state(n_ctx);
      if (Status s = ctx.forward(*base, fill.data(), o.depth, models::Logits::kNone, nullptr, &pool); !s)
        return report_error(s);
    }
    auto fresh_state = [&]() -> Result<std::unique_ptr<layers::SequenceState>> {
      auto st = ctx.new_state(n_ctx);
      if (base) CHIMERA_RETURN_IF_ERROR(st->copy_from(*base));
      return st;
    };
    for (int r = -1; r < o.reps; ++r) {  // r = -1: warm-up
      if (o.n_prompt > 0) {
        auto sr = fresh_state();
        if (!sr) return report_error(sr.status());
        auto& st = *sr;
        Stopwatch sw;
        Status s = ctx.forward(*st, prompt.data(), o.n_prompt, models::Logits::kLast, logits.data(), &pool);
        const double t = sw.elapsed();
        if (!s) return report_error(s);
        if (r >= 0) {
          pp.push_back(o.n_prompt / t);
          ttft.push_back(t);
        }
      }
      if (o.n_gen > 0) {
        auto sr = fresh_state();
        if (!sr) return report_error(sr.status());
        auto& st = *sr;
        int32_t tok = prompt[0];
        Stopwatch sw;
        for (int64_t i = 0; i < o.n_gen; ++i) {
          Status s = ctx.forward(*st, &tok, 1, models::Logits::kLast, logits.data(), &pool);
          if (!s) return report_error(s);
          tok = (int32_t)(rng() % (uint32_t)nv);
        }
        if (r >= 0) {
          tg.push_back(o.n_gen / sw.elapsed());
          if (!o.no_probe) {
            // A fresh buffer each time, as the start-of-run probe had: a
            // buffer kept across runs read slower in a quick check.
            const double p = measure_read_bandwidth(pool, (size_t)o.probe_mib << 20, 2).read_gbs;
            probes.push_back(p);
            if (p > 0) pcts.push_back(100.0 * tg.back() * bytes_per_tok / 1e9 / p);
          }
        }
      }
    }
    const Stat spp = stats(pp), stg = stats(tg), sttft = stats(ttft);
    const double dec_gbs = stg.mean * bytes_per_tok / 1e9;
    const double probe_gbs = probes.empty() ? bw.read_gbs : median(probes);
    const double pct = !pcts.empty() ? median(pcts) : probe_gbs > 0 ? 100.0 * dec_gbs / probe_gbs : 0.0;
    nlohmann::json row = {
        {"model", m.info().name}, {"arch", m.info().arch}, {"model_bytes", m.info().weight_bytes},
        {"threads", threads}, {"isa", kernels::isa_name(kernels::active_isa())},
        {"repacked_bytes", m.repacked_bytes()},
        {"relocated_bytes", m.relocated_bytes()},
        {"n_prompt", o.n_prompt}, {"n_gen", o.n_gen}, {"n_depth", o.depth}, {"reps", o.reps},
        {"prefill_tok_s", spp.mean}, {"prefill_tok_s_sd", spp.sd},
        {"decode_tok_s", stg.mean}, {"decode_tok_s_sd", stg.sd},
        {"ttft_ms", sttft.mean * 1e3}, {"decode_ms_per_token", stg.mean > 0 ? 1e3 / stg.mean : 0.0},
        {"decode_bytes_per_token", bytes_per_tok}, {"decode_gbs", dec_gbs},
        {"bandwidth_gbs", probe_gbs},
        {"decode_bandwidth_pct", pct},
        {"peak_rss_bytes", peak_rss_bytes()}};
    rows.push_back(row);
  }
  if (o.output == "json") {
    std::printf("%s\n", (rows.size() == 1 ? rows[0] : rows).dump(2).c_str());
  } else if (o.output == "csv") {
    std::printf("model,threads,isa,n_prompt,n_gen,prefill_tok_s,prefill_sd,decode_tok_s,decode_sd,ttft_ms,decode_gbs,bandwidth_gbs,decode_bandwidth_pct,peak_rss_bytes,n_depth\n");
    for (const auto& r : rows)
      std::printf("%s,%d,%s,%lld,%lld,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,%.2f,%.1f,%llu,%lld\n",
                  r["model"].get<std::string>().c_str(), r["threads"].get<int>(), r["isa"].get<std::string>().c_str(),
                  (long long)o.n_prompt, (long long)o.n_gen, r["prefill_tok_s"].get<double>(),
                  r["prefill_tok_s_sd"].get<double>(), r["decode_tok_s"].get<double>(),
                  r["decode_tok_s_sd"].get<double>(), r["ttft_ms"].get<double>(), r["decode_gbs"].get<double>(),
                  r["bandwidth_gbs"].get<double>(), r["decode_bandwidth_pct"].get<double>(),
                  (unsigned long long)r["peak_rss_bytes"].get<uint64_t>(), (long long)o.depth);
  } else {
    std::printf("| model | size | threads | isa | test | t/s | TTFT ms | decode GB/s | probe GB/s | %% of bw |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& r : rows) {
      const double mib = r["model_bytes"].get<double>() / (1024.0 * 1024.0);
      const std::string at_depth = o.depth > 0 ? " @ d" + std::to_string(o.depth) : "";
      if (o.n_prompt > 0)
        std::printf("| %s | %.1f MiB | %d | %s | pp%lld%s | %.2f ± %.2f | %.1f | | | |\n",
                    r["model"].get<std::string>().c_str(), mib, r["threads"].get<int>(),
                    r["isa"].get<std::string>().c_str(), (long long)o.n_prompt, at_depth.c_str(),
                    r["prefill_tok_s"].get<double>(),
                    r["prefill_tok_s_sd"].get<double>(), r["ttft_ms"].get<double>());
      if (o.n_gen > 0)
        std::printf("| %s | %.1f MiB | %d | %s | tg%lld%s | %.2f ± %.2f | | %.2f | %.2f | %.1f |\n",
                    r["model"].get<std::string>().c_str(), mib, r["threads"].get<int>(),
                    r["isa"].get<std::string>().c_str(), (long long)o.n_gen, at_depth.c_str(),
                    r["decode_tok_s"].get<double>(),
                    r["decode_tok_s_sd"].get<double>(), r["decode_gbs"].get<double>(),
                    r["bandwidth_gbs"].get<double>(), r["decode_bandwidth_pct"].get<double>());
    }
    std::printf("peak RSS: %.1f MiB\n", peak_rss_bytes() / (1024.0 * 1024.0));
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Measure prefill / decode throughput (llama-bench style)");
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_option("-p,--n-prompt", o->n_prompt, "Prefill test length (0 = skip)")->capture_default_str();
  sub->add_option("-n,--n-gen", o->n_gen, "Decode test length (0 = skip)")->capture_default_str();
  sub->add_option("-d,--depth", o->depth,
                  "Context tokens already in the sequence before each test (filled once, untimed; llama-bench -d)")
      ->capture_default_str();
  sub->add_option("-r,--repetitions", o->reps, "Repetitions")->capture_default_str();
  sub->add_option("--threads", o->threads, "Thread counts, e.g. 1,2 (default: all cores)");
  sub->add_option("-o,--output", o->output, "md | json | csv")->capture_default_str();
  sub->add_option("--isa", o->isa, "Restrict kernels to an instruction set");
  sub->add_option("--probe-mib", o->probe_mib, "Size of the bandwidth probe's buffer (MiB; default 1024: well past the caches)")
      ->check(CLI::Range(int64_t{16}, int64_t{65536}));
  sub->add_flag("--no-probe", o->no_probe, "Skip the memory-bandwidth probes (by default one read probe runs right after each timed decode run; % of bw is the median over runs of decode GB/s / that probe)");
  sub->add_flag("--no-repack-cache", o->no_repack_cache,
                "Do not read or write MODEL.gguf.ISA.chimera-cache (the repacked weight layouts kept next to the model)");
  add_kv_type_options(sub, &o->cache_type_k, &o->cache_type_v);
  o->diffusion.add_to(sub);
  sub->add_option("--diffusion-modes", o->diffusion_modes,
                  "Diffusion LMs: modes to time, e.g. exact,prefix,dual,dual+threshold (default: the flags given, "
                  "else exact,prefix,dual+threshold)");
  add_bench_serve_command(sub, [o] { set_exit_code(run(*o)); });  // `bench serve` (cmd_bench_serve.cpp)
}

}  // namespace chimera::cli
