// SequenceState implementation: building per-layer states from their specs,
// reset, rollback rules, fork / snapshot copies.
#include "layers/state.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/fp16.h"
#include "quant/legacy_blocks.h"

namespace chimera::layers {

namespace {

using kernels::KvType;

// n rows of `width` floats (source stride ld) into storage rows of `type`.
void store_rows(uint8_t* dst, KvType type, int64_t width, const float* src, int64_t ld, int64_t n) {
  const size_t rb = kernels::kv_row_bytes(type, width);
  for (int64_t t = 0; t < n; ++t) {
    const float* s = src + t * ld;
    uint8_t* row = dst + (size_t)t * rb;
    if (type == KvType::kF32) {
      std::memcpy(row, s, rb);
    } else if (type == KvType::kF16) {
      auto* d = reinterpret_cast<uint16_t*>(row);
      for (int64_t i = 0; i < width; ++i) d[i] = f32_to_f16(s[i]);
    } else {
      quant::quantize_row_q8_0(s, reinterpret_cast<quant::block_q8_0*>(row), width);
    }
  }
}

void load_rows(const uint8_t* src, KvType type, int64_t width, int64_t n, float* out) {
  if (type == KvType::kF32) {
    std::memcpy(out, src, (size_t)(n * width) * 4);
  } else if (type == KvType::kF16) {
    const auto* h = reinterpret_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n * width; ++i) out[i] = f16_to_f32(h[i]);
  } else {
    quant::dequantize_row_q8_0(reinterpret_cast<const quant::block_q8_0*>(src), out, n * width);
  }
}

}  // namespace

KvCache::KvCache(const KvSpec& spec, int64_t n_ctx, KvCacheTypes types)
    : spec_(spec),
      n_ctx_(n_ctx),
      types_(types),
      k_(kernels::kv_row_bytes(types.k, spec.n_embd_k) * (size_t)n_ctx),
      v_(kernels::kv_row_bytes(types.v, spec.n_embd_v) * (size_t)n_ctx) {}

float* KvCache::f32(AlignedBuffer<uint8_t>& b, KvType t) {
  if (t != KvType::kF32) {
    std::fprintf(stderr, "chimera: internal error: f32 row access to an f16 KV cache\n");
    std::abort();
  }
  return reinterpret_cast<float*>(b.data());
}

void KvCache::store(int64_t pos, int64_t n, const float* k, int64_t ldk, const float* v, int64_t ldv) {
  store_rows(k_.data() + kernels::kv_row_bytes(types_.k, spec_.n_embd_k) * (size_t)pos, types_.k, spec_.n_embd_k, k,
             ldk, n);
  store_rows(v_.data() + kernels::kv_row_bytes(types_.v, spec_.n_embd_v) * (size_t)pos, types_.v, spec_.n_embd_v, v,
             ldv, n);
}

void KvCache::load_k(int64_t pos, int64_t n, float* out) const {
  load_rows(k_.data() + kernels::kv_row_bytes(types_.k, spec_.n_embd_k) * (size_t)pos, types_.k, spec_.n_embd_k, n,
            out);
}

void KvCache::load_v(int64_t pos, int64_t n, float* out) const {
  load_rows(v_.data() + kernels::kv_row_bytes(types_.v, spec_.n_embd_v) * (size_t)pos, types_.v, spec_.n_embd_v, n,
            out);
}

void KvCache::copy_from(const KvCache& o, int64_t n_rows) {
  std::memcpy(k_.data(), o.k_.data(), kernels::kv_row_bytes(types_.k, spec_.n_embd_k) * (size_t)n_rows);
  std::memcpy(v_.data(), o.v_.data(), kernels::kv_row_bytes(types_.v, spec_.n_embd_v) * (size_t)n_rows);
}

RecurrentState::RecurrentState(const RecurrentSpec& spec)
    : spec_(spec), conv_((size_t)(spec.conv_channels * spec.conv_rows)), ssm_((size_t)spec.ssm_floats) {}

void RecurrentState::zero() {
  if (conv_.size()) std::memset(conv_.data(), 0, conv_.size() * sizeof(float));
  if (ssm_.size()) std::memset(ssm_.data(), 0, ssm_.size() * sizeof(float));
}

void RecurrentState::copy_from(const RecurrentState& o) {
  if (conv_.size()) std::memcpy(conv_.data(), o.conv_.data(), conv_.size() * sizeof(float));
  if (ssm_.size()) std::memcpy(ssm_.data(), o.ssm_.data(), ssm_.size() * sizeof(float));
}

RingKvCache::RingKvCache(const RingKvSpec& spec, int64_t n_ctx)
    : spec_(spec),
      rows_(std::max<int64_t>(1, std::min(spec.window, n_ctx))),
      k_((size_t)(spec.n_embd_k * rows_)),
      v_((size_t)(spec.n_embd_v * rows_)) {}

bool RingKvCache::can_truncate(int64_t n_past, int64_t n) const {
  const int64_t oldest_held = std::max<int64_t>(0, n_past - rows_);
  const int64_t oldest_needed = std::max<int64_t>(0, n - spec_.window + 1);
  return n == n_past || oldest_needed >= oldest_held;
}

void RingKvCache::copy_from(const RingKvCache& o, int64_t n_past) {
  const int64_t n = std::min(n_past, rows_);  // rows 0..n-1 are the ones written
  std::memcpy(k_.data(), o.k_.data(), (size_t)(n * spec_.n_embd_k) * sizeof(float));
  std::memcpy(v_.data(), o.v_.data(), (size_t)(n * spec_.n_embd_v) * sizeof(float));
}

