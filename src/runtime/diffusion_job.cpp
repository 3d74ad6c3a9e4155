// DiffusionJob: one masked-diffusion generation stepped from outside (see
// diffusion_job.h; the algorithm is described in diffusion.h).
#include "runtime/diffusion_job.h"

#include <algorithm>
#include <string>

namespace chimera::runtime {

DiffusionJob::DiffusionJob(const models::Model& model, const models::DiffusionSpec& spec, const GenerateOptions& opts)
    : model_(model),
      spec_(spec),
      d_(opts.diffusion),
      temperature_(opts.sampling.temperature),
      stop_at_eog_(opts.stop_at_eog),
      n_vocab_(model.info().n_vocab),
      rng_(opts.sampling.seed) {}

Result<std::unique_ptr<DiffusionJob>> DiffusionJob::start(const models::Model& model,
                                                          const std::vector<int32_t>& history,
                                                          const std::vector<int32_t>& prompt,
                                                          const GenerateOptions& opts, int64_t n_ctx,
                                                          const StateFor& state_for) {
  CHIMERA_ASSIGN_OR_RETURN(const models::DiffusionSpec spec, models::diffusion_spec(model));
  if (opts.grammar) return unsupported("grammar-constrained sampling is not supported for diffusion models");
  const DiffusionOptions& d = opts.diffusion;
  const int64_t n_vocab = model.info().n_vocab;
  for (int32_t id : prompt)
    if (id < 0 || id >= n_vocab)
      return invalid_argument("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(n_vocab) +
                              ")");
  const int64_t P = (int64_t)(history.size() + prompt.size());
  if (P == 0) return invalid_argument("empty prompt (a diffusion LM needs at least one token before the canvas)");
  CHIMERA_RETURN_IF_ERROR(check_diffusion_options(d));

  int64_t gen = opts.n_predict;
  if (gen < 0) {  // "until end of text": a default-length canvas that fits the context
    gen = diffusion_default_length(d, n_ctx - P);
    if (gen <= 0) return out_of_range("no room left in the context (" + std::to_string(n_ctx) + ") for a canvas");
  }
  std::unique_ptr<DiffusionJob> job(new DiffusionJob(model, spec, opts));
  job->st_.n_prompt = (int64_t)prompt.size();
  job->P_ = P;
  if (gen == 0) {
    job->finished_ = true;
    return job;
  }
  CHIMERA_ASSIGN_OR_RETURN(job->sched_, diffusion_schedule(d, gen));
  const int64_t L = P + gen;
  if (L > n_ctx)
    return out_of_range("the canvas (" + std::to_string(P) + " context + " + std::to_string(gen) +
                        " generated tokens) exceeds the context size " + std::to_string(n_ctx) + " (raise it with -c)");
  job->L_ = L;
  job->cfg_ = d.cfg_scale > 0;
  Branch& c = job->cond_;
  c.tokens = history;
  c.tokens.insert(c.tokens.end(), prompt.begin(), prompt.end());
  c.tokens.resize((size_t)L, spec.mask_id);
  if (job->cfg_) {
    job->uncond_.tokens = c.tokens;
    std::fill(job->uncond_.tokens.begin(), job->uncond_.tokens.begin() + P, spec.mask_id);
  }
  for (int branch = 0; branch < (job->cfg_ ? 2 : 1); ++branch) {
    Branch& br = branch ? job->uncond_ : c;
    br.state = state_for(branch, L);
    CHIMERA_CHECK(br.state && br.state->n_ctx() >= L);
    br.logits.resize((size_t)(job->sched_.block * n_vocab));
  }
  job->run_.canvas = L;
  // The first block is all MASK, so its first step needs a forward: nothing is emitted here.
  job->seek([](int32_t) { return true; });
  return job;
}

void DiffusionJob::seek(const TokenCallback& on_token) {
  n_slices_ = 0;
  while (!finished_) {
    if (stop_ || b_ >= sched_.n_blocks) {
      finished_ = true;
      break;
    }
    const int64_t bs = P_ + b_ * sched_.block, be = bs + sched_.block;
    if (!block_open_) {
      int64_t nb = 0;
      for (int64_t p = bs; p < be; ++p) nb += cond_.tokens[(size_t)p] == spec_.mask_id;
      quota_ = transfer_schedule(nb, sched_.steps_per_block);
      s_ = 0;
      block_open_ = true;
    }
    masked_.clear();
    for (int64_t p = bs; p < be; ++p)
      if (cond_.tokens[(size_t)p] == spec_.mask_id) masked_.push_back(p);
    // Without a threshold the quotas sum to the masked count, so s_ reaching
    // the block's steps with masks left is unreachable (kept as a bound).
    const bool block_done = masked_.empty() || (d_.threshold <= 0 && s_ >= sched_.steps_per_block);
    if (!block_done) {
      if (d_.threshold <= 0 && quota_[(size_t)s_] == 0) {  // a step that commits nothing changes nothing
        ++s_;
        continue;
      }
      full_ = s_ == 0 || (d_.cache_refresh > 0 && s_ % d_.cache_refresh == 0);
      prepare_slices();
      return;
    }
    emit_block(on_token);
    block_open_ = false;
    ++b_;
  }
}

// The logits rows of the masked positions of block b_: a full pass over the
// canvas, or with a cache a slice from the block start (one earlier with
// shift_logits) to the canvas end (prefix) or block end (dual) against the
// K/V the last full pass left.
void DiffusionJob::prepare_slices() {
  const int64_t bs = P_ + b_ * sched_.block, be = bs + sched_.block;
  const int64_t shift = spec_.shift_logits ? 1 : 0;
  const int64_t r0 = bs - shift;  // model row predicting position bs (bs >= 1)
  cached_ = !full_ && (d_.prefix_cache || d_.dual_cache);
  const int64_t slice0 = cached_ ? r0 : 0;
  const int64_t end = cached_ ? (d_.dual_cache ? be : L_) : L_;
  rows_.clear();
  for (int64_t p : masked_) rows_.push_back(p - shift - slice0);
  n_slices_ = 0;
  for (Branch* br : {&cond_, &uncond_}) {
    if (br == &uncond_ && !cfg_) continue;
    slices_[n_slices_++] = {br->state, br->tokens.data() + slice0, slice0, end - slice0, L_, rows_, br->logits.data()};
  }
}

void DiffusionJob::commit() {
  CHIMERA_CHECK(!finished_ && n_slices_ > 0);
  for (size_t i = 0; i < n_slices_; ++i) {
    ++(cached_ ? run_.partial_passes : run_.full_passes);
    run_.rows += slices_[i].T;
  }
  float* logits = cond_.logits.data();
  const size_t n = masked_.size() * (size_t)n_vocab_;
  if (cfg_) {
    const float w = (float)d_.cfg_scale;
    const float* u = uncond_.logits.data();
    for (size_t i = 0; i < n; ++i) logits[i] = u[i] + (w + 1.f) * (logits[i] - u[i]);
  }
  choice_.clear();
  conf_.clear();
  for (size_t k = 0; k < masked_.size(); ++k) {
    choice_.push_back(
        choose_token(logits + (int64_t)k * n_vocab_, (int32_t)n_vocab_, d_.remasking, temperature_, rng_));
    conf_.push_back(choice_.back().confidence);
  }
  // With a threshold the schedule's quota is a floor: never more steps than without.
  const int64_t q = s_ < sched_.steps_per_block ? quota_[(size_t)s_] : 1;
  for (size_t k : select_commits(conf_, q, d_.threshold)) {
    const int64_t p = masked_[k];
    cond_.tokens[(size_t)p] = choice_[k].token;
    if (cfg_) uncond_.tokens[(size_t)p] = choice_[k].token;
    commits_.push_back({run_.steps, p, choice_[k].token, choice_[k].confidence});
  }
  ++run_.steps;
  ++s_;
  n_slices_ = 0;
}

// The block is complete: emit it in canvas order (until an end-of-generation
// token with stop_at_eog, or until on_token says stop).
void DiffusionJob::emit_block(const TokenCallback& on_token) {
  const int64_t bs = P_ + b_ * sched_.block, be = bs + sched_.block;
  for (int64_t p = bs; p < be && !stop_; ++p) {
    const int32_t t = cond_.tokens[(size_t)p];
    if (stop_at_eog_ && model_.tokenizer().is_eog(t)) {
      st_.stopped_at_eog = true;
      st_.eog_token = t;
      stop_ = true;
      break;
    }
    if (st_.n_generated == 0) st_.ttft_seconds = clock_.elapsed();
    ++st_.n_generated;
    if (!on_token(t)) stop_ = true;
  }
}

}  // namespace chimera::runtime
