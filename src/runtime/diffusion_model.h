// The model-side API of masked diffusion LMs (archs `llada`, `dream`), used by
// the diffusion generator. The functions are defined by the diffusion family
// (src/models/llada.cpp, in the models library) and declared here so that the
// shared Model interface stays unchanged; they return an error for any model
// that is not a diffusion family.
//
// diffusion_forward() runs a contiguous slice of the canvas against the K/V of
// the other positions already held in a SequenceState's KV caches:
//   * the T tokens at positions [pos0, pos0 + T) are embedded, and every layer
//     writes their K/V into the cache rows of those positions;
//   * each query attends (non-causally) to keys [0, n_kv), n_kv >= pos0 + T;
//     rows outside [pos0, pos0 + T) are whatever earlier calls wrote there
//     (exact for a full pass; Fast-dLLM's approximation when they are stale);
//   * logits rows for the slice rows [out_row0, out_row0 + n_out) are written
//     to `logits` (n_out rows of n_vocab floats); n_out may be 0.
// A full exact pass is pos0 = 0, T = n_kv = canvas length. The state's n_past()
// is neither read nor changed (positions are explicit). Logit rows are raw
// model outputs: row i belongs to position pos0 + out_row0 + i; with
// shift_logits (Dream) the prediction for position p is the row of p - 1, a
// convention the caller applies (see runtime/diffusion.h).
//
// diffusion_forward_batch() runs the slices of several canvases (each on its
// own state, at its own positions, with its own key range and output rows) as
// ONE forward: norms, projections, MLP and lm-head see the rows of all slices
// together (each weight streamed once), RoPE, K/V writes and attention run per
// slice on its state. Every kernel is row-independent, so each slice's logits
// are bit-identical to running it alone (tests/models/diffusion_batch_test.cpp);
// the server advances all its diffusion requests with one such call per step.
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "core/thread_pool.h"
#include "layers/state.h"
#include "models/context.h"
#include "models/model.h"

namespace chimera::models {

struct DiffusionSpec {
  int32_t mask_id = -1;       // tokenizer.ggml.mask_token_id
  bool shift_logits = false;  // diffusion.shift_logits (LLaDA false, Dream true)
};

// One canvas slice of a (fused) diffusion forward: the T tokens at positions
// [pos0, pos0 + T) of `state`, attending to keys [0, n_kv); logits for the
// slice rows `out_rows` (strictly increasing, each in [0, T)) written packed
// to `logits` (out_rows.size() rows of n_vocab floats; may be empty).
struct DiffusionSlice {
  layers::SequenceState* state = nullptr;
  const int32_t* tokens = nullptr;
  int64_t pos0 = 0, T = 0, n_kv = 0;
  std::span<const int64_t> out_rows;
  float* logits = nullptr;
};

// What a diffusion family implements (Model::diffusion() returns it); the
// functions below check their arguments and call it with the context's
// scratch (the family's own Model::new_scratch type). Const, like every
// forward: a model serves any number of contexts.
class DiffusionModel {
 public:
  virtual ~DiffusionModel() = default;
  virtual const DiffusionSpec& spec() const = 0;
  // Arguments already checked (diffusion_forward; also Context::forward's exact pass).
  virtual void run_slice(ModelScratch& scratch, layers::SequenceState& st, const int32_t* tokens, int64_t pos0,
                         int64_t T, int64_t n_kv, int64_t out_row0, int64_t n_out, float* logits,
                         ThreadPool* pool) const = 0;
  // Every slice in one forward (diffusion_forward_batch, diffusion_forward_rows
  // as one slice); arguments already checked, slices on distinct states.
  virtual void run_slices(ModelScratch& scratch, std::span<const DiffusionSlice> slices, ThreadPool* pool) const = 0;
};

// The model's diffusion parameters; an error when it is not a diffusion LM.
Result<DiffusionSpec> diffusion_spec(const Model& m);

// Runs on ctx (its model and scratch).
Status diffusion_forward(Context& ctx, layers::SequenceState& st, const int32_t* tokens, int64_t pos0, int64_t T,
                         int64_t n_kv, int64_t out_row0, int64_t n_out, float* logits, ThreadPool* pool);

// The same pass with logits only for the slice rows listed in `out_rows`
// (strictly increasing, each in [0, T)), written packed: logits row i belongs
// to slice row out_rows[i]. The generator asks only for the rows predicting a
// still-masked position — committed ones need no logits, and the lm-head over
// a 126k vocabulary is a large share of a cached step.
Status diffusion_forward_rows(Context& ctx, layers::SequenceState& st, const int32_t* tokens, int64_t pos0,
                              int64_t T, int64_t n_kv, std::span<const int64_t> out_rows, float* logits,
                              ThreadPool* pool);

// Every slice in one fused forward (see the top of this file). All slices are
// checked before anything runs (an error leaves every state untouched); two
// slices must not share a state. An empty batch is a no-op.
Status diffusion_forward_batch(Context& ctx, std::span<const DiffusionSlice> slices, ThreadPool* pool);

}  // namespace chimera::models
