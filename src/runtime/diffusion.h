// Masked-diffusion generation (LLaDA / Dream) behind the Generator interface,
// so `run`, `chat`, `serve` and `bench` drive it like any model.
//
// One generate() call builds the canvas [history | prompt | MASK × n] and
// decodes it in semi-autoregressive blocks of `block_length` (left to right),
// `steps / n_blocks` steps per block. Each step evaluates the logits of the
// current block's positions, picks x̂ and a confidence for every masked
// position there (diffusion_sampling.h) and commits the quota of most
// confident ones (LLaDA's schedule) — or, with a threshold, every one above it
// and at least one. Committed tokens are never re-masked. A finished block is
// emitted through the callback in canvas order; with stop_at_eog the call
// stops at the first end-of-generation token once its block is complete.
// With cfg_scale w > 0 a second, unconditional canvas (prompt positions set to
// MASK) is evaluated on its own state and logits = u + (w + 1)(c − u).
//
// Evaluation modes (DiffusionOptions): exact — a fresh full non-causal pass over
// the canvas every step (the reference; what the golden unmask order is
// checked against); prefix cache — a full pass at the start of each block (and
// every cache_refresh steps), then only positions from the block start to the
// canvas end are recomputed against the frozen K/V of the committed prefix;
// dual cache — after such a full pass only the block itself is recomputed, its
// K/V written back in place between the frozen prefix and suffix K/V. With
// shift_logits (Dream) the prediction for position p is row p − 1, so the
// recomputed slice starts one position earlier (at the last prefix position).
// The generation itself is a DiffusionJob (diffusion_job.h) driven here one
// step at a time; the server drives many jobs with fused forwards instead.
// Invariants: the same options and seed give the same tokens; history (prompt
// + emitted tokens) persists across calls until reset(); the state never holds
// more than n_ctx positions (a canvas that does not fit is an error).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/diffusion_job.h"
#include "runtime/diffusion_model.h"
#include "runtime/generator.h"

namespace chimera::runtime {

class DiffusionGenerator final : public Generator {
 public:
  // Runs on its own context (scratch; states with ctx's KV types).
  DiffusionGenerator(models::Context ctx, int64_t n_ctx, ThreadPool* pool);
  // A fresh context on model (f32 KV caches).
  DiffusionGenerator(const models::Model& model, int64_t n_ctx, ThreadPool* pool)
      : DiffusionGenerator(model.new_context(), n_ctx, pool) {}
  Result<GenerateStats> generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                 const TokenCallback& on_token) override;
  void reset() override { history_.clear(); }
  int64_t n_past() const override { return (int64_t)history_.size(); }
  int64_t n_ctx() const override { return n_ctx_; }

  const DiffusionRunStats& last_run() const { return run_; }
  // Every commit of the last generate() call, in order.
  const std::vector<DiffusionCommit>& last_commits() const { return commits_; }
  // The whole canvas after the last call (history, prompt, generated region).
  const std::vector<int32_t>& last_canvas() const { return canvas_; }

 private:
  void draw(const DiffusionJob& job) const;

  models::Context ctx_;
  ThreadPool* pool_;
  int64_t n_ctx_;
  models::DiffusionSpec spec_;
  Status spec_status_;
  std::vector<int32_t> history_;
  std::vector<int32_t> canvas_;
  std::unique_ptr<layers::SequenceState> states_[2];  // per guidance branch, reused across calls
  DiffusionRunStats run_;
  std::vector<DiffusionCommit> commits_;
};

}  // namespace chimera::runtime
