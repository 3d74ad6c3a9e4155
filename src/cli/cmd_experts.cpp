// `chimera experts`: runs a text through a mixture-of-experts model (prefill
// only, no logits) with an ExpertStatsCollector attached, then prints a
// per-layer heat map with load-balance figures and, with --budget-gb, a
// placement plan (resident / prefetch experts and the expected hit rate,
// checked against a replay of the recorded trace). -o writes the statistics
// as JSON, --csv as CSV for plotting. Texts longer than the context are run
// in consecutive windows, each on a fresh sequence state.
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/thread_pool.h"
#include "runtime/expert_stats.h"

namespace chimera::cli {
namespace {

std::string human_bytes(double b) {
  char buf[64];
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof buf, "%.2f MB", b / 1e6);
  else std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  return buf;
}

struct ExpertsOptions {
  std::string model, prompt, prompt_file, json_out, csv_out;
  double budget_gb = 0;
  int64_t prefetch_slots = 1;
  int64_t n_ctx = 0;
  bool quiet = false;
  ComputeOptions compute;
};

int run_experts(const ExpertsOptions& o) {
  if (Status s = o.compute.apply(); !s) return report_error(s);
  if (o.prompt.empty() == o.prompt_file.empty()) return report_error("give exactly one of -p TEXT or -f FILE");
  if (!(o.budget_gb >= 0) || !std::isfinite(o.budget_gb) || o.budget_gb > 1e6)
    return report_error("--budget-gb must be a non-negative number of gigabytes");
  if (o.prefetch_slots < 0) return report_error("--prefetch-slots must be >= 0");
  std::string text = o.prompt;
  if (!o.prompt_file.empty()) {
    auto r = read_text_file(o.prompt_file);
    if (!r) return report_error(r.status());
    text = *r;
  }
  auto mr = load_model_verbose(o.model, o.quiet);
  if (!mr) return report_error(mr.status());
  models::Model& model = **mr;
  auto sess = runtime::ExpertStatsSession::attach(model);
  if (!sess) return report_error(sess.status());

  const std::vector<int32_t> tokens = model.tokenizer().encode(text, /*add_special=*/true, /*parse_special=*/true);
  if (tokens.empty()) return report_error("the text is empty after tokenization");
  const int64_t n = (int64_t)tokens.size();
  const int64_t n_ctx = resolve_ctx(model, o.n_ctx);
  auto cr = new_context(model);
  if (!cr) return report_error(cr.status());
  models::Context& ctx = *cr;
  for (int64_t done = 0; done < n; done += n_ctx) {
    const int64_t w = std::min(n_ctx, n - done);
    auto st = ctx.new_state(w);
    if (Status s = ctx.forward(*st, tokens.data() + done, w, models::Logits::kNone, nullptr, &global_thread_pool());
        !s)
      return report_error(s);
  }

  const runtime::ExpertStatsCollector& stats = (*sess)->stats();
  std::printf("%lld tokens, %zu MoE layers, %lld routings\n", (long long)n, stats.layers().size(),
              (long long)stats.total_routings());
  std::fputs(runtime::heat_map(stats).c_str(), stdout);

  runtime::PlacementPlan plan;
  const bool with_plan = o.budget_gb > 0;
  if (with_plan) {
    runtime::PlacementOptions po;
    po.budget_bytes = (uint64_t)std::llround(o.budget_gb * 1e9);
    po.prefetch_slots = o.prefetch_slots;
    auto pr = runtime::plan_placement(stats, (*sess)->expert_bytes(), po);
    if (!pr) return report_error(pr.status());
    plan = *pr;
    auto rr = runtime::replay(stats, plan);
    if (!rr) return report_error(rr.status());
    std::printf(
        "placement for %s (experts total %s): %lld resident (%s), %lld prefetch (%s)\n"
        "expected hit rate %.2f%% (resident), %.2f%% staged (resident + prefetch); replayed on this trace: "
        "%.2f%% / %.2f%%\n",
        human_bytes((double)plan.budget_bytes).c_str(), human_bytes((double)plan.total_expert_bytes).c_str(),
        (long long)plan.n_resident(), human_bytes((double)plan.resident_bytes).c_str(), (long long)plan.n_prefetch(),
        human_bytes((double)plan.prefetch_bytes).c_str(), 100 * plan.expected_hit_rate,
        100 * plan.expected_staged_rate, 100 * rr->hit_rate(), 100 * rr->staged_rate());
  }
  if (!o.json_out.empty())
    if (Status s = runtime::write_text_file(o.json_out, runtime::stats_json(stats, with_plan ? &plan : nullptr)); !s)
      return report_error(s);
  if (!o.csv_out.empty())
    if (Status s = runtime::write_text_file(o.csv_out, runtime::stats_csv(stats, with_plan ? &plan : nullptr)); !s)
      return report_error(s);
  return 0;
}

}  // namespace

void add_experts_command(CLI::App& app) {
  auto o = std::make_shared<ExpertsOptions>();
  CLI::App* sub = app.add_subcommand("experts", "Mixture-of-experts routing statistics and expert placement");
  sub->add_option("-m,--model", o->model, "GGUF model file (a MoE architecture)")->required();
  sub->add_option("-p,--prompt", o->prompt, "Text to route");
  sub->add_option("-f,--file", o->prompt_file, "Read the text from a file");
  sub->add_option("-o,--output", o->json_out, "Write the statistics as JSON");
  sub->add_option("--csv", o->csv_out, "Write per-expert rows as CSV");
  sub->add_option("--budget-gb", o->budget_gb, "Memory budget for experts (1 GB = 1e9 bytes): print a placement plan");
  sub->add_option("--prefetch-slots", o->prefetch_slots, "Experts per layer staged for prefetch")->capture_default_str();
  add_ctx_option(sub, &o->n_ctx, "Window size in tokens (default 4096)");
  sub->add_flag("-q,--quiet", o->quiet, "No model summary on stderr");
  o->compute.add_to(sub);
  sub->callback([o] { set_exit_code(run_experts(*o)); });
}

}  // namespace chimera::cli
