// `chimera run`: generate from a prompt, streaming text (or ids) to stdout as it
// is produced; timing and memory figures go to stderr.
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "cli/diffusion_options.h"
#include "cli/grammar_options.h"
#include "runtime/expert_placement.h"
#include "runtime/expert_stats.h"
#include "tokenizer/tokenizer.h"

namespace chimera::cli {
namespace {

struct RunOptions {
  std::string model, prompt, prompt_file, ids;
  std::string expert_stats;  // --expert-stats FILE (MoE models)
  std::string expert_placement;  // --expert-placement PLAN.json (MoE models)
  int64_t n_predict = 128;
  int64_t n_ctx = 0;
  bool print_ids = false;
  bool ignore_eos = false;
  bool quiet = false;
  ComputeOptions compute;
  SamplingOptions sampling;
  DiffusionCliOptions diffusion;  // masked diffusion LMs (LLaDA, Dream)
  GrammarCliOptions grammar;      // --grammar / --grammar-file / --json-schema
};

int run(const RunOptions& o) {
  if (Status s = o.compute.apply(); !s) return report_error(s);
  auto diffusion = o.diffusion.resolve();
  if (!diffusion) return report_error(diffusion.status());
  int given = !o.prompt.empty() + !o.prompt_file.empty() + !o.ids.empty();
  if (given != 1) return report_error("give exactly one of -p TEXT, -f FILE or -t IDS");
  auto mr = load_model_verbose(o.model, o.quiet);
  if (!mr) return report_error(mr.status());
  models::Model& model = **mr;
  const tokenizer::Tokenizer& tok = model.tokenizer();

  std::vector<int32_t> prompt;
  std::string prompt_text;
  if (!o.ids.empty()) {
    auto r = parse_id_list(o.ids);
    if (!r) return report_error(r.status());
    prompt = *r;
  } else {
    if (!o.prompt_file.empty()) {
      auto r = read_text_file(o.prompt_file);
      if (!r) return report_error(r.status());
      prompt_text = *r;
    } else {
      prompt_text = o.prompt;
    }
    prompt = tok.encode(prompt_text, /*add_special=*/true, /*parse_special=*/true);
    if (!o.quiet)
      std::fprintf(stderr, "chimera: special tokens are parsed in the prompt (text such as \"%s\" becomes that token)\n",
                   tok.eos() >= 0 ? tok.token_text(tok.eos()).c_str() : "</s>");
  }
  if (prompt.empty()) return report_error("the prompt is empty after tokenization");
  for (int32_t id : prompt)
    if (id < 0 || id >= model.info().n_vocab)
      return report_error("token id " + std::to_string(id) + " is out of range [0, " +
                          std::to_string(model.info().n_vocab) + ")");
  const int64_t n_ctx = resolve_ctx(model, o.n_ctx);
  if ((int64_t)prompt.size() > n_ctx)
    return report_error("the prompt has " + std::to_string(prompt.size()) + " tokens, more than the context size " +
                        std::to_string(n_ctx) + " (raise it with -c)");

  if (!o.expert_placement.empty()) {
    auto pr = runtime::apply_placement_file(model.gguf(), o.expert_placement);
    if (!pr) return report_error(pr.status());
    if (!o.quiet) std::fprintf(stderr, "%s\n", pr->summary().c_str());
  }
  std::unique_ptr<runtime::ExpertStatsSession> stats;
  if (!o.expert_stats.empty()) {
    auto sr = runtime::ExpertStatsSession::attach(model);
    if (!sr) return report_error(sr.status());
    stats = std::move(*sr);
  }
  auto ctx = new_context(model);
  if (!ctx) return report_error(ctx.status());
  auto gen = runtime::make_generator(std::move(ctx).value(), n_ctx, &global_thread_pool());
  runtime::GenerateOptions go;
  go.n_predict = o.n_predict;
  go.stop_at_eog = !o.ignore_eos;
  go.sampling = o.sampling.p;
  go.diffusion = *diffusion;
  auto grammar = o.grammar.resolve(tok);
  if (!grammar) return report_error(grammar.status());
  std::optional<runtime::grammar::GrammarMatcher> matcher;
  if (*grammar) go.grammar = &matcher.emplace(*grammar);

  if (!o.print_ids && !prompt_text.empty()) {
    std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
    std::fflush(stdout);
  }
  tokenizer::StreamDecoder dec(tok, /*render_special=*/false);
  bool first = true;
  auto r = gen->generate(prompt, go, [&](int32_t t) {
    if (o.print_ids) {
      std::printf(first ? "%d" : " %d", t);
    } else {
      const std::string piece = dec.push(t);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
    }
    first = false;
    std::fflush(stdout);
    return true;
  });
  if (!o.print_ids) {
    const std::string rest = dec.flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
  }
  std::printf("\n");
  std::fflush(stdout);
  if (!r) return report_error(r.status());
  if (stats)
    if (Status s = stats->write_json(o.expert_stats); !s) return report_error(s);
  const runtime::GenerateStats& st = *r;
  if (!o.quiet) {
    std::fprintf(stderr, "\nprompt: %lld tokens in %.3f s (%.2f tok/s)\n", (long long)st.n_prompt, st.prompt_seconds,
                 st.prompt_seconds > 0 ? st.n_prompt / st.prompt_seconds : 0.0);
    const int64_t n_dec = st.n_generated > 1 ? st.n_generated - 1 : 0;
    std::fprintf(stderr, "generation: %lld tokens, %.2f tok/s; time to first token %.1f ms\n",
                 (long long)st.n_generated, st.gen_seconds > 0 ? n_dec / st.gen_seconds : 0.0,
                 st.ttft_seconds * 1e3);
    std::fprintf(stderr, "peak RSS: %.1f MiB%s\n", peak_rss_bytes() / (1024.0 * 1024.0),
                 st.hit_context_limit ? " (stopped: context full)" : "");
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "Generate text from a prompt, streaming to stdout");
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_option("-p,--prompt", o->prompt, "Prompt text");
  sub->add_option("-f,--file", o->prompt_file, "Read the prompt from a file");
  sub->add_option("-t,--tokens", o->ids, "Prompt as token ids (comma-separated; no BOS added)");
  sub->add_option("-n,--n-predict", o->n_predict, "Tokens to generate (-1 = until end of text)")
      ->capture_default_str()
      ->check(CLI::Range((int64_t)-1, kMaxCtx));
  add_ctx_option(sub, &o->n_ctx, "Context size (default 4096)");
  sub->add_flag("--ids", o->print_ids, "Print generated token ids instead of text");
  sub->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at end-of-generation tokens");
  sub->add_flag("-q,--quiet", o->quiet, "No statistics on stderr");
  sub->add_option("--expert-stats", o->expert_stats, "MoE models: write expert routing statistics (JSON) to FILE");
  sub->add_option("--expert-placement", o->expert_placement,
                  "MoE models: keep the plan's resident experts in memory (`chimera experts --budget-gb` JSON)");
  o->compute.add_to(sub);
  o->sampling.add_to(sub);
  o->diffusion.add_to(sub);  // masked diffusion LMs (runtime/diffusion.h)
  o->grammar.add_to(sub);
  sub->callback([o] { set_exit_code(run(*o)); });
}

}  // namespace chimera::cli
