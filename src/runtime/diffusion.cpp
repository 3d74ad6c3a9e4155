// DiffusionGenerator: semi-autoregressive block decoding of masked diffusion
// LMs with optional Fast-dLLM caches, threshold parallel decoding and CFG (see
// diffusion.h for the algorithm and its invariants).
#include "runtime/diffusion.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/timer.h"
#include "runtime/diffusion_sampling.h"

namespace chimera::runtime {

DiffusionGenerator::DiffusionGenerator(models::Context ctx, int64_t n_ctx, ThreadPool* pool)
    : ctx_(std::move(ctx)), pool_(pool), n_ctx_(n_ctx) {
  auto s = models::diffusion_spec(ctx_.model());
  if (s.is_ok()) spec_ = *s;
  else spec_status_ = s.status();
}

Status DiffusionGenerator::evaluate(Branch& br, int64_t bs, int64_t be, bool full, const DiffusionOptions& o,
                                    const std::vector<int64_t>& masked, float* out) {
  const int64_t L = (int64_t)br.tokens.size();
  const int64_t shift = spec_.shift_logits ? 1 : 0;
  const int64_t r0 = bs - shift;  // model row predicting position bs (bs >= 1)
  const int32_t* tok = br.tokens.data();
  // Logits only for the rows predicting a masked position, packed in `masked` order.
  const bool cached = !full && (o.prefix_cache || o.dual_cache);
  const int64_t slice0 = cached ? r0 : 0;
  rows_.clear();
  for (int64_t p : masked) rows_.push_back(p - shift - slice0);
  if (!cached) {
    ++run_.full_passes;
    run_.rows += L;
    return models::diffusion_forward_rows(ctx_, *br.state, tok, 0, L, L, rows_, out, pool_);
  }
  // Cached step: recompute [r0, end) against the K/V left by the last full pass.
  const int64_t end = o.dual_cache ? be : L;
  ++run_.partial_passes;
  run_.rows += end - r0;
  return models::diffusion_forward_rows(ctx_, *br.state, tok + r0, r0, end - r0, L, rows_, out, pool_);
}

void DiffusionGenerator::draw(int64_t gen0, int64_t step, int64_t n_steps) const {
  std::string s = "\x1b[H\x1b[2J";  // home + clear: redraw the whole canvas
  s += "diffusion step " + std::to_string(step) + "/" + std::to_string(n_steps) + "\n";
  for (size_t i = (size_t)gen0; i < cond_.tokens.size(); ++i) {
    const int32_t t = cond_.tokens[i];
    s += t == spec_.mask_id ? std::string("\xe2\x96\x91") : ctx_.model().tokenizer().token_to_piece(t, false);
  }
  s += "\n";
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

Result<GenerateStats> DiffusionGenerator::generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                                   const TokenCallback& on_token) {
  if (!spec_status_) return spec_status_;
  if (opts.grammar) return unsupported("grammar-constrained sampling is not supported for diffusion models");
  const DiffusionOptions& d = opts.diffusion;
  GenerateStats st;
  Stopwatch clock;
  run_ = DiffusionRunStats{};
  commits_.clear();
  const int64_t n_vocab = ctx_.model().info().n_vocab;
  for (int32_t id : prompt)
    if (id < 0 || id >= n_vocab)
      return invalid_argument("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(n_vocab) +
                              ")");
  const int64_t P = (int64_t)(history_.size() + prompt.size());
  if (P == 0) return invalid_argument("empty prompt (a diffusion LM needs at least one token before the canvas)");
  CHIMERA_RETURN_IF_ERROR(check_diffusion_options(d));

  int64_t gen = opts.n_predict;
  if (gen < 0) {  // "until end of text": a default-length canvas that fits the context
    gen = diffusion_default_length(d, n_ctx_ - P);
    if (gen <= 0) return out_of_range("no room left in the context (" + std::to_string(n_ctx_) + ") for a canvas");
  }
  st.n_prompt = (int64_t)prompt.size();
  if (gen == 0) {
    history_.insert(history_.end(), prompt.begin(), prompt.end());
    return st;
  }
  CHIMERA_ASSIGN_OR_RETURN(const DiffusionSchedule sched, diffusion_schedule(d, gen));
  const int64_t block = sched.block, n_blocks = sched.n_blocks, steps = sched.steps;
  const int64_t steps_b = sched.steps_per_block;
  const int64_t L = P + gen;
  if (L > n_ctx_)
    return out_of_range("the canvas (" + std::to_string(P) + " context + " + std::to_string(gen) +
                        " generated tokens) exceeds the context size " + std::to_string(n_ctx_) + " (raise it with -c)");

  // Canvases and states.
  const bool cfg = d.cfg_scale > 0;
  cond_.tokens = history_;
  cond_.tokens.insert(cond_.tokens.end(), prompt.begin(), prompt.end());
  cond_.tokens.resize((size_t)L, spec_.mask_id);
  if (cfg) {
    uncond_.tokens = cond_.tokens;
    std::fill(uncond_.tokens.begin(), uncond_.tokens.begin() + P, spec_.mask_id);
  }
  for (Branch* br : {&cond_, &uncond_}) {
    if (br == &uncond_ && !cfg) continue;
    if (!br->state || br->state->n_ctx() < L) br->state = ctx_.new_state(L);
  }
  run_.canvas = L;
  history_.insert(history_.end(), prompt.begin(), prompt.end());  // emitted tokens follow
  logits_.resize((size_t)(block * n_vocab));
  if (cfg) logits_u_.resize(logits_.size());
  std::mt19937_64 rng(opts.sampling.seed);
  const double temperature = opts.sampling.temperature;
  const float w = (float)d.cfg_scale;

  bool stop = false, aborted = false;
  std::vector<int64_t> masked;
  std::vector<RowChoice> choice;
  std::vector<double> conf;
  for (int64_t b = 0; b < n_blocks && !stop; ++b) {
    const int64_t bs = P + b * block, be = bs + block;
    int64_t nb = 0;
    for (int64_t p = bs; p < be; ++p) nb += cond_.tokens[(size_t)p] == spec_.mask_id;
    const std::vector<int64_t> quota = transfer_schedule(nb, steps_b);
    for (int64_t s = 0;; ++s) {
      masked.clear();
      for (int64_t p = bs; p < be; ++p)
        if (cond_.tokens[(size_t)p] == spec_.mask_id) masked.push_back(p);
      if (masked.empty()) break;
      if (d.threshold <= 0 && s >= steps_b) break;  // unreachable: the quotas sum to nb
      if (d.threshold <= 0 && quota[(size_t)s] == 0) continue;  // a step that commits nothing changes nothing
      if (opts.on_step && !opts.on_step()) {
        aborted = true;
        break;
      }
      const bool full = s == 0 || (d.cache_refresh > 0 && s % d.cache_refresh == 0);
      CHIMERA_RETURN_IF_ERROR(evaluate(cond_, bs, be, full, d, masked, logits_.data()));
      if (cfg) {
        CHIMERA_RETURN_IF_ERROR(evaluate(uncond_, bs, be, full, d, masked, logits_u_.data()));
        for (size_t i = 0; i < masked.size() * (size_t)n_vocab; ++i)
          logits_[i] = logits_u_[i] + (w + 1.f) * (logits_[i] - logits_u_[i]);
      }
      choice.clear();
      conf.clear();
      for (size_t k = 0; k < masked.size(); ++k) {
        choice.push_back(choose_token(logits_.data() + (int64_t)k * n_vocab, (int32_t)n_vocab, d.remasking,
                                      temperature, rng));
        conf.push_back(choice.back().confidence);
      }
      // With a threshold the schedule's quota is a floor: never more steps than without.
      const int64_t q = s < steps_b ? quota[(size_t)s] : 1;
      for (size_t k : select_commits(conf, q, d.threshold)) {
        const int64_t p = masked[k];
        cond_.tokens[(size_t)p] = choice[k].token;
        if (cfg) uncond_.tokens[(size_t)p] = choice[k].token;
        commits_.push_back({run_.steps, p, choice[k].token, choice[k].confidence});
      }
      ++run_.steps;
      if (d.visual) draw(P, run_.steps, steps);
    }
    if (aborted) break;
    // The block is complete: emit it in canvas order.
    for (int64_t p = bs; p < be && !stop; ++p) {
      const int32_t t = cond_.tokens[(size_t)p];
      if (opts.stop_at_eog && ctx_.model().tokenizer().is_eog(t)) {
        st.stopped_at_eog = true;
        st.eog_token = t;
        history_.push_back(t);  // the model produced it: a following turn continues after it
        stop = true;
        break;
      }
      if (st.n_generated == 0) st.ttft_seconds = clock.elapsed();
      ++st.n_generated;
      history_.push_back(t);
      if (!on_token(t)) stop = true;
    }
  }
  canvas_ = cond_.tokens;
  st.gen_seconds = clock.elapsed();
  return st;
}

}  // namespace chimera::runtime
