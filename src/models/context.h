// A per-caller context on a loaded model. The Model is read-only after load
// (weights, hyper-parameters, tokenizer); everything one forward call writes
// besides the sequence state lives here: the family's scratch buffers
// (Model::new_scratch) and the KV cache types of the states this context
// makes. So one loaded model serves any number of independent callers at once
// (two engines, a draft and a target, the C API and the server), each with
// its own Context, from any threads: contexts share nothing mutable (see
// "Shared model-wide state" in docs/ARCHITECTURE.md for the MoE observer).
// One Context is used by one thread at a time; the ThreadPool handed to
// forward() must not run another job at the same time (a pool runs one
// parallel_for at a time), so concurrent contexts use separate pools (or
// none).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/status.h"
#include "core/thread_pool.h"
#include "layers/state.h"
#include "models/model.h"

namespace chimera::models {

class Context {
 public:
  // A context on m (which must outlive it) with m.default_kv_types() (f16,
  // or f32 for families that read f32 caches only).
  explicit Context(const Model& m);
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  ~Context();

  const Model& model() const { return *model_; }

  // Storage types of the full KV caches of the states this context makes
  // (Model::default_kv_types unless set); refused (kUnsupported, nothing changes) when the model
  // does not accept them (Model::accepts_kv_types). Other contexts of the
  // same model are not affected.
  Status set_kv_types(layers::KvCacheTypes t);
  layers::KvCacheTypes kv_types() const { return kv_types_; }
  // A fresh state with this context's KV types.
  std::unique_ptr<layers::SequenceState> new_state(int64_t n_ctx) const;
  // Another context on the same model with the same KV types (its own scratch).
  Context fresh() const;

  // Runs tokens[0..n) at positions st.n_past().. and advances st. Writes
  // logits rows of n_vocab floats as `which` asks. Context overflow and bad
  // token ids are errors (the state is left unchanged). The state may come
  // from any context of this model.
  Status forward(layers::SequenceState& st, const int32_t* tokens, int64_t n, Logits which, float* logits,
                 ThreadPool* pool);

  // Runs several sequences in one call: each item's results (logits, state)
  // are bit-identical to forward() on that item alone. Families that batch
  // (MicroBatchedModel) push the rows of all items through each weight
  // together; attention, KV writes and recurrent updates stay per sequence.
  // Every item is validated first (as forward(), plus distinct states); on an
  // error nothing runs and no state changes.
  Status forward_batch(std::span<BatchItem> items, ThreadPool* pool);

  // The family's scratch, for the family's own entry points beyond forward()
  // (runtime/diffusion_model.h); opaque to everyone else.
  ModelScratch& scratch() { return *scratch_; }

 private:
  const Model* model_;
  std::unique_ptr<ModelScratch> scratch_;
  layers::KvCacheTypes kv_types_;
};

}  // namespace chimera::models
