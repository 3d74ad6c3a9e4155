// SequenceState implementation.
#include "layers/state.h"

#include <cstring>

namespace chimera::layers {

KvCache::KvCache(const KvSpec& spec, int64_t n_ctx)
    : spec_(spec), n_ctx_(n_ctx), k_((size_t)(spec.n_embd_k * n_ctx)), v_((size_t)(spec.n_embd_v * n_ctx)) {}

void KvCache::copy_from(const KvCache& o, int64_t n_rows) {
  std::memcpy(k_.data(), o.k_.data(), (size_t)(n_rows * spec_.n_embd_k) * sizeof(float));
  std::memcpy(v_.data(), o.v_.data(), (size_t)(n_rows * spec_.n_embd_v) * sizeof(float));
}

SequenceState::SequenceState(const std::vector<LayerStateSpec>& specs, int64_t n_ctx) : n_ctx_(n_ctx) {
  layers_.reserve(specs.size());
  for (const auto& s : specs) {
    if (const auto* kv = std::get_if<KvSpec>(&s)) {
      layers_.emplace_back(std::make_unique<KvCache>(*kv, n_ctx));
    } else {
      layers_.emplace_back(std::monostate{});
    }
  }
}

Status SequenceState::truncate(int64_t n) {
  if (n < 0 || n > n_past_) return invalid_argument("cannot truncate state to " + std::to_string(n) + " tokens");
  n_past_ = n;
  return Status::ok();
}

Status SequenceState::copy_from(const SequenceState& other) {
  if (other.layers_.size() != layers_.size() || other.n_ctx_ > n_ctx_)
    return invalid_argument("state shapes differ");
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto* dst = kv(i);
    const auto* src = std::get_if<std::unique_ptr<KvCache>>(&other.layers_[i]);
    if ((dst == nullptr) != (src == nullptr)) return invalid_argument("state layer kinds differ");
    if (dst) dst->copy_from(**src, other.n_past_);
  }
  n_past_ = other.n_past_;
  return Status::ok();
}

size_t SequenceState::bytes() const {
  size_t b = 0;
  for (const auto& l : layers_)
    if (const auto* p = std::get_if<std::unique_ptr<KvCache>>(&l)) b += (*p)->bytes();
  return b;
}

}  // namespace chimera::layers
