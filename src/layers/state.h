// Per-sequence, per-layer inference state. A model declares what each layer
// needs (StateSpec); the runtime builds a SequenceState from those declarations,
// so schedulers and samplers never branch on the model family.
//   KvCache: full float32 K/V rows, row j = token at position j.
// (Ring KV, shared-KV links and conv+SSM slots join this set with the families
// that need them.) A fresh state is zeroed; copy()/restore() give fork and
// snapshot semantics; truncate() rolls a pure-attention state back.
#pragma once

#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

#include "core/memory.h"
#include "core/status.h"

namespace chimera::layers {

struct KvSpec {
  int64_t n_embd_k = 0;  // floats per key row (n_head_kv * head_dim_k)
  int64_t n_embd_v = 0;  // floats per value row
};

struct NoStateSpec {};

using LayerStateSpec = std::variant<NoStateSpec, KvSpec>;

class KvCache {
 public:
  KvCache(const KvSpec& spec, int64_t n_ctx);
  float* k_row(int64_t pos) { return k_.data() + pos * spec_.n_embd_k; }
  float* v_row(int64_t pos) { return v_.data() + pos * spec_.n_embd_v; }
  const float* k() const { return k_.data(); }
  const float* v() const { return v_.data(); }
  int64_t n_ctx() const { return n_ctx_; }
  const KvSpec& spec() const { return spec_; }
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }
  void copy_from(const KvCache& o, int64_t n_rows);

 private:
  KvSpec spec_;
  int64_t n_ctx_;
  AlignedBuffer<float> k_, v_;
};

using LayerState = std::variant<std::monostate, std::unique_ptr<KvCache>>;

class SequenceState {
 public:
  SequenceState(const std::vector<LayerStateSpec>& specs, int64_t n_ctx);
  int64_t n_ctx() const { return n_ctx_; }
  // Tokens already processed (the next token goes to position n_past()).
  int64_t n_past() const { return n_past_; }
  void advance(int64_t n) { n_past_ += n; }
  KvCache* kv(size_t layer) {
    auto* p = std::get_if<std::unique_ptr<KvCache>>(&layers_[layer]);
    return p ? p->get() : nullptr;
  }
  size_t n_layers() const { return layers_.size(); }
  // Rolls back to n tokens (n <= n_past). Always valid for KV-only states.
  Status truncate(int64_t n);
  // Copies another state of the same shape (fork / snapshot restore).
  Status copy_from(const SequenceState& other);
  size_t bytes() const;

 private:
  int64_t n_ctx_;
  int64_t n_past_ = 0;
  std::vector<LayerState> layers_;
};

}  // namespace chimera::layers
