// The model interface every family implements, and the loader entry point.
// A Model is read-only once loaded: its GGUF mapping, bound weights,
// hyper-parameters and tokenizer. What a forward call writes lives elsewhere:
// the per-sequence data (KV caches, recurrent state, position) in a
// layers::SequenceState, the scratch buffers and the KV cache types of new
// states in a models::Context (models/context.h), one per caller, made by
// new_context(). So every method a forward runs is const, and any number of
// contexts may run on one model at once.
// Context::forward() processes any number of tokens of one sequence at the
// positions that follow the state's n_past(), advancing the state; batched
// prefill, chunked prefill and single-token decode are the same call.
// Context::forward_batch() does the same for several sequences at once.
// A family implements: state_specs(), new_scratch() (its scratch type, a
// ModelScratch, sized at load for the largest call), and a const forward.
// Autoregressive families derive from MicroBatchedModel and implement one
// forward over a batch of segments (ubatch_segments) that serves both calls:
// a lone sequence is one segment.
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
#include "layers/weights.h"
#include "tokenizer/tokenizer.h"

namespace chimera::layers {
class MoeObservable;  // layers/moe.h
}

namespace chimera::models {

class DiffusionModel;  // runtime/diffusion_model.h
class Context;         // models/context.h

// A family's per-context scratch (its residual-stream workspace, attention /
// MLP / MoE / mixer scratch, logits rows, ...): made by Model::new_scratch,
// owned by a Context, handed to the family's const forward, which casts it to
// its own type. Opaque to everyone else.
class ModelScratch {
 public:
  virtual ~ModelScratch() = default;
};

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
// Context::forward for that sequence.
struct BatchItem {
  layers::SequenceState* state = nullptr;
  const int32_t* tokens = nullptr;
  int64_t n = 0;
  Logits which = Logits::kNone;
  float* logits = nullptr;
};

class Model {
 public:
  Model();
  virtual ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
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
  // A fresh state whose full KV caches store `kv` (Context::new_state passes
  // its own types; callers check them with accepts_kv_types first), or
  // default_kv_types().
  std::unique_ptr<layers::SequenceState> new_state(int64_t n_ctx, layers::KvCacheTypes kv) const {
    return std::make_unique<layers::SequenceState>(state_specs(), n_ctx, kv);
  }
  std::unique_ptr<layers::SequenceState> new_state(int64_t n_ctx) const { return new_state(n_ctx, default_kv_types()); }
  // The KV cache types of this model's contexts unless set otherwise:
  // layers::kDefaultKvCacheTypes (f16), or f32 where the family's attention
  // reads f32 caches only (reads_typed_kv false: phi4flash, bitnet from
  // llama2.c files), so the default never becomes an error.
  layers::KvCacheTypes default_kv_types() const;
  // True when default_kv_types() is f32 because the family reads f32 caches
  // only (the commands print a note).
  bool kv_default_falls_back() const { return default_kv_types() != layers::kDefaultKvCacheTypes; }
  // Whether states may store their full KV caches as t: a non-f32 type is
  // refused by families whose attention reads only f32 caches
  // (reads_typed_kv); families without KV caches accept any (nothing
  // changes). check_kv_types: the same as a Status naming the types and why.
  bool accepts_kv_types(layers::KvCacheTypes t) const;
  Status check_kv_types(layers::KvCacheTypes t) const;

  // A new per-caller context (models/context.h): own scratch, default_kv_types().
  Context new_context() const;
  // The family's scratch for one context, sized for the largest call it runs
  // (Context's constructor calls it).
  virtual std::unique_ptr<ModelScratch> new_scratch() const = 0;

  // Capabilities beyond forward(), null where the family has none: its MoE
  // routing observer hook (expert statistics, placement) and its masked
  // diffusion entry points. Callers ask the model instead of casting it.
  virtual layers::MoeObservable* moe() { return nullptr; }
  virtual const DiffusionModel* diffusion() const { return nullptr; }

