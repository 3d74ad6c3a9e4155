// `chimera synth --like NAME --type TYPE -o OUT.gguf [--layers N] [--seed S]`:
// writes a random-weight GGUF with the shapes, metadata and vocabulary size of a
// real checkpoint (see models/synth/synth.h), for speed measurements at real size
// without downloads. Progress goes to stderr (a bar on a terminal), the summary to
// stdout. `--list` prints the model and type tables.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "models/synth/synth.h"

namespace chimera::cli {

namespace {

namespace synth = chimera::models::synth;

struct SynthOptions {
  std::string like;
  std::string type = "F16";
  std::string output;
  int64_t layers = 0;
  int64_t vocab = 0;
  bool has_layers = false;  // given on the command line (0 is an error, not "default")
  bool has_vocab = false;
  uint64_t seed = 42;
  bool list = false;
};

// Redraws at most once per percent; silent when stderr is not a terminal.
class ProgressBar {
 public:
  ProgressBar() : tty_(::isatty(2) != 0) {}
  void update(uint64_t done, uint64_t total, const std::string& tensor) {
    if (!tty_ || total == 0) return;
    const int pct = (int)(done * 100 / total);
    if (pct == last_pct_ && done != total) return;
    last_pct_ = pct;
    constexpr int kWidth = 30;
    const int fill = pct * kWidth / 100;
    std::fprintf(stderr, "\r[%.*s%*s] %3d%% %6.2f/%.2f GB  %-28.28s", fill, "==============================",
                 kWidth - fill, "", pct, done / 1e9, total / 1e9, tensor.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }
  void finish() {
    if (drawn_) std::fprintf(stderr, "\n");
  }

 private:
  bool tty_;
  bool drawn_ = false;
  int last_pct_ = -1;
};

void print_tables() {
  std::printf("models (--like):\n");
  for (const auto& m : synth::synth_models())
    std::printf("  %-20s %s\n", std::string(m.name).c_str(), std::string(m.description).c_str());
  std::printf("types (--type): %s\n", synth::synth_type_names().c_str());
}

int run_synth(const SynthOptions& o) {
  if (o.list) {
    print_tables();
    return 0;
  }
  if (o.like.empty()) return report_error("--like NAME is required (known: " + synth::synth_model_names() + ")");
  if (o.output.empty()) return report_error("-o OUT.gguf is required");
  synth::SynthRequest req;
  req.like = o.like;
  req.type = o.type;
  req.seed = o.seed;
  if (o.has_layers) req.n_layers = o.layers;
  if (o.has_vocab) req.n_vocab = o.vocab;
  auto plan = synth::make_synth_plan(req);
  if (!plan) return report_error(plan.status());

  const auto t0 = std::chrono::steady_clock::now();
  ProgressBar bar;
  Status st = synth::write_synth_gguf(*plan, req.seed, o.output,
                                      [&](uint64_t d, uint64_t t, const std::string& n) { bar.update(d, t, n); });
  bar.finish();
  if (!st) return report_error(st);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("wrote %s: %s, %s, %zu tensors, %.3f B parameters, %.2f GB of tensor data, %.1f s\n",
              o.output.c_str(), o.like.c_str(), o.type.c_str(), plan->tensors.size(),
              plan->total_elements() / 1e9, plan->total_bytes() / 1e9, secs);
  return 0;
}

}  // namespace

void add_synth_command(CLI::App& app) {
  auto opts = std::make_shared<SynthOptions>();
  auto* cmd = app.add_subcommand(
      "synth", "Write a random-weight GGUF shaped like a real checkpoint (speed tests without downloads)");
  cmd->add_option("--like", opts->like, "Model to imitate (" + synth::synth_model_names() + ")");
  cmd->add_option("--type", opts->type, "Weight type (" + synth::synth_type_names() + ")")->capture_default_str();
  cmd->add_option("-o,--output", opts->output, "Output GGUF path");
  auto* layers = cmd->add_option("--layers", opts->layers, "Number of layers (default: the real model's)");
  cmd->add_option("--seed", opts->seed, "Random seed")->capture_default_str();
  cmd->add_flag("--list", opts->list, "List known models and types");
  // Test-only: a smaller vocabulary keeps fixture files small.
  auto* vocab = cmd->add_option("--vocab", opts->vocab, "")->group("");
  cmd->callback([opts, layers, vocab] {
    opts->has_layers = layers->count() > 0;
    opts->has_vocab = vocab->count() > 0;
    set_exit_code(run_synth(*opts));
  });
}

}  // namespace chimera::cli
