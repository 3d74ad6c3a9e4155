// DiffusionGenerator: semi-autoregressive block decoding of masked diffusion
// LMs with optional Fast-dLLM caches, threshold parallel decoding and CFG (see
// diffusion.h for the algorithm and its invariants).
#include "runtime/diffusion.h"

#include <cstdio>
#include <string>

namespace chimera::runtime {

DiffusionGenerator::DiffusionGenerator(models::Context ctx, int64_t n_ctx, ThreadPool* pool)
    : ctx_(std::move(ctx)), pool_(pool), n_ctx_(n_ctx) {
  auto s = models::diffusion_spec(ctx_.model());
  if (s.is_ok()) spec_ = *s;
  else spec_status_ = s.status();
}

void DiffusionGenerator::draw(const DiffusionJob& job) const {
  std::string s = "\x1b[H\x1b[2J";  // home + clear: redraw the whole canvas
  s += "diffusion step " + std::to_string(job.run().steps) + "/" + std::to_string(job.total_steps()) + "\n";
  const std::vector<int32_t>& canvas = job.canvas();
  for (size_t i = (size_t)job.context_length(); i < canvas.size(); ++i) {
    const int32_t t = canvas[i];
    s += t == spec_.mask_id ? std::string("\xe2\x96\x91") : ctx_.model().tokenizer().token_to_piece(t, false);
  }
  s += "\n";
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

Result<GenerateStats> DiffusionGenerator::generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                                   const TokenCallback& on_token) {
  if (!spec_status_) return spec_status_;
  run_ = DiffusionRunStats{};
  commits_.clear();
  // The branch states are kept for the next call (grown when a canvas needs more).
  auto state_for = [this](int branch, int64_t positions) {
    std::unique_ptr<layers::SequenceState>& st = states_[branch];
    if (!st || st->n_ctx() < positions) st = ctx_.new_state(positions);
    return st.get();
  };
  CHIMERA_ASSIGN_OR_RETURN(std::unique_ptr<DiffusionJob> job,
                           DiffusionJob::start(ctx_.model(), history_, prompt, opts, n_ctx_, state_for));
  history_.insert(history_.end(), prompt.begin(), prompt.end());  // emitted tokens follow
  const TokenCallback emit = [&](int32_t t) {
    history_.push_back(t);
    return on_token(t);
  };
  Status status = Status::ok();
  while (!job->finished()) {
    if (opts.on_step && !opts.on_step()) break;  // the unfinished block is not emitted
    status = models::diffusion_forward_batch(ctx_, job->slices(), pool_);
    if (!status) break;
    job->commit();
    if (opts.diffusion.visual) draw(*job);
    job->seek(emit);
  }
  run_ = job->run();
  commits_ = job->commits();
  if (!status) return status;
  GenerateStats st = job->stats();
  // The model produced the end-of-generation token: a following turn continues after it.
  if (st.stopped_at_eog) history_.push_back(st.eog_token);
  if (run_.canvas > 0) canvas_ = job->canvas();
  st.gen_seconds = job->elapsed();
  return st;
}

}  // namespace chimera::runtime
