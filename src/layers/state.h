// Per-sequence, per-layer inference state. A model declares what each layer
// needs (LayerStateSpec); the runtime builds a SequenceState from those
// declarations, so schedulers and samplers never branch on the model family.
//   KvCache:        full K/V rows, row j = token at position j, stored as f32,
//                   f16 or Q8_0 (KvCacheTypes, separately for K and V; f16
//                   rows rounded to nearest even, Q8_0 rows quantized as
//                   llama.cpp's quantize_row_q8_0; read back exactly). Paged:
//                   blocks of kBlockRows positions (K rows, then V rows),
//                   allocated when a store first reaches them and released by
//                   reset() / truncate(), so a state's bytes grow with the
//                   tokens it holds, not with n_ctx. Readers go through the
//                   block table (k_rows / v_rows for the attention kernels,
//                   load_k / load_v, k_row / v_row for f32 rows). Copies
//                   (copy_from, snapshot: prefix-cache entries and restores,
//                   forked choices) share blocks, refcounted; a store into a
//                   shared block first copies that block (copy on write), so
//                   a prefix held by several states is stored once. Caches
//                   sharing blocks may be used from different threads, but
//                   one cache from one thread at a time.
//   RecurrentState: conv state ([K-1][C], the last K-1 raw conv inputs, oldest
//                   row first) + SSM state (Mamba-1 [D][N], Mamba-2 [H][P][N]),
//                   both float32 (layers/mamba*.h own their interpretation).
//   RingKvCache:    sliding-window K/V of a layer whose queries see at most W
//                   keys (itself included): R = min(W, n_ctx) float32 rows,
//                   the token at position j in row j % R, so the bytes do not
//                   grow with the context. After n_past tokens it holds
//                   positions max(0, n_past − R) … n_past − 1.
// Hybrid models mix all kinds (and stateless layers) in one SequenceState.
// Invariants: a fresh state — and one after reset() — has n_past() == 0, zero
// recurrent states and no KV blocks (ring rows are written before they are
// read), so a new sequence never sees a previous one's state.
// copy_from() gives fork / snapshot-restore semantics for every kind
// (snapshot() returns a copy; KV blocks are shared until written). truncate() rolls a KV-only state back to any
// prefix; a state with recurrent layers cannot be rolled back (it holds no
// per-position history), so truncate(n) is an error unless n == n_past(); a
// ring layer can roll back only while the W − 1 keys the next token needs are
// still held (n ≥ n_past − (R − W + 1), i.e. by one token once the ring has
// wrapped), anything further is an error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include "core/memory.h"
#include "core/status.h"
#include "kernels/attention.h"

namespace chimera::layers {

struct KvSpec {
  int64_t n_embd_k = 0;  // floats per key row (n_head_kv * head_dim_k)
  int64_t n_embd_v = 0;  // floats per value row
  int64_t head_dim_k = 0, head_dim_v = 0;  // 0 = not declared (then the cache stays f32 / f16)
};

// Conv + SSM state of one recurrent (Mamba-style) layer.
struct RecurrentSpec {
  int64_t conv_channels = 0;  // C: channels of the causal conv (Mamba-1 d_inner, Mamba-2 d_inner + 2·G·N)
  int64_t conv_rows = 0;      // K-1: past inputs kept
  int64_t ssm_floats = 0;     // SSM state size (Mamba-1 d_inner·N, Mamba-2 H·P·N)
};

// K/V ring of a sliding-window attention layer (see RingKvCache).
struct RingKvSpec {
  int64_t n_embd_k = 0;  // floats per key row
  int64_t n_embd_v = 0;  // floats per value row
  int64_t window = 0;    // W >= 1: keys per query, the query itself included
};

struct NoStateSpec {};

using LayerStateSpec = std::variant<NoStateSpec, KvSpec, RecurrentSpec, RingKvSpec>;

// Storage types of the full KV caches of a sequence (llama.cpp's
// --cache-type-k / --cache-type-v). A value-initialised KvCacheTypes is f32
// (the layer-level storage a bare KvCache / SequenceState gets); what a model's
// contexts use unless told otherwise is kDefaultKvCacheTypes
// (Model::default_kv_types).
struct KvCacheTypes {
  kernels::KvType k = kernels::KvType::kF32;
  kernels::KvType v = kernels::KvType::kF32;
  bool operator==(const KvCacheTypes&) const = default;
};

// The default KV cache types of every command, the server, the C API and the
// Python package: f16 keys and values, as llama.cpp (half of f32's bytes; the
// golden cases' logits move by at most 3.6e-2 of their scale, most by ~1e-3 —
// docs/PERFORMANCE.md "KV cache types"). The one place the default is decided;
// families whose attention reads f32 caches only keep f32
// (Model::default_kv_types).
inline constexpr KvCacheTypes kDefaultKvCacheTypes{kernels::KvType::kF16, kernels::KvType::kF16};

class KvCache {
 public:
  // Positions per block: a power of two (the attention kernel finds a row's
  // block with a shift; it addresses every key row on its own, so the block
  // size never changes a result bit). 64 keeps the first allocation of a
  // sequence small (64 positions x 16 layers of a 1B model in f16: 2 MiB) and
  // the waste of a partly filled block under 64 positions, while a block is
  // still a long contiguous run for the kernels (a table lookup per 64 keys,
  // a pass-2 chunk of 48-96 keys rarely split).
  static constexpr int64_t kBlockRows = 64;