SequenceState::SequenceState(const std::vector<LayerStateSpec>& specs, int64_t n_ctx, KvCacheTypes kv_types)
    : specs_(specs), n_ctx_(n_ctx), kv_types_(kv_types) {
  layers_.reserve(specs.size());
  for (const auto& s : specs) {
    if (const auto* kv = std::get_if<KvSpec>(&s)) {
      layers_.emplace_back(std::make_unique<KvCache>(*kv, n_ctx, kv_types));
    } else if (const auto* r = std::get_if<RecurrentSpec>(&s)) {
      layers_.emplace_back(std::make_unique<RecurrentState>(*r));  // zero-initialised
    } else if (const auto* rk = std::get_if<RingKvSpec>(&s)) {
      layers_.emplace_back(std::make_unique<RingKvCache>(*rk, n_ctx));
    } else {
      layers_.emplace_back(std::monostate{});
    }
  }
}

bool SequenceState::has_recurrent() const {
  for (const auto& l : layers_)
    if (std::holds_alternative<std::unique_ptr<RecurrentState>>(l) ||
        std::holds_alternative<std::unique_ptr<RingKvCache>>(l))
      return true;
  return false;
}

void SequenceState::reset() {
  n_past_ = 0;
  for (auto& l : layers_)
    if (auto* r = std::get_if<std::unique_ptr<RecurrentState>>(&l)) (*r)->zero();
}

Status SequenceState::truncate(int64_t n) {
  if (n < 0 || n > n_past_) return invalid_argument("cannot truncate state to " + std::to_string(n) + " tokens");
  if (n == n_past_) return Status::ok();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const auto* r = std::get_if<std::unique_ptr<RingKvCache>>(&layers_[i]);
    if (r && !(*r)->can_truncate(n_past_, n))
      return invalid_argument("cannot truncate the sliding-window KV ring of layer " + std::to_string(i) + " from " +
                              std::to_string(n_past_) + " to " + std::to_string(n) + " tokens: it keeps only the last " +
                              std::to_string((*r)->rows()) + " positions (window " +
                              std::to_string((*r)->spec().window) + "); restore a snapshot or reset() instead");
  }
  bool recurrent = false;
  for (const auto& l : layers_) recurrent |= std::holds_alternative<std::unique_ptr<RecurrentState>>(l);
  if (recurrent)
    return invalid_argument("cannot truncate a recurrent (SSM) state from " + std::to_string(n_past_) + " to " +
                            std::to_string(n) +
                            " tokens: it keeps no per-position history; restore a snapshot or reset() instead");
  n_past_ = n;
  return Status::ok();
}

Status SequenceState::copy_from(const SequenceState& other) {
  if (this == &other) return Status::ok();
  if (other.layers_.size() != layers_.size() || other.n_past_ > n_ctx_) return invalid_argument("state shapes differ");
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i].index() != other.layers_[i].index()) return invalid_argument("state layer kinds differ");
    if (const auto* src = std::get_if<std::unique_ptr<RecurrentState>>(&other.layers_[i])) {
      const RecurrentSpec& a = (*src)->spec();
      const RecurrentSpec& b = recurrent(i)->spec();
      if (a.conv_channels != b.conv_channels || a.conv_rows != b.conv_rows || a.ssm_floats != b.ssm_floats)
        return invalid_argument("recurrent state shapes differ at layer " + std::to_string(i));
    } else if (const auto* kv = std::get_if<std::unique_ptr<KvCache>>(&other.layers_[i])) {
      const KvSpec& a = (*kv)->spec();
      const KvSpec& b = this->kv(i)->spec();
      if (a.n_embd_k != b.n_embd_k || a.n_embd_v != b.n_embd_v)
        return invalid_argument("KV shapes differ at layer " + std::to_string(i));
      if (!((*kv)->types() == this->kv(i)->types()))
        return invalid_argument("KV cache types differ at layer " + std::to_string(i));
    } else if (const auto* rk = std::get_if<std::unique_ptr<RingKvCache>>(&other.layers_[i])) {
      const RingKvCache& a = **rk;
      const RingKvCache& b = *ring(i);
      if (a.spec().n_embd_k != b.spec().n_embd_k || a.spec().n_embd_v != b.spec().n_embd_v ||
          a.spec().window != b.spec().window || a.rows() != b.rows())
        return invalid_argument("sliding-window KV ring shapes differ at layer " + std::to_string(i));
    }
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (const auto* src = std::get_if<std::unique_ptr<RecurrentState>>(&other.layers_[i]))
      recurrent(i)->copy_from(**src);
    else if (const auto* kv = std::get_if<std::unique_ptr<KvCache>>(&other.layers_[i]))
      this->kv(i)->copy_from(**kv, other.n_past_);
    else if (const auto* rk = std::get_if<std::unique_ptr<RingKvCache>>(&other.layers_[i]))
      ring(i)->copy_from(**rk, other.n_past_);
  }
  n_past_ = other.n_past_;
  return Status::ok();
}

std::unique_ptr<SequenceState> SequenceState::snapshot() const {
  auto s = std::make_unique<SequenceState>(specs_, n_ctx_, kv_types_);
  (void)s->copy_from(*this);  // same shape by construction
  return s;
}

size_t SequenceState::bytes() const {
  size_t b = 0;
  for (const auto& l : layers_) {
    if (const auto* p = std::get_if<std::unique_ptr<KvCache>>(&l)) b += (*p)->bytes();
    if (const auto* r = std::get_if<std::unique_ptr<RecurrentState>>(&l)) b += (*r)->bytes();
    if (const auto* rk = std::get_if<std::unique_ptr<RingKvCache>>(&l)) b += (*rk)->bytes();
  }
  return b;
}

}  // namespace chimera::layers
