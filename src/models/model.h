// The model interface every family implements, and the loader entry point.
// A model owns its GGUF mapping, bound weights, tokenizer and scratch space;
// the per-sequence context (KV caches, recurrent state, position) lives in a
// layers::SequenceState the caller owns.
// forward() processes any number of tokens of one sequence at the positions
// that follow the state's n_past(), advancing the state; batched prefill,
// chunked prefill and single-token decode are the same call. forward_batch()
// does the same for several sequences at once. Autoregressive families derive
// from MicroBatchedModel and implement one forward over a batch of segments
// (ubatch_segments) that serves both calls: a lone sequence is one segment.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
#include "kernels/repack.h"
#include "layers/state.h"
#include "tokenizer/tokenizer.h"

namespace chimera::layers {
class MoeObservable;  // layers/moe.h
}

namespace chimera::models {

class DiffusionModel;  // runtime/diffusion_model.h

struct ModelInfo {
  std::string arch;
  std::string name;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ctx_train = 0;
  bool is_diffusion = false;
  uint64_t weight_bytes = 0;   // bytes of all tensor data
  // Weight bytes one decoded token reads: everything except the unused rows of
  // an untied embedding table and the experts a token does not route to
  // (expert tensors × used / total). The decode-bandwidth figure uses this.
  uint64_t decode_bytes_per_token = 0;
  // Hyper-parameters derived rather than read from the file (absent keys,
  // values clamped), in words; shown on the CLI's load line.
  std::vector<std::string> derived;
};

enum class Logits {
  kNone,  // no logits (prefill of a prefix)
  kLast,  // one row: the last token
  kAll,   // one row per token
};

// One sequence's share of a multi-sequence forward: exactly the arguments of
// Model::forward for that sequence.
struct BatchItem {
  layers::SequenceState* state = nullptr;
  const int32_t* tokens = nullptr;
  int64_t n = 0;
  Logits which = Logits::kNone;
  float* logits = nullptr;
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelInfo& info() const { return info_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tok_; }
  const format::GgufFile& gguf() const { return *gguf_; }
  // Bytes of the weight copies repacked at load for the active ISA's kernels.
  size_t repacked_bytes() const { return packed_.bytes(); }
  // Of which mapped from the repack cache (kernels/repack_cache.h), and what
  // the cache did at load ("" when it was off).
  size_t repack_cached_bytes() const { return packed_.cached_bytes(); }
  const std::string& repack_cache_status() const { return repack_cache_status_; }
  // Storage-layout weight bytes copied to huge-page memory at load (repack.h).
  size_t relocated_bytes() const { return packed_.relocated_bytes(); }

  // What each layer keeps per sequence.
  virtual std::vector<layers::LayerStateSpec> state_specs() const = 0;
  std::unique_ptr<layers::SequenceState> new_state(int64_t n_ctx) const {
    return std::make_unique<layers::SequenceState>(state_specs(), n_ctx, kv_types_);
  }
  // Storage types of the full KV caches of states made from now on (f32 by
  // default). A non-f32 type is refused by families whose attention reads
  // only f32 caches (accepts_kv_types); families without KV caches accept
  // any (nothing changes).
  Status set_kv_types(layers::KvCacheTypes t);
  bool accepts_kv_types(layers::KvCacheTypes t) const;
  layers::KvCacheTypes kv_types() const { return kv_types_; }

  // Runs tokens[0..n) at positions st.n_past().. and advances st. Writes
  // logits rows of n_vocab floats as `which` asks. Context overflow and bad
  // token ids are errors (the state is left unchanged).
  Status forward(layers::SequenceState& st, const int32_t* tokens, int64_t n, Logits which, float* logits,
                 ThreadPool* pool);

  // Runs several sequences in one call: each item's results (logits, state)
  // are bit-identical to forward() on that item alone. Families that batch
  // (MicroBatchedModel) push the rows of all items through each weight
  // together; attention, KV writes and recurrent updates stay per sequence.
  // Every item is validated first (as forward(), plus distinct states); on an
  // error nothing runs and no state changes.
  Status forward_batch(std::span<BatchItem> items, ThreadPool* pool);

  // Capabilities beyond forward(), null where the family has none: its MoE
  // routing observer hook (expert statistics, placement) and its masked
  // diffusion entry points. Callers ask the model instead of casting it.
  virtual layers::MoeObservable* moe() { return nullptr; }
  virtual DiffusionModel* diffusion() { return nullptr; }
  const DiffusionModel* diffusion() const { return const_cast<Model*>(this)->diffusion(); }

