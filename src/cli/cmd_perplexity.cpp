// `chimera perplexity -m MODEL -f TEXT [-c CTX] [--kld-base BASE.gguf]`: the
// quality numbers a quantization is judged by, computed the way llama-perplexity
// does. The text is tokenized once (with BOS when the vocabulary adds one) and
// cut into non-overlapping windows of CTX tokens; each window is evaluated from a
// fresh state with its first token replaced by BOS, and only the second half is
// scored (token j+1 from the logits at j, j in [CTX/2, CTX-1)), so every scored
// token sees at least CTX/2 tokens of context. PPL = exp(mean NLL), its error
// exp-propagated from the standard error of the NLL mean.
// With --kld-base the base model runs the same windows and, at each scored
// position, KL(base || model) of the full softmax, top-1 agreement, the change
// in the probability of the correct token and the raw logit error are collected.
// Both models must share the vocabulary size; MODEL's tokenizer is used.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/thread_pool.h"

namespace chimera::cli {
namespace {

struct PerplexityOptions {
  std::string model, file, base;
  int64_t n_ctx = 512;
  ComputeOptions compute;
};

// Mean and standard error of the mean, accumulated in double.
struct Moments {
  double sum = 0, sum2 = 0;
  int64_t n = 0;
  void add(double v) { sum += v, sum2 += v * v, ++n; }
  double mean() const { return n ? sum / n : 0; }
  double stderr_mean() const {
    if (n < 2) return 0;
    const double m = mean();
    return std::sqrt(std::max(0.0, sum2 / n - m * m) / (double)(n - 1));
  }
};

// log-softmax of one row into out (double accumulation for the normaliser).
void log_softmax(const float* x, int64_t n, std::vector<double>& out) {
  out.resize((size_t)n);
  const float mx = *std::max_element(x, x + n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp((double)x[i] - mx);
  const double lse = mx + std::log(s);
  for (int64_t i = 0; i < n; ++i) out[(size_t)i] = (double)x[i] - lse;
}

int64_t argmax(const float* x, int64_t n) { return std::max_element(x, x + n) - x; }

int run_perplexity(const PerplexityOptions& o) {
  if (Status s = o.compute.apply(); !s) return report_error(s);
  if (o.n_ctx < 4) return report_error("-c must be at least 4");
  auto text = read_text_file(o.file);
  if (!text) return report_error(text.status());
  auto mr = load_model_verbose(o.model, false);
  if (!mr) return report_error(mr.status());
  models::Model& m = **mr;
  std::unique_ptr<models::Model> base;
  if (!o.base.empty()) {
    auto br = load_model_verbose(o.base, false);
    if (!br) return report_error(br.status());
    base = std::move(*br);
    if (base->info().n_vocab != m.info().n_vocab)
      return report_error("--kld-base has " + std::to_string(base->info().n_vocab) + " vocabulary entries, the model " +
                          std::to_string(m.info().n_vocab));
  }
  auto cr = new_context(m);
  if (!cr) return report_error(cr.status());
  models::Context& ctx = *cr;
  std::optional<models::Context> base_ctx;
  if (base) {
    auto bcr = new_context(*base);
    if (!bcr) return report_error(bcr.status());
    base_ctx.emplace(std::move(bcr).value());
  }
  const auto& tok = m.tokenizer();
  const std::vector<int32_t> tokens = tok.encode(*text, true, false);
  const int64_t n_ctx = o.n_ctx;
  const int64_t n_chunk = (int64_t)tokens.size() / n_ctx;
  if (n_chunk < 1)
    return report_error("the text has " + std::to_string(tokens.size()) + " tokens; at least -c " +
                        std::to_string(n_ctx) + " are needed");
  const int64_t nv = m.info().n_vocab;
  const int64_t first = n_ctx / 2;
  std::fprintf(stderr, "perplexity: %zu tokens, %lld windows of %lld, scoring %lld tokens per window\n",
               tokens.size(), (long long)n_chunk, (long long)n_ctx, (long long)(n_ctx - 1 - first));

  std::vector<float> logits((size_t)(n_ctx * nv)), base_logits(base ? (size_t)(n_ctx * nv) : 0);
  std::vector<double> lq, lb;
  Moments nll, nll_base, kld, dp;
  std::vector<double> klds;
  int64_t same_top = 0;
  double max_logit_err = 0, sum_logit_err2 = 0;
  uint64_t n_logit = 0;
  for (int64_t c = 0; c < n_chunk; ++c) {
    std::vector<int32_t> win(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    if (tok.add_bos() && tok.bos() >= 0) win[0] = tok.bos();
    auto st = ctx.new_state(n_ctx);
    Status s = ctx.forward(*st, win.data(), n_ctx, models::Logits::kAll, logits.data(), &global_thread_pool());
    if (!s) return report_error(s);
    if (base) {
      auto bst = base_ctx->new_state(n_ctx);
      s = base_ctx->forward(*bst, win.data(), n_ctx, models::Logits::kAll, base_logits.data(), &global_thread_pool());
      if (!s) return report_error(s.with_context("--kld-base"));
    }
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const float* row = logits.data() + j * nv;
      const int32_t next = win[(size_t)j + 1];
      log_softmax(row, nv, lq);
      nll.add(-lq[(size_t)next]);
      if (!base) continue;
      const float* brow = base_logits.data() + j * nv;
      log_softmax(brow, nv, lb);
      nll_base.add(-lb[(size_t)next]);
      double k = 0;
      for (int64_t i = 0; i < nv; ++i) {
        k += std::exp(lb[(size_t)i]) * (lb[(size_t)i] - lq[(size_t)i]);
        const double e = std::fabs((double)row[i] - (double)brow[i]);
        max_logit_err = std::max(max_logit_err, e);
        sum_logit_err2 += e * e;
      }
      n_logit += (uint64_t)nv;
      kld.add(k);
      klds.push_back(k);
      dp.add(std::exp(lq[(size_t)next]) - std::exp(lb[(size_t)next]));
      same_top += argmax(row, nv) == argmax(brow, nv);
    }
    std::fprintf(stderr, "[%lld]%.4f%s", (long long)(c + 1), std::exp(nll.mean()), c + 1 == n_chunk ? "\n" : ",");
  }
  const double ppl = std::exp(nll.mean());
  std::printf("scored %lld tokens in %lld windows of %lld\n", (long long)nll.n, (long long)n_chunk, (long long)n_ctx);
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, ppl * nll.stderr_mean());
  if (base) {
    const double pb = std::exp(nll_base.mean());
    std::sort(klds.begin(), klds.end());
    auto pct = [&](double q) { return klds[(size_t)std::min<double>((double)klds.size() - 1, q * klds.size())]; };
    std::printf("PPL(base)       = %.4f +/- %.5f\n", pb, pb * nll_base.stderr_mean());
    std::printf("PPL ratio       = %.6f\n", ppl / pb);
    std::printf("Mean KLD        = %.6f +/- %.6f\n", kld.mean(), kld.stderr_mean());
    std::printf("Max KLD         = %.6f\n", klds.back());
    std::printf("99.0%% KLD       = %.6f\n", pct(0.99));
    std::printf("Median KLD      = %.6f\n", pct(0.5));
    std::printf("Same top-1      = %.3f %%\n", 100.0 * same_top / std::max<int64_t>(1, kld.n));
    std::printf("RMS dp          = %.4f %%\n", 100.0 * std::sqrt(dp.sum2 / std::max<int64_t>(1, dp.n)));
    std::printf("Max logit error = %.6f\n", max_logit_err);
    std::printf("RMS logit error = %.6f\n", n_logit ? std::sqrt(sum_logit_err2 / (double)n_logit) : 0.0);
  }
  return 0;
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto o = std::make_shared<PerplexityOptions>();
  CLI::App* sub = app.add_subcommand("perplexity", "Perplexity of a text file; KL divergence against a base model");
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_option("-f,--file", o->file, "Text file")->required();
  add_ctx_option(sub, &o->n_ctx, "Window size in tokens (the second half is scored)")->capture_default_str();
  sub->add_option("--kld-base", o->base, "Base model (e.g. the F32/F16 original) for KLD / top-1 / logit error");
  o->compute.add_to(sub);
  sub->callback([o] { set_exit_code(run_perplexity(*o)); });
}

}  // namespace chimera::cli
