// `chimera logits`: raw float32 logits for a token sequence, for golden tests.
// Modes: batch (one forward call), step (one token per call), chunk=N.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/thread_pool.h"

namespace chimera::cli {
namespace {

struct LogitsOptions {
  std::string model, ids, out, mode = "batch";
  int64_t n_ctx = 0;
  ComputeOptions compute;
};

int run(const LogitsOptions& o) {
  if (Status s = o.compute.apply(); !s) return report_error(s);
  int64_t chunk = 0;
  if (o.mode == "batch") {
    chunk = 0;
  } else if (o.mode == "step") {
    chunk = 1;
  } else if (o.mode.rfind("chunk=", 0) == 0) {
    auto r = parse_id_list(o.mode.substr(6));
    if (!r || r->size() != 1 || (*r)[0] < 1) return report_error("--mode chunk=N needs a positive N");
    chunk = (*r)[0];
  } else {
    return report_error("unknown --mode '" + o.mode + "' (batch, step or chunk=N)");
  }
  auto ids = parse_id_list(o.ids);
  if (!ids) return report_error(ids.status());
  if (ids->empty()) return report_error("no token ids given");
  auto mr = load_model_verbose(o.model, true);
  if (!mr) return report_error(mr.status());
  models::Model& m = **mr;
  const int64_t n = (int64_t)ids->size();
  const int64_t n_ctx = o.n_ctx > 0 ? o.n_ctx : std::max<int64_t>(n, 512);
  auto cr = new_context(m);
  if (!cr) return report_error(cr.status());
  models::Context& ctx = *cr;
  auto st = ctx.new_state(n_ctx);
  const int64_t nv = m.info().n_vocab;
  std::vector<float> logits((size_t)(n * nv));
  if (chunk == 0) chunk = n;
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t c = std::min(chunk, n - i);
    Status s = ctx.forward(*st, ids->data() + i, c, models::Logits::kAll, logits.data() + i * nv, &global_thread_pool());
    if (!s) return report_error(s);
  }
  std::FILE* f = std::fopen(o.out.c_str(), "wb");
  if (!f) return report_error("cannot create '" + o.out + "'");
  const size_t w = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
  if (std::fclose(f) != 0 || w != logits.size()) return report_error("failed writing '" + o.out + "'");
  return 0;
}

}  // namespace

void add_logits_command(CLI::App& app) {
  auto o = std::make_shared<LogitsOptions>();
  CLI::App* sub = app.add_subcommand("logits", "Write float32 logits [n_tokens][n_vocab] for a token sequence");
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_option("-t,--tokens", o->ids, "Token ids, comma-separated (fed as given)")->required();
  sub->add_option("-o,--output", o->out, "Output file (little-endian float32)")->required();
  sub->add_option("--mode", o->mode, "batch | step | chunk=N")->capture_default_str();
  add_ctx_option(sub, &o->n_ctx, "Context size (default max(n_tokens, 512))");
  o->compute.add_to(sub);
  sub->callback([o] { set_exit_code(run(*o)); });
}

}  // namespace chimera::cli