  KvCache(const KvSpec& spec, int64_t n_ctx, KvCacheTypes types = {});
  // Stores n rows at positions pos..pos+n-1 (row t of K at k + t * ldk floats),
  // converted to the storage types; allocates the blocks they fall in (and
  // copies a block shared with another cache before writing it).
  void store(int64_t pos, int64_t n, const float* k, int64_t ldk, const float* v, int64_t ldv);
  // Allocates the blocks of rows 0..n_rows-1 not allocated yet (rows never
  // stored read as zeros): for readers of keys past the stored ones.
  void allocate(int64_t n_rows);
  // Rows pos..pos+n-1 read back as f32 (n * n_embd_k / n_embd_v floats).
  void load_k(int64_t pos, int64_t n, float* out) const;
  void load_v(int64_t pos, int64_t n, float* out) const;
  // The stored rows as a block table, for the attention kernels (valid until
  // the next store / truncate / copy_from).
  kernels::KvRows k_rows() const { return {nullptr, spec_.n_embd_k, types_.k, kptr_.data(), kBlockRows}; }
  kernels::KvRows v_rows() const { return {nullptr, spec_.n_embd_v, types_.v, vptr_.data(), kBlockRows}; }
  // Row pos of an f32 cache (a stored position; the rows of one block are
  // contiguous, blocks are not). Aborts when the type is not f32.
  const float* k_row(int64_t pos) const { return f32(kptr_, types_.k, pos, spec_.n_embd_k); }
  const float* v_row(int64_t pos) const { return f32(vptr_, types_.v, pos, spec_.n_embd_v); }
  int64_t n_ctx() const { return n_ctx_; }
  const KvSpec& spec() const { return spec_; }
  KvCacheTypes types() const { return types_; }
  // Bytes of the blocks this cache holds (shared blocks counted in full).
  size_t bytes() const { return bytes_; }
  // Bytes at a full context (n_ctx rows).
  size_t capacity_bytes() const { return row_bytes() * (size_t)n_ctx_; }
  int64_t n_blocks() const;  // blocks held
  // Bytes one position takes (K and V rows).
  size_t row_bytes() const { return k_row_bytes() + v_row_bytes(); }
  size_t k_row_bytes() const { return kernels::kv_row_bytes(types_.k, spec_.n_embd_k); }
  size_t v_row_bytes() const { return kernels::kv_row_bytes(types_.v, spec_.n_embd_v); }
  // Keeps rows 0..n_rows-1: releases every block past the one holding row n_rows - 1.
  void truncate(int64_t n_rows);
  // Holds o's rows 0..n_rows-1 (and nothing else) by sharing o's blocks: no
  // bytes are copied until one of the two stores into a shared block, which
  // then gets its own copy of that block only (copy on write).
  void copy_from(const KvCache& o, int64_t n_rows);
  // Bytes of KV blocks alive in this process (every cache; a shared block once).
  static size_t live_bytes();
  // Calls f(block identity, number of caches holding it, its bytes) for every
  // block held: lets an owner of several states count a shared block once.
  void visit_blocks(const std::function<void(const void*, long, size_t)>& f) const;

 private:
  struct Block;
  static const float* f32(const std::vector<const void*>& ptr, kernels::KvType t, int64_t pos, int64_t width);
  // Block b, allocated, held by this cache only and with at least `rows` rows.
  void writable(int64_t b, int64_t rows);
  void set_block(int64_t b, std::shared_ptr<Block> blk);
  KvSpec spec_;
  int64_t n_ctx_;
  KvCacheTypes types_;
  std::vector<std::shared_ptr<Block>> blocks_;  // block b: rows b * kBlockRows ..; null = not allocated
  std::vector<const void*> kptr_, vptr_;        // their K / V rows
  size_t bytes_ = 0;
};

class RecurrentState {
 public:
  explicit RecurrentState(const RecurrentSpec& spec);
  float* conv() { return conv_.data(); }
  float* ssm() { return ssm_.data(); }
  const float* conv() const { return conv_.data(); }
  const float* ssm() const { return ssm_.data(); }
  const RecurrentSpec& spec() const { return spec_; }
  size_t bytes() const { return (conv_.size() + ssm_.size()) * sizeof(float); }
  void zero();
  void copy_from(const RecurrentState& o);