 protected:
  // Family implementation: tokens already validated, n >= 1, fits in context
  // (MicroBatchedModel implements it as a one-item forward_batch_impl).
  virtual void forward_impl(layers::SequenceState& st, const int32_t* tokens, int64_t n, Logits which,
                            float* logits, ThreadPool* pool) = 0;
  // Items already validated. Default: forward_impl per item (counted by
  // unfused_batch_steps when there are several).
  virtual void forward_batch_impl(std::span<BatchItem> items, ThreadPool* pool);
  // True if the family reads its KV caches through KvCache::k_rows / store
  // (any KvType; Q8_0 also needs head sizes that are multiples of 32).
  virtual bool reads_typed_kv() const { return false; }
  layers::KvCacheTypes kv_types_;

  ModelInfo info_;
  // Load-time repacked weight copies (WeightBinder(g, &packed_)); a base-class
  // member, so it outlives the family's WeightViews that point into it.
  kernels::PackedWeights packed_;
  std::string repack_cache_status_;
  std::unique_ptr<format::GgufFile> gguf_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  friend Result<std::unique_ptr<Model>> load_model(const std::string& path);
};

// One sequence's share of a fused micro-batch (MicroBatchedModel): rows
// [row, row + T) of the micro-batch are tokens [offset, offset + T) of the
// item, at positions state().n_past() .. n_past() + T - 1.
struct Segment {
  BatchItem* item = nullptr;
  int64_t offset = 0;  // first token within the item
  int64_t T = 0;       // rows
  int64_t row = 0;     // first row within the fused micro-batch
  const int32_t* tokens() const { return item->tokens + offset; }
  layers::SequenceState& state() const { return *item->state; }
  bool last() const { return offset + T == item->n; }
};

// Cuts every item into pieces of max_rows rows (the last shorter) and packs
// them in order into micro-batches of at most max_rows rows holding at most
// one piece per item; an item's pieces land in later and later micro-batches,
// in order, so running the micro-batches in order advances each sequence
// exactly as forward() on that item alone (which is the one-item case: the
// same pieces, so each sequence sees the same per-call row counts whether it
// runs alone or with others; recurrent kernels pick their algorithm by row
// count).
std::vector<std::vector<Segment>> pack_segments(std::span<BatchItem> items, int64_t max_rows);

// Base for the families with one batched forward: every call, a lone
// forward() being a one-item batch, is packed into micro-batches of segments
// (pack_segments, at most kMaxUbatch rows: bounds the scratch a family
// preallocates) and each is handed to ubatch_segments(), the family's one
// layer loop. It runs the rows of all segments through each weight together;
// attention, KV writes and recurrent updates stay per segment, on that
// sequence's own state and positions; the states advance by their rows.
class MicroBatchedModel : public Model {
 public:
  static constexpr int64_t kMaxUbatch = 256;

 protected:
  void forward_impl(layers::SequenceState& st, const int32_t* tokens, int64_t n, Logits which, float* logits,
                    ThreadPool* pool) final;
  void forward_batch_impl(std::span<BatchItem> items, ThreadPool* pool) final;
  // segs: at most one segment per sequence, rows [seg.row, seg.row + seg.T) of
  // the fused micro-batch, rows in total (<= kMaxUbatch). Writes the logits
  // each segment's item asks for (transformer_util.h: output_rows /
  // write_logits_rows place them) and advances every segment's state.
  virtual void ubatch_segments(std::span<const Segment> segs, int64_t rows, ThreadPool* pool) = 0;
};

// Fused steps that ran one sequence at a time (process-wide count): calls of
// the default Model::forward_batch_impl with several items (families that are
// not MicroBatchedModels, the diffusion LMs). Families that fuse never add to
// it; tests read it to check that they do.
int64_t unfused_batch_steps();

// Registry loaders: runs a freshly constructed family model's init(gguf, extra...)
// and hands it back as a Model once that succeeds.
template <class M, class... InitArgs>
Result<std::unique_ptr<Model>> init_model(std::unique_ptr<M> m, const format::GgufFile& gguf,
                                          const InitArgs&... init_args) {
  CHIMERA_RETURN_IF_ERROR(m->init(gguf, init_args...));
  return std::unique_ptr<Model>(std::move(m));
}

// Opens a GGUF file and builds the model for its general.architecture.
Result<std::unique_ptr<Model>> load_model(const std::string& path);

// The registry: architecture name -> loader and tensor table
// (models/tensor_table.h; null while a family has none). Every family
// registers one line.
struct TensorTable;
using ModelLoader = Result<std::unique_ptr<Model>> (*)(const format::GgufFile& gguf);
struct RegistryEntry {
  const char* arch;
  ModelLoader load;
  const TensorTable* tensors = nullptr;
};
const std::vector<RegistryEntry>& model_registry();

}  // namespace chimera::models
