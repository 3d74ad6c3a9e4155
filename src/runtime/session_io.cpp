// SequenceSession <-> bytes (see session_io.h).
#include "runtime/session_io.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace chimera::runtime {
namespace {

constexpr char kMagic[8] = {'C', 'H', 'I', 'M', 'S', 'E', 'Q', '\0'};
enum LayerKind : uint8_t { kNone = 0, kKv = 1, kRecurrent = 2, kRing = 3 };

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Counts (out == nullptr) or writes bytes.
class Writer {
 public:
  explicit Writer(uint8_t* out) : out_(out) {}
  void bytes(const void* p, size_t n) {
    if (out_ && n) std::memcpy(out_ + n_, p, n);
    n_ += n;
  }
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes(&v, sizeof v);
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void ids(const std::vector<int32_t>& v) {
    put<uint64_t>(v.size());
    bytes(v.data(), v.size() * sizeof(int32_t));
  }
  void floats(const float* p, int64_t n) { bytes(p, (size_t)n * sizeof(float)); }
  size_t size() const { return n_; }
  uint8_t* data() const { return out_; }

 private:
  uint8_t* out_;
  size_t n_ = 0;
};

void write_all(const models::Model& m, const SequenceSession& s, Writer& w) {
  const models::ModelInfo& info = m.info();
  const layers::SequenceState& st = *s.state;
  w.bytes(kMagic, sizeof kMagic);
  w.put<uint32_t>(kSessionFormatVersion);
  w.put<uint32_t>(0);
  w.str(info.arch);
  w.put<int64_t>(info.n_vocab);
  w.put<int64_t>(info.n_embd);
  w.put<int64_t>(info.n_layer);
  const int64_t n_past = st.n_past();
  w.put<int64_t>(n_past);
  w.ids(s.history);
  w.ids(s.pending);
  w.put<uint8_t>(s.have_logits ? 1 : 0);
  if (s.have_logits) w.floats(s.logits.data(), info.n_vocab);
  auto& ms = const_cast<layers::SequenceState&>(st);  // accessors are non-const; nothing is modified
  for (size_t i = 0; i < st.n_layers(); ++i) {
    if (const layers::KvCache* kv = ms.kv(i)) {
      w.put<uint8_t>(kKv);
      w.put<int64_t>(kv->spec().n_embd_k);
      w.put<int64_t>(kv->spec().n_embd_v);
      // Rows are saved as f32 whatever the cache type (f16 widens exactly).
      std::vector<float> rows((size_t)(n_past * std::max(kv->spec().n_embd_k, kv->spec().n_embd_v)));
      kv->load_k(0, n_past, rows.data());
      w.floats(rows.data(), n_past * kv->spec().n_embd_k);
      kv->load_v(0, n_past, rows.data());
      w.floats(rows.data(), n_past * kv->spec().n_embd_v);
    } else if (const layers::RecurrentState* r = ms.recurrent(i)) {
      const layers::RecurrentSpec& sp = r->spec();
      w.put<uint8_t>(kRecurrent);
      w.put<int64_t>(sp.conv_channels);
      w.put<int64_t>(sp.conv_rows);
      w.put<int64_t>(sp.ssm_floats);
      w.floats(r->conv(), sp.conv_channels * sp.conv_rows);
      w.floats(r->ssm(), sp.ssm_floats);
    } else if (const layers::RingKvCache* g = ms.ring(i)) {
      w.put<uint8_t>(kRing);
      w.put<int64_t>(g->spec().n_embd_k);
      w.put<int64_t>(g->spec().n_embd_v);
      w.put<int64_t>(g->spec().window);
      w.put<int64_t>(g->rows());
      w.floats(g->k(), g->rows() * g->spec().n_embd_k);
      w.floats(g->v(), g->rows() * g->spec().n_embd_v);
    } else {
      w.put<uint8_t>(kNone);
    }
  }
}

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  Status bytes(void* p, size_t n, const char* what) {
    if (n > b_.size() - pos_) return invalid_argument(std::string("saved state is truncated (in ") + what + ")");
    if (n) std::memcpy(p, b_.data() + pos_, n);
    pos_ += n;
    return Status::ok();
  }
  template <class T>
  Status get(T* v, const char* what) {
    return bytes(v, sizeof *v, what);
  }
  // A count of `elem`-byte items that must fit in what is left.
  Status count(uint64_t* n, size_t elem, const char* what) {
    CHIMERA_RETURN_IF_ERROR(get(n, what));
    if (*n > (b_.size() - pos_) / elem) return invalid_argument(std::string("saved state is truncated (in ") + what + ")");
    return Status::ok();
  }
  Status floats(float* p, int64_t n, const char* what) { return bytes(p, (size_t)n * sizeof(float), what); }
  size_t pos() const { return pos_; }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

Status expect_dim(int64_t got, int64_t want, const std::string& what) {
  if (got != want)
    return invalid_argument("saved state does not fit this model: " + what + " is " + std::to_string(got) +
                            ", the model has " + std::to_string(want));
  return Status::ok();
}

Status read_ids(Reader& r, int64_t n_vocab, const char* what, std::vector<int32_t>* out) {
  uint64_t n = 0;
  CHIMERA_RETURN_IF_ERROR(r.count(&n, sizeof(int32_t), what));
  out->resize(n);
  CHIMERA_RETURN_IF_ERROR(r.bytes(out->data(), n * sizeof(int32_t), what));
  for (int32_t id : *out)
    if (id < 0 || id >= n_vocab)
      return invalid_argument(std::string("saved state holds token id ") + std::to_string(id) + " in its " + what +
                              ", outside the vocabulary");
  return Status::ok();
}

}  // namespace

