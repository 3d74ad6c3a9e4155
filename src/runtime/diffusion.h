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
// Invariants: the same options and seed give the same tokens; history (prompt
// + emitted tokens) persists across calls until reset(); the state never holds
// more than n_ctx positions (a canvas that does not fit is an error).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "runtime/diffusion_model.h"
#include "runtime/generator.h"

namespace chimera::runtime {

// What the last generate() call did (for benchmarks and docs/DIFFUSION.md).
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
  struct Branch {  // one guidance branch: its canvas and K/V state
    std::vector<int32_t> tokens;
    std::unique_ptr<layers::SequenceState> state;
  };
  // Logits (prediction rows) of the masked positions of block [bs, be) into
  // out, packed in `masked` order; the mode decides between a full pass and a
  // cached slice.
  Status evaluate(Branch& br, int64_t bs, int64_t be, bool full, const DiffusionOptions& o,
                  const std::vector<int64_t>& masked, float* out);
  void draw(int64_t gen0, int64_t step, int64_t n_steps) const;

  models::Context ctx_;
  ThreadPool* pool_;
  int64_t n_ctx_;
  models::DiffusionSpec spec_;
  Status spec_status_;
  std::vector<int32_t> history_;
  std::vector<int32_t> canvas_;
  Branch cond_, uncond_;
  std::vector<float> logits_, logits_u_;
  std::vector<int64_t> rows_;  // evaluate(): logits rows of the masked positions
  DiffusionRunStats run_;
  std::vector<DiffusionCommit> commits_;
};

}  // namespace chimera::runtime
