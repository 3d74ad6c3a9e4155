// SequenceState implementation: building per-layer states from their specs,
// reset, rollback rules, fork / snapshot copies.
#include "layers/state.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/fp16.h"
#include "quant/legacy_blocks.h"

namespace chimera::layers {

namespace {

using kernels::KvType;

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

// Rows pos..pos+n-1 of a block table (KvCache::kBlockRows rows per block), as f32.
void load_blocks(const std::vector<const void*>& ptr, KvType type, int64_t width, int64_t pos, int64_t n,
                 float* out) {
  const int64_t B = KvCache::kBlockRows;
  const size_t rb = kernels::kv_row_bytes(type, width);
  for (int64_t t = 0; t < n;) {
    const int64_t b = (pos + t) / B, r = (pos + t) % B, cnt = std::min(n - t, B - r);
    load_rows(static_cast<const uint8_t*>(ptr[(size_t)b]) + rb * (size_t)r, type, width, cnt, out + t * width);
    t += cnt;
  }
}

std::atomic<size_t> g_live_bytes{0};  // KvCache::live_bytes()

}  // namespace

// `rows` K rows, then (at the next 64-byte boundary) `rows` V rows; zeroed,
// so a row read before it is stored (a diffusion LM's key range may run past
// what was written) reads as zeros, never as another sequence's data.
struct KvCache::Block {
  Block(int64_t rows_, size_t k_row_bytes, size_t v_row_bytes)
      : rows(rows_),
        v_offset(aligned_size(k_row_bytes * (size_t)rows_)),
        bytes((k_row_bytes + v_row_bytes) * (size_t)rows_),
        data(v_offset + v_row_bytes * (size_t)rows_) {
    g_live_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  ~Block() { g_live_bytes.fetch_sub(bytes, std::memory_order_relaxed); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  uint8_t* k() { return data.data(); }
  uint8_t* v() { return data.data() + v_offset; }
  const uint8_t* k() const { return data.data(); }
  const uint8_t* v() const { return data.data() + v_offset; }
  const int64_t rows;
  const size_t v_offset, bytes;
  AlignedBuffer<uint8_t> data;
};

size_t KvCache::live_bytes() { return g_live_bytes.load(std::memory_order_relaxed); }

void KvCache::visit_blocks(const std::function<void(const void*, long, size_t)>& f) const {
  for (const auto& b : blocks_)
    if (b) f(b.get(), b.use_count(), b->bytes);
}

KvCache::KvCache(const KvSpec& spec, int64_t n_ctx, KvCacheTypes types) : spec_(spec), n_ctx_(n_ctx), types_(types) {}

int64_t KvCache::n_blocks() const {
  int64_t n = 0;
  for (const auto& b : blocks_) n += b != nullptr;
  return n;
}

const float* KvCache::f32(const std::vector<const void*>& ptr, KvType t, int64_t pos, int64_t width) {
  if (t != KvType::kF32) {
    std::fprintf(stderr, "chimera: internal error: f32 row access to an f16 KV cache\n");
    std::abort();
  }
  return static_cast<const float*>(ptr[(size_t)(pos / kBlockRows)]) + (pos % kBlockRows) * width;
}

void KvCache::set_block(int64_t b, std::shared_ptr<Block> blk) {
  if ((int64_t)blocks_.size() <= b) {
    blocks_.resize((size_t)b + 1);
    kptr_.resize((size_t)b + 1, nullptr);
    vptr_.resize((size_t)b + 1, nullptr);
  }
  auto& slot = blocks_[(size_t)b];
  if (slot) bytes_ -= slot->bytes;
  if (blk) bytes_ += blk->bytes;
  kptr_[(size_t)b] = blk ? blk->k() : nullptr;
  vptr_[(size_t)b] = blk ? blk->v() : nullptr;
  slot = std::move(blk);
}

void KvCache::writable(int64_t b, int64_t rows) {
  const Block* cur = (int64_t)blocks_.size() > b ? blocks_[(size_t)b].get() : nullptr;
  // use_count() == 1: no other cache holds the block (the fence orders our
  // writes after the other holder's last reads before it let go).
  if (cur && cur->rows >= rows && blocks_[(size_t)b].use_count() == 1) {
    std::atomic_thread_fence(std::memory_order_acquire);
    return;
  }
  // Blocks are kBlockRows rows, the last one of a context only what n_ctx needs.
  const int64_t n = std::max(rows, std::min(kBlockRows, n_ctx_ - b * kBlockRows));
  const size_t rk = k_row_bytes(), rv = v_row_bytes();
  auto blk = std::make_shared<Block>(n, rk, rv);
  if (cur) {  // copy on write (the rows past what was stored are copied too: harmless)
    const int64_t keep = std::min(cur->rows, n);
    std::memcpy(blk->k(), cur->k(), rk * (size_t)keep);
    std::memcpy(blk->v(), cur->v(), rv * (size_t)keep);
  }
  set_block(b, std::move(blk));
}

void KvCache::allocate(int64_t n_rows) {
  for (int64_t b = 0; b * kBlockRows < std::min(n_rows, n_ctx_); ++b)
    if ((int64_t)blocks_.size() <= b || !blocks_[(size_t)b]) writable(b, std::min(kBlockRows, n_ctx_ - b * kBlockRows));
}

void KvCache::store(int64_t pos, int64_t n, const float* k, int64_t ldk, const float* v, int64_t ldv) {
  if (pos < 0 || n < 0 || pos + n > n_ctx_) {
    std::fprintf(stderr, "chimera: internal error: KV store of rows %lld..%lld past the context (%lld)\n",
                 (long long)pos, (long long)(pos + n), (long long)n_ctx_);
    std::abort();
  }
  const size_t rk = k_row_bytes(), rv = v_row_bytes();
  for (int64_t t = 0; t < n;) {
    const int64_t b = (pos + t) / kBlockRows, r = (pos + t) % kBlockRows;
    const int64_t cnt = std::min(n - t, kBlockRows - r);
    writable(b, r + cnt);
    Block& blk = *blocks_[(size_t)b];
    kernels::kv_store_rows(types_.k, spec_.n_embd_k, k + t * ldk, ldk, cnt, blk.k() + rk * (size_t)r);
    kernels::kv_store_rows(types_.v, spec_.n_embd_v, v + t * ldv, ldv, cnt, blk.v() + rv * (size_t)r);
    t += cnt;
  }
}

void KvCache::load_k(int64_t pos, int64_t n, float* out) const {
  load_blocks(kptr_, types_.k, spec_.n_embd_k, pos, n, out);
}

void KvCache::load_v(int64_t pos, int64_t n, float* out) const {
  load_blocks(vptr_, types_.v, spec_.n_embd_v, pos, n, out);
}

void KvCache::truncate(int64_t n_rows) {
  const size_t keep = (size_t)((std::max<int64_t>(n_rows, 0) + kBlockRows - 1) / kBlockRows);
  for (size_t b = keep; b < blocks_.size(); ++b) set_block((int64_t)b, nullptr);
  if (blocks_.size() > keep) {
    blocks_.resize(keep);
    kptr_.resize(keep);
    vptr_.resize(keep);
  }
}

void KvCache::copy_from(const KvCache& o, int64_t n_rows) {
  if (&o == this) return truncate(n_rows);
  // Shares o's blocks: the first store into a shared block copies it (writable).
  const int64_t nb = std::min<int64_t>((int64_t)o.blocks_.size(), (n_rows + kBlockRows - 1) / kBlockRows);
  truncate(0);
  for (int64_t b = 0; b < nb; ++b) set_block(b, o.blocks_[(size_t)b]);
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
  for (auto& l : layers_) {
    if (auto* r = std::get_if<std::unique_ptr<RecurrentState>>(&l)) (*r)->zero();
    if (auto* kv = std::get_if<std::unique_ptr<KvCache>>(&l)) (*kv)->truncate(0);
  }
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
  for (auto& l : layers_)
    if (auto* kv = std::get_if<std::unique_ptr<KvCache>>(&l)) (*kv)->truncate(n);
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

size_t SequenceState::bytes(bool full_context) const {
  if (full_context) return bytes_at(n_ctx_);
  size_t b = 0;
  for (const auto& l : layers_) {
    if (const auto* p = std::get_if<std::unique_ptr<KvCache>>(&l)) b += (*p)->bytes();
    if (const auto* r = std::get_if<std::unique_ptr<RecurrentState>>(&l)) b += (*r)->bytes();
    if (const auto* rk = std::get_if<std::unique_ptr<RingKvCache>>(&l)) b += (*rk)->bytes();
  }
  return b;
}

void SequenceState::visit_kv_blocks(const std::function<void(const void*, long, size_t)>& f) const {
  for (const auto& l : layers_)
    if (const auto* p = std::get_if<std::unique_ptr<KvCache>>(&l)) (*p)->visit_blocks(f);
}

size_t SequenceState::unshared_bytes() const {
  size_t b = 0;
  for (const auto& l : layers_) {
    if (const auto* r = std::get_if<std::unique_ptr<RecurrentState>>(&l)) b += (*r)->bytes();
    if (const auto* rk = std::get_if<std::unique_ptr<RingKvCache>>(&l)) b += (*rk)->bytes();
  }
  return b;
}

size_t SequenceState::bytes_at(int64_t n_tokens) const {
  const int64_t n = std::min(std::max<int64_t>(n_tokens, 0), n_ctx_);
  // Blocks of kBlockRows rows; the last block of a context holds only what n_ctx needs.
  const int64_t rows = std::min(n_ctx_, (n + KvCache::kBlockRows - 1) / KvCache::kBlockRows * KvCache::kBlockRows);
  size_t b = 0;
  for (const auto& l : layers_) {
    if (const auto* p = std::get_if<std::unique_ptr<KvCache>>(&l)) b += (*p)->row_bytes() * (size_t)rows;
    if (const auto* r = std::get_if<std::unique_ptr<RecurrentState>>(&l)) b += (*r)->bytes();
    if (const auto* rk = std::get_if<std::unique_ptr<RingKvCache>>(&l)) b += (*rk)->bytes();
  }
  return b;
}

}  // namespace chimera::layers