size_t session_bytes(const models::Model& m, const SequenceSession& s) {
  Writer w(nullptr);
  write_all(m, s, w);
  return w.size() + sizeof(uint64_t);
}

Status save_session(const models::Model& m, const SequenceSession& s, std::span<uint8_t> out) {
  const size_t need = session_bytes(m, s);
  if (out.size() < need) return out_of_range("state buffer holds " + std::to_string(out.size()) + " bytes, " +
                                             std::to_string(need) + " needed");
  Writer w(out.data());
  write_all(m, s, w);
  const uint64_t sum = fnv1a(out.data(), w.size());
  std::memcpy(out.data() + w.size(), &sum, sizeof sum);
  return Status::ok();
}

Status load_session(const models::Model& m, std::span<const uint8_t> blob, SequenceSession* into) {
  const models::ModelInfo& info = m.info();
  char magic[8];
  if (blob.size() < sizeof magic + 2 * sizeof(uint32_t) + sizeof(uint64_t))
    return invalid_argument("saved state is truncated (" + std::to_string(blob.size()) + " bytes)");
  std::memcpy(magic, blob.data(), sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof magic) != 0) return invalid_argument("not a chimera saved state (bad magic)");
  uint32_t version = 0;
  std::memcpy(&version, blob.data() + sizeof magic, sizeof version);
  if (version != kSessionFormatVersion)
    return unsupported("saved state has format version " + std::to_string(version) + ", this library reads version " +
                       std::to_string(kSessionFormatVersion));
  const size_t body = blob.size() - sizeof(uint64_t);
  uint64_t sum = 0;
  std::memcpy(&sum, blob.data() + body, sizeof sum);
  if (fnv1a(blob.data(), body) != sum) return invalid_argument("saved state is corrupted (checksum mismatch)");

  Reader r(blob.first(body));
  uint32_t reserved = 0;
  CHIMERA_RETURN_IF_ERROR(r.bytes(magic, sizeof magic, "header"));
  CHIMERA_RETURN_IF_ERROR(r.get(&version, "header"));
  CHIMERA_RETURN_IF_ERROR(r.get(&reserved, "header"));
  uint64_t arch_len = 0;
  CHIMERA_RETURN_IF_ERROR(r.count(&arch_len, 1, "architecture"));
  std::string arch(arch_len, '\0');
  CHIMERA_RETURN_IF_ERROR(r.bytes(arch.data(), arch_len, "architecture"));
  if (arch != info.arch)
    return invalid_argument("saved state is from a '" + arch + "' model, this model is '" + info.arch + "'");
  int64_t n_vocab = 0, n_embd = 0, n_layer = 0, n_past = 0;
  CHIMERA_RETURN_IF_ERROR(r.get(&n_vocab, "header"));
  CHIMERA_RETURN_IF_ERROR(r.get(&n_embd, "header"));
  CHIMERA_RETURN_IF_ERROR(r.get(&n_layer, "header"));
  CHIMERA_RETURN_IF_ERROR(r.get(&n_past, "header"));
  CHIMERA_RETURN_IF_ERROR(expect_dim(n_vocab, info.n_vocab, "n_vocab"));
  CHIMERA_RETURN_IF_ERROR(expect_dim(n_embd, info.n_embd, "n_embd"));
  CHIMERA_RETURN_IF_ERROR(expect_dim(n_layer, info.n_layer, "n_layer"));
  const int64_t n_ctx = into->state->n_ctx();
  if (n_past < 0 || n_past > n_ctx)
    return invalid_argument("saved state holds " + std::to_string(n_past) + " tokens, the context holds " +
                            std::to_string(n_ctx));

  SequenceSession s;
  CHIMERA_RETURN_IF_ERROR(read_ids(r, n_vocab, "history", &s.history));
  CHIMERA_RETURN_IF_ERROR(read_ids(r, n_vocab, "pending tokens", &s.pending));
  if ((int64_t)s.history.size() != n_past + (int64_t)s.pending.size())
    return invalid_argument("saved state is inconsistent: " + std::to_string(s.history.size()) +
                            " history tokens for " + std::to_string(n_past) + " fed and " +
                            std::to_string(s.pending.size()) + " pending");
  uint8_t have = 0;
  CHIMERA_RETURN_IF_ERROR(r.get(&have, "logits flag"));
  if (have > 1) return invalid_argument("saved state is corrupted (logits flag " + std::to_string(have) + ")");
  s.have_logits = have == 1;
  s.logits.assign((size_t)n_vocab, 0.0f);
  if (s.have_logits) CHIMERA_RETURN_IF_ERROR(r.floats(s.logits.data(), n_vocab, "logits"));

  s.state = m.new_state(n_ctx, into->state->kv_types());  // the KV types of the context it loads into
  layers::SequenceState& st = *s.state;
  for (size_t i = 0; i < st.n_layers(); ++i) {
    const std::string layer = "layer " + std::to_string(i);
    uint8_t kind = 0;
    CHIMERA_RETURN_IF_ERROR(r.get(&kind, "layer kind"));
    int64_t a = 0, b = 0, c = 0, d = 0;
    if (layers::KvCache* kv = st.kv(i)) {
      if (kind != kKv) return invalid_argument("saved state does not fit this model: " + layer + " kind differs");
      CHIMERA_RETURN_IF_ERROR(r.get(&a, "kv dims"));
      CHIMERA_RETURN_IF_ERROR(r.get(&b, "kv dims"));
      CHIMERA_RETURN_IF_ERROR(expect_dim(a, kv->spec().n_embd_k, layer + " key width"));
      CHIMERA_RETURN_IF_ERROR(expect_dim(b, kv->spec().n_embd_v, layer + " value width"));
      std::vector<float> k((size_t)(n_past * a)), v((size_t)(n_past * b));
      CHIMERA_RETURN_IF_ERROR(r.floats(k.data(), n_past * a, "keys"));
      CHIMERA_RETURN_IF_ERROR(r.floats(v.data(), n_past * b, "values"));
      kv->store(0, n_past, k.data(), a, v.data(), b);
    } else if (layers::RecurrentState* rs = st.recurrent(i)) {
      if (kind != kRecurrent) return invalid_argument("saved state does not fit this model: " + layer + " kind differs");
      CHIMERA_RETURN_IF_ERROR(r.get(&a, "recurrent dims"));
      CHIMERA_RETURN_IF_ERROR(r.get(&b, "recurrent dims"));
      CHIMERA_RETURN_IF_ERROR(r.get(&c, "recurrent dims"));
      CHIMERA_RETURN_IF_ERROR(expect_dim(a, rs->spec().conv_channels, layer + " conv channels"));
      CHIMERA_RETURN_IF_ERROR(expect_dim(b, rs->spec().conv_rows, layer + " conv rows"));
      CHIMERA_RETURN_IF_ERROR(expect_dim(c, rs->spec().ssm_floats, layer + " ssm size"));
      CHIMERA_RETURN_IF_ERROR(r.floats(rs->conv(), a * b, "conv state"));
      CHIMERA_RETURN_IF_ERROR(r.floats(rs->ssm(), c, "ssm state"));
    } else if (layers::RingKvCache* g = st.ring(i)) {
      if (kind != kRing) return invalid_argument("saved state does not fit this model: " + layer + " kind differs");
      CHIMERA_RETURN_IF_ERROR(r.get(&a, "ring dims"));
      CHIMERA_RETURN_IF_ERROR(r.get(&b, "ring dims"));
      CHIMERA_RETURN_IF_ERROR(r.get(&c, "ring dims"));
      CHIMERA_RETURN_IF_ERROR(r.get(&d, "ring dims"));
      CHIMERA_RETURN_IF_ERROR(expect_dim(a, g->spec().n_embd_k, layer + " key width"));
      CHIMERA_RETURN_IF_ERROR(expect_dim(b, g->spec().n_embd_v, layer + " value width"));
      CHIMERA_RETURN_IF_ERROR(expect_dim(c, g->spec().window, layer + " window"));
      CHIMERA_RETURN_IF_ERROR(expect_dim(d, g->rows(), layer + " ring rows (contexts of different sizes)"));
      CHIMERA_RETURN_IF_ERROR(r.floats(g->k_row(0), d * a, "ring keys"));
      CHIMERA_RETURN_IF_ERROR(r.floats(g->v_row(0), d * b, "ring values"));
    } else if (kind != kNone) {
      return invalid_argument("saved state does not fit this model: " + layer + " kind differs");
    }
  }
  if (r.pos() != body) return invalid_argument("saved state has " + std::to_string(body - r.pos()) + " extra bytes");
  st.advance(n_past);
  *into = std::move(s);
  return Status::ok();
}

}  // namespace chimera::runtime