 protected:
  friend class Context;
  // Family implementation: tokens already validated, n >= 1, fits in context
  // (MicroBatchedModel implements it as a one-item forward_batch_impl);
  // scratch is this model's new_scratch() of the calling context.
  virtual void forward_impl(ModelScratch& scratch, layers::SequenceState& st, const int32_t* tokens, int64_t n,
                            Logits which, float* logits, ThreadPool* pool) const = 0;
  // Items already validated. Default: forward_impl per item (counted by
  // unfused_batch_steps when there are several).
  virtual void forward_batch_impl(ModelScratch& scratch, std::span<BatchItem> items, ThreadPool* pool) const;
  // True if the family reads its KV caches through KvCache::k_rows / store
  // (any KvType; Q8_0 also needs head sizes that are multiples of 32).
  virtual bool reads_typed_kv() const { return false; }

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
  void forward_impl(ModelScratch& scratch, layers::SequenceState& st, const int32_t* tokens, int64_t n,
                    Logits which, float* logits, ThreadPool* pool) const final;
  void forward_batch_impl(ModelScratch& scratch, std::span<BatchItem> items, ThreadPool* pool) const final;
  // segs: at most one segment per sequence, rows [seg.row, seg.row + seg.T) of
  // the fused micro-batch, rows in total (<= kMaxUbatch). Writes the logits
  // each segment's item asks for (transformer_util.h: output_rows /
  // write_logits_rows place them) and advances every segment's state. Writes
  // nothing but the segments' states and logits and `scratch` (the family's
  // own new_scratch() type, sized for kMaxUbatch rows).
  virtual void ubatch_segments(ModelScratch& scratch, std::span<const Segment> segs, int64_t rows,
                               ThreadPool* pool) const = 0;
};

// Fused steps that ran one sequence at a time (process-wide count): calls of
// the default Model::forward_batch_impl with several items (families that are
// not MicroBatchedModels, the diffusion LMs). Families that fuse never add to
// it; tests read it to check that they do.
int64_t unfused_batch_steps();

// Registry loaders: a freshly constructed family model loads in two steps.
// plan(gguf, extra...) reads the hyper-parameters and the layer plan and
// checks the file's tensors against the family's table (declare_tensors; it
// reads metadata, tensor names and shapes, never tensor data); then
// bind(gguf, declared, extra...) binds the weights. A header-only file
// (GgufFile::header_only: a converter's output before it is written) stops
// after the plan with a null model (check_model_header).
template <class M, class... InitArgs>
Result<std::unique_ptr<Model>> init_model(std::unique_ptr<M> m, const format::GgufFile& gguf,
                                          const InitArgs&... init_args) {
  CHIMERA_ASSIGN_OR_RETURN(const layers::DeclaredShapes declared, m->plan(gguf, init_args...));
  if (gguf.header_only()) return std::unique_ptr<Model>();
  CHIMERA_RETURN_IF_ERROR(m->bind(gguf, declared, init_args...));
  return std::unique_ptr<Model>(std::move(m));
}

// Opens a GGUF file and builds the model for its general.architecture.
Result<std::unique_ptr<Model>> load_model(const std::string& path);

// What load_model checks before it binds weights, on a header-only file
// (GgufWriter::describe): a registered architecture, at least one tensor, the
// tokenizer, the family's hyper-parameters, and the tensors against the
// family's table (a missing required tensor, a wrong shape or an unexpected
// tensor is an error naming it). The converters run it before they write.
Status check_model_header(const format::GgufFile& header);

// The registry: architecture name -> loader and tensor table
// (models/tensor_table.h; null while a family has none). Every family
// registers one line.
struct TensorTable;
using ModelLoader = Result<std::unique_ptr<Model>> (*)(const format::GgufFile& gguf);
struct RegistryEntry {
  const char* arch;
  ModelLoader load;
  const TensorTable* tensors = nullptr;
  // False for a family whose attention reads only f32 KV caches
  // (Model::reads_typed_kv): its contexts default to f32 (default_kv_types).
  bool typed_kv = true;
};
const std::vector<RegistryEntry>& model_registry();

// The KV cache types a context of this file's model gets by default
// (Model::default_kv_types), read from the metadata alone: `chimera info`
// estimates memory without loading the model. f32 for an unknown
// architecture. tests/models/registry_test.cpp checks it against the loaded
// model of every family.
layers::KvCacheTypes default_kv_types_for(const format::GgufFile& gguf);

}  // namespace chimera::models
