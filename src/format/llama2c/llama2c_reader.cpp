// Readers for the llama2.c legacy checkpoint and tokenizer.bin (layouts in
// llama2c.h). Both files are untrusted: header values are range-checked, all
// sizes are computed in uint64 with overflow checks, and the computed size must
// equal the file size exactly, so a truncated, padded or foreign file is
// reported instead of being misread.
#include <cstring>
#include <limits>

#include "format/llama2c/llama2c.h"

namespace chimera::format::llama2c {

namespace {

constexpr uint32_t kVersionedMagic = 0x616b3432;  // "ak42": llama2.c export v1+ (and bitnet-llama2c)
constexpr uint64_t kHeaderBytes = 7 * sizeof(int32_t);

int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Lays arrays out one after another, failing on uint64 overflow.
class Layout {
 public:
  explicit Layout(uint64_t start) : pos_(start) {}
  bool ok() const { return ok_; }
  uint64_t pos() const { return pos_; }
  Array take(std::initializer_list<uint64_t> dims) {
    uint64_t count = 1;
    for (uint64_t d : dims) ok_ = ok_ && !__builtin_mul_overflow(count, d, &count);
    uint64_t bytes = 0;
    ok_ = ok_ && !__builtin_mul_overflow(count, uint64_t{sizeof(float)}, &bytes);
    Array a{pos_, count};
    ok_ = ok_ && !__builtin_add_overflow(pos_, bytes, &pos_);
    return a;
  }

