// One masked-diffusion generation (runtime/diffusion.h describes the
// algorithm) as a state machine driven from outside, so a scheduler can
// advance many of them with one fused forward per step
// (models::diffusion_forward_batch) instead of a thread per request:
//
//   auto job = DiffusionJob::start(...);        // validates, builds the canvas
//   while (!job->finished()) {
//     run job->slices() through the model;      // alone or fused with other jobs' slices
//     job->commit();                            // choose + commit this step's tokens
//     job->seek(on_token);                      // emit completed blocks, find the next step
//   }
//
// The job holds the canvas of each guidance branch, the block / step
// position, the schedule quotas, the sampler RNG, the committed positions and
// the logits buffers its slices write; the branch states belong to the caller
// (StateFor). Invariants: slices() is valid between seek() and commit() while
// !finished(); the same inputs give the same commits and tokens whoever runs
// the slices and whatever else runs with them (the forward is row-independent).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "core/timer.h"
#include "runtime/diffusion_model.h"
#include "runtime/diffusion_sampling.h"
#include "runtime/generator.h"

namespace chimera::runtime {

// What one generation did (for benchmarks and docs/DIFFUSION.md).
struct DiffusionRunStats {
  int64_t steps = 0;          // denoising steps taken
  int64_t full_passes = 0;    // forward passes over the whole canvas (per guidance branch)
  int64_t partial_passes = 0; // cached passes over a slice
  int64_t rows = 0;           // canvas positions run through the model in total
  int64_t canvas = 0;         // canvas length
};

// One step's decision, reported to an observer (tests, tracing).
struct DiffusionCommit {
  int64_t step = 0;  // global step index in this call
  int64_t pos = 0;   // absolute canvas position
  int32_t token = 0;
  double confidence = 0;
};

class DiffusionJob {
 public:
  // The state of guidance branch `branch` (0: conditional canvas, 1: the
  // unconditional one when cfg_scale > 0) holding at least `positions`
  // positions; owned by the caller, alive until the job ends.
  using StateFor = std::function<layers::SequenceState*(int branch, int64_t positions)>;

  // Canvas [history | prompt | MASK × n]: history tokens were checked when
  // they were prompts, the prompt's are checked here. Errors: not a diffusion
  // model, grammar, bad ids, empty context, bad options, no room (n_ctx). With
  // n_predict == 0 the job is finished at once.
  static Result<std::unique_ptr<DiffusionJob>> start(const models::Model& model, const std::vector<int32_t>& history,
                                                     const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                                     int64_t n_ctx, const StateFor& state_for);

  bool finished() const { return finished_; }
  // The forward the next step needs: one slice per guidance branch.
  std::span<const models::DiffusionSlice> slices() const { return {slices_.data(), n_slices_}; }
  // The slices' logits are written: choose a token and confidence for every
  // masked position of the block and commit this step's quota.
  void commit();
  // Emits every completed block through on_token (canvas order; false stops the
  // generation) and moves to the next step that needs a forward, or finishes.
  void seek(const TokenCallback& on_token);

  // Call stats (n_prompt, n_generated, ttft, stopped_at_eog, eog_token);
  // gen_seconds = elapsed().
  const GenerateStats& stats() const { return st_; }
  double elapsed() const { return clock_.elapsed(); }
  const DiffusionRunStats& run() const { return run_; }
  const std::vector<DiffusionCommit>& commits() const { return commits_; }
  const std::vector<int32_t>& canvas() const { return cond_.tokens; }
  int64_t context_length() const { return P_; }  // canvas positions before the generated region
  int64_t total_steps() const { return sched_.steps; }

 private:
  struct Branch {
    std::vector<int32_t> tokens;
    layers::SequenceState* state = nullptr;
    std::vector<float> logits;  // one row per masked position of the step
  };
  DiffusionJob(const models::Model& model, const models::DiffusionSpec& spec, const GenerateOptions& opts);
  void prepare_slices();
  void emit_block(const TokenCallback& on_token);

  const models::Model& model_;
  models::DiffusionSpec spec_;
  DiffusionOptions d_;
  double temperature_ = 0;
  bool stop_at_eog_ = true;
  int64_t n_vocab_ = 0;
  int64_t P_ = 0, L_ = 0;
  DiffusionSchedule sched_;
  bool cfg_ = false;
  Branch cond_, uncond_;
  std::mt19937_64 rng_;
  // Position: block b_, step s_ within it; quota_ of the block.
  int64_t b_ = 0, s_ = 0;
  bool block_open_ = false;
  std::vector<int64_t> quota_;
  std::vector<int64_t> masked_;  // masked positions of the block at this step
  std::vector<int64_t> rows_;    // their output rows within the slice
  bool full_ = false;            // this step is a full pass
  bool cached_ = false;          // its slices run against cached K/V (not full canvases)
  std::array<models::DiffusionSlice, 2> slices_;
  size_t n_slices_ = 0;
  bool finished_ = false, stop_ = false;
  GenerateStats st_;
  Stopwatch clock_;
  DiffusionRunStats run_;
  std::vector<DiffusionCommit> commits_;
  std::vector<RowChoice> choice_;
  std::vector<double> conf_;
};

}  // namespace chimera::runtime