 private:
  RecurrentSpec spec_;
  AlignedBuffer<float> conv_, ssm_;
};

class RingKvCache {
 public:
  RingKvCache(const RingKvSpec& spec, int64_t n_ctx);
  int64_t rows() const { return rows_; }  // R = min(window, n_ctx)
  int64_t row_of(int64_t pos) const { return pos % rows_; }
  float* k_row(int64_t pos) { return k_.data() + row_of(pos) * spec_.n_embd_k; }
  float* v_row(int64_t pos) { return v_.data() + row_of(pos) * spec_.n_embd_v; }
  const float* k() const { return k_.data(); }  // row r; see row_of()
  const float* v() const { return v_.data(); }
  const RingKvSpec& spec() const { return spec_; }
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }
  // True if a sequence rolled back from n_past to n tokens still finds every
  // key its next query needs (positions max(0, n − W + 1) … n − 1).
  bool can_truncate(int64_t n_past, int64_t n) const;
  // Copies the rows that hold positions of a state of n_past tokens.
  void copy_from(const RingKvCache& o, int64_t n_past);

 private:
  RingKvSpec spec_;
  int64_t rows_;
  AlignedBuffer<float> k_, v_;
};

using LayerState = std::variant<std::monostate, std::unique_ptr<KvCache>, std::unique_ptr<RecurrentState>,
                                std::unique_ptr<RingKvCache>>;

class SequenceState {
 public:
  // kv_types applies to every full KvCache layer (ring and recurrent layers
  // stay f32).
  SequenceState(const std::vector<LayerStateSpec>& specs, int64_t n_ctx, KvCacheTypes kv_types = {});
  KvCacheTypes kv_types() const { return kv_types_; }
  int64_t n_ctx() const { return n_ctx_; }
  // Tokens already processed (the next token goes to position n_past()).
  int64_t n_past() const { return n_past_; }
  void advance(int64_t n) { n_past_ += n; }
  KvCache* kv(size_t layer) {
    auto* p = std::get_if<std::unique_ptr<KvCache>>(&layers_[layer]);
    return p ? p->get() : nullptr;
  }
  RecurrentState* recurrent(size_t layer) {
    auto* p = std::get_if<std::unique_ptr<RecurrentState>>(&layers_[layer]);
    return p ? p->get() : nullptr;
  }
  RingKvCache* ring(size_t layer) {
    auto* p = std::get_if<std::unique_ptr<RingKvCache>>(&layers_[layer]);
    return p ? p->get() : nullptr;
  }
  size_t n_layers() const { return layers_.size(); }
  // True if some layer keeps no full per-position history (recurrent or ring
  // layers): such a state cannot be rolled back to any prefix, so the server
  // prefix cache uses its snapshots only whole.
  bool has_recurrent() const;
  // Starts a new sequence: n_past = 0, every recurrent state zeroed, every KV
  // block released.
  void reset();
  // Rolls back to n tokens (n <= n_past), releasing the KV blocks past
  // position n - 1. Always valid for KV-only states;
  // with recurrent layers only n == n_past is accepted; ring layers accept it
  // only while they still hold the keys position n needs (see RingKvCache).
  Status truncate(int64_t n);
  // Copies another state of the same shape (fork / snapshot restore).
  Status copy_from(const SequenceState& other);
  // A copy of this state (same layer kinds, n_ctx and contents).
  std::unique_ptr<SequenceState> snapshot() const;
  // Bytes held now: the KV blocks allocated so far (paged: they grow with the
  // tokens stored and are released by reset / truncate), recurrent and ring
  // states in full. full_context: as if every KV cache held n_ctx rows.
  size_t bytes(bool full_context = false) const;
  // Bytes once n_tokens positions are stored (KV blocks rounded up; the
  // recurrent and ring states in full): what a sequence of that length needs.
  size_t bytes_at(int64_t n_tokens) const;
  // bytes() split: the KV blocks one by one (KvCache::visit_blocks) and the
  // rest (recurrent and ring states, never shared).
  void visit_kv_blocks(const std::function<void(const void*, long, size_t)>& f) const;
  size_t unshared_bytes() const;

 private:
  std::vector<LayerStateSpec> specs_;
  int64_t n_ctx_;
  KvCacheTypes kv_types_;
  int64_t n_past_ = 0;
  std::vector<LayerState> layers_;
};

}  // namespace chimera::layers