 private:
  uint64_t pos_;
  bool ok_ = true;
};

std::string describe(const Config& c) {
  return "dim=" + std::to_string(c.dim) + " hidden_dim=" + std::to_string(c.hidden_dim) +
         " n_layers=" + std::to_string(c.n_layers) + " n_heads=" + std::to_string(c.n_heads) +
         " n_kv_heads=" + std::to_string(c.n_kv_heads) + " vocab_size=" + std::to_string(c.vocab_size) +
         " seq_len=" + std::to_string(c.seq_len) + (c.shared_classifier ? " (shared classifier)" : " (own classifier)");
}

}  // namespace

Result<Checkpoint> Checkpoint::open(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.status();
  auto ck = parse(std::move(file).value());
  if (!ck) return ck.status().with_context("llama2.c checkpoint '" + path + "'");
  return ck;
}

Result<Checkpoint> Checkpoint::parse(std::shared_ptr<MappedFile> file) {
  if (!file) return invalid_argument("no file");
  const uint64_t size = file->size();
  if (size < kHeaderBytes)
    return invalid_argument("file is " + std::to_string(size) + " bytes, too short for the 28-byte header");
  const uint8_t* d = file->data();
  if (static_cast<uint32_t>(load_i32(d)) == kVersionedMagic)
    return unsupported("file starts with the magic 'ak42' of the versioned llama2.c export (or bitnet-llama2c); "
                       "only the legacy (version 0) checkpoint is supported by --from llama2c");

  Config c;
  c.dim = load_i32(d + 0);
  c.hidden_dim = load_i32(d + 4);
  c.n_layers = load_i32(d + 8);
  c.n_heads = load_i32(d + 12);
  c.n_kv_heads = load_i32(d + 16);
  const int32_t raw_vocab = load_i32(d + 20);
  c.seq_len = load_i32(d + 24);
  c.shared_classifier = raw_vocab > 0;
  c.vocab_size = raw_vocab == std::numeric_limits<int32_t>::min() ? 0 : (raw_vocab < 0 ? -raw_vocab : raw_vocab);

  if (c.dim <= 0 || c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
      c.vocab_size <= 0 || c.seq_len <= 0)
    return invalid_argument("implausible header (" + describe(c) + "): every value must be positive; "
                            "is this a llama2.c checkpoint?");
  if (c.dim % c.n_heads != 0)
    return invalid_argument("dim " + std::to_string(c.dim) + " is not a multiple of n_heads " +
                            std::to_string(c.n_heads) + " (" + describe(c) + ")");
  if (c.n_kv_heads > c.n_heads || c.n_heads % c.n_kv_heads != 0)
    return invalid_argument("n_heads " + std::to_string(c.n_heads) + " is not a multiple of n_kv_heads " +
                            std::to_string(c.n_kv_heads) + " (" + describe(c) + ")");

  const uint64_t L = static_cast<uint64_t>(c.n_layers), dim = static_cast<uint64_t>(c.dim);
  const uint64_t hid = static_cast<uint64_t>(c.hidden_dim), kv = static_cast<uint64_t>(c.kv_dim());
  const uint64_t vocab = static_cast<uint64_t>(c.vocab_size);
  Checkpoint ck;
  Layout lay(kHeaderBytes);
  ck.token_embedding = lay.take({vocab, dim});
  ck.rms_att = lay.take({L, dim});
  ck.wq = lay.take({L, dim, dim});
  ck.wk = lay.take({L, kv, dim});
  ck.wv = lay.take({L, kv, dim});
  ck.wo = lay.take({L, dim, dim});
  ck.rms_ffn = lay.take({L, dim});
  ck.w1 = lay.take({L, hid, dim});
  ck.w2 = lay.take({L, dim, hid});
  ck.w3 = lay.take({L, hid, dim});
  ck.rms_final = lay.take({dim});
  lay.take({static_cast<uint64_t>(c.seq_len), static_cast<uint64_t>(c.head_size())});  // legacy RoPE tables
  ck.classifier = c.shared_classifier ? ck.token_embedding : lay.take({vocab, dim});
  if (!lay.ok()) return invalid_argument("header sizes overflow (" + describe(c) + ")");
  const uint64_t expected = lay.pos();
  if (size < expected)
    return invalid_argument("truncated: the header (" + describe(c) + ") needs " + std::to_string(expected) +
                            " bytes but the file has " + std::to_string(size));
  if (size > expected)
    return invalid_argument("the header (" + describe(c) + ") accounts for " + std::to_string(expected) +
                            " bytes but the file has " + std::to_string(size) + " (" +
                            std::to_string(size - expected) +
                            " unexpected trailing bytes): wrong classifier sign or not a llama2.c checkpoint?");
  ck.config_ = c;
  ck.file_ = std::move(file);
  return ck;
}

Array Checkpoint::layer_slice(const Array& a, int32_t layer) const {
  const uint64_t per = a.count / static_cast<uint64_t>(config_.n_layers);
  return Array{a.offset + per * sizeof(float) * static_cast<uint64_t>(layer), per};
}

Result<Vocab> Vocab::open(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.status();
  return parse(file.value()->data(), file.value()->size(), "vocabulary '" + path + "'");
}

Result<Vocab> Vocab::parse(const uint8_t* data, size_t size, const std::string& what) {
  if (size < sizeof(int32_t)) return invalid_argument(what + ": too short for the max_token_length header");
  Vocab v;
  v.max_token_length = load_i32(data);
  if (v.max_token_length < 0)
    return invalid_argument(what + ": negative max_token_length " + std::to_string(v.max_token_length));
  size_t pos = sizeof(int32_t);
  while (pos < size) {
    const size_t id = v.tokens.size();
    if (size - pos < 8)
      return invalid_argument(what + ": truncated in the header of token " + std::to_string(id) + " at byte " +
                              std::to_string(pos));
    VocabEntry e;
    e.score = load_f32(data + pos);
    const int32_t len = load_i32(data + pos + 4);
    pos += 8;
    if (len < 0)
      return invalid_argument(what + ": token " + std::to_string(id) + " has negative length " +
                              std::to_string(len));
    if (static_cast<size_t>(len) > size - pos)
      return invalid_argument(what + ": truncated: token " + std::to_string(id) + " needs " + std::to_string(len) +
                              " bytes, " + std::to_string(size - pos) + " left");
    e.text.assign(reinterpret_cast<const char*>(data + pos), static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
    v.tokens.push_back(std::move(e));
  }
  return v;
}

}  // namespace chimera::format::llama2c
