// GGUF parser. Every read goes through Cursor, which refuses to move past the
// end of the file. Counts are checked against the bytes that remain (each item
// has a minimum encoded size) and against the global limits in gguf.h *before*
// anything is allocated, so a hostile header cannot make us allocate more than
// the file could encode, recurse without bound or loop for long. Containers are
// reserved only up to a small bound and then grow with what was really parsed.
// Errors name the item (metadata key / tensor name) and the byte position.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "format/gguf/gguf.h"

namespace chimera::format {

namespace {

constexpr uint64_t kMaxStringLen = 1ull << 30;  // 1 GiB; real strings are far shorter
constexpr uint64_t kMaxReserve = 1ull << 12;    // up-front reservation cap
// Minimum encoded size of one tensor info: name length (8), n_dims (4), one
// dimension (8), type (4), offset (8).
constexpr uint64_t kMinTensorInfo = 32;
// Minimum encoded size of one key/value: key length (8), type (4), one byte.
constexpr uint64_t kMinKeyValue = 13;

class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return n_ - pos_; }
  Status read(void* out, size_t bytes, const char* what) {
    if (bytes > remaining())
      return out_of_range(std::string("unexpected end of file reading the ") + what + " at byte " +
                          std::to_string(pos_) + " (needs " + std::to_string(bytes) + " bytes, " +
                          std::to_string(remaining()) + " left)");
    std::memcpy(out, p_ + pos_, bytes);
    pos_ += bytes;
    return Status::ok();
  }
  template <typename T>
  Status get(T* out, const char* what) { return read(out, sizeof(T), what); }
  Status get_string(std::string* out, const char* what) {
    const size_t at = pos_;
    uint64_t len;
    CHIMERA_RETURN_IF_ERROR(get(&len, what));
    if (len > remaining())
      return out_of_range(std::string(what) + " at byte " + std::to_string(at) + " claims " + std::to_string(len) +
                          " bytes but only " + std::to_string(remaining()) + " remain in the file");
    if (len > kMaxStringLen)
      return out_of_range(std::string(what) + " at byte " + std::to_string(at) + " is " + std::to_string(len) +
                          " bytes long (limit " + std::to_string(kMaxStringLen) + ")");
    out->assign(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return Status::ok();
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

size_t min_encoded_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    case GgufType::STRING: return 8;
    case GgufType::ARRAY: return 12;
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= (uint32_t)GgufType::FLOAT64; }

// Why a tensor type id is unknown, for ids ggml once used.
std::string removed_type_hint(uint32_t t) {
  if (t == 4 || t == 5) return " (Q4_2/Q4_3 were removed from ggml; re-convert the model)";
  if (t >= 31 && t <= 33) return " (Q4_0_4_4/Q4_0_4_8/Q4_0_8_8 were removed from ggml; re-quantize the model)";
  if (t >= 37 && t <= 38) return " (IQ4_NL_4_8/8_8 were removed from ggml; re-quantize the model)";
  return "";
}

// A name from the file, quoted for an error message: at most 80 bytes, control
// bytes escaped, so a hostile key cannot flood or garble the message.
std::string q(std::string_view name) {
  std::string out = "'";
  for (size_t k = 0; k < name.size() && k < 80; ++k) {
    const unsigned char c = (unsigned char)name[k];
    if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += (char)c;
    }
  }
  if (name.size() > 80) out += "...(" + std::to_string(name.size()) + " bytes)";
  return out + "'";
}

uint32_t bswap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

}  // namespace

class GgufParser {
 public:
  explicit GgufParser(std::shared_ptr<MappedFile> file)
      : file_(std::move(file)), c_(file_->data(), file_->size()) {}

  Result<std::unique_ptr<GgufFile>> run() {
    g_.reset(new GgufFile());
    g_->file_ = file_;
    CHIMERA_RETURN_IF_ERROR(read_header());
    CHIMERA_RETURN_IF_ERROR(read_metadata());
    CHIMERA_RETURN_IF_ERROR(read_alignment());
    CHIMERA_RETURN_IF_ERROR(read_tensor_infos());
    CHIMERA_RETURN_IF_ERROR(place_tensors());
    return std::move(g_);
  }

 private:
  Status read_header() {
    if (file_->size() < 4)
      return invalid_argument("file is too small to be GGUF (" + std::to_string(file_->size()) + " bytes)");
    char magic[4];
    CHIMERA_RETURN_IF_ERROR(c_.read(magic, 4, "magic"));
    if (std::memcmp(magic, "GGUF", 4) != 0) return invalid_argument("not a GGUF file (bad magic)");
    uint32_t v;
    CHIMERA_RETURN_IF_ERROR(c_.get(&v, "version"));
    g_->version_ = v;
    if (v == 1) return unsupported("GGUF version 1 is not supported (re-convert the model)");
    if (v != 2 && v != 3) {
      if (bswap32(v) == 2 || bswap32(v) == 3)
        return unsupported("big-endian GGUF files are not supported (version field reads " + std::to_string(v) + ")");
      return unsupported("unsupported GGUF version " + std::to_string(v) + " (2 and 3 are supported)");
    }
    CHIMERA_RETURN_IF_ERROR(c_.get(&n_tensors_, "tensor count"));
    CHIMERA_RETURN_IF_ERROR(c_.get(&n_kv_, "metadata count"));
    if (n_kv_ > kGgufMaxKeys || n_kv_ > c_.remaining() / kMinKeyValue)
      return out_of_range("metadata count " + std::to_string(n_kv_) + " is larger than the file can hold (" +
                          std::to_string(c_.remaining()) + " bytes follow the header)");
    if (n_tensors_ > kGgufMaxTensors || n_tensors_ > c_.remaining() / kMinTensorInfo)
      return out_of_range("tensor count " + std::to_string(n_tensors_) + " is larger than the file can hold (" +
                          std::to_string(c_.remaining()) + " bytes follow the header, limit " +
                          std::to_string(kGgufMaxTensors) + " tensors)");
    return Status::ok();
  }

  // Accounts for n more metadata values; fails before they are allocated.
  Status charge_values(uint64_t n, const std::string& key) {
    if (n > kGgufMaxValues - values_)
      return out_of_range("metadata " + q(key) + ": more than " + std::to_string(kGgufMaxValues) +
                          " metadata values in the file");
    values_ += n;
    return Status::ok();
  }

  Status read_value(GgufType type, GgufValue* v, int depth, const std::string& key) {
    v->type = type;
    switch (type) {
      case GgufType::UINT8: { uint8_t x; CHIMERA_RETURN_IF_ERROR(c_.get(&x, "uint8 value")); v->u = x; v->i = x; break; }
      case GgufType::INT8: { int8_t x; CHIMERA_RETURN_IF_ERROR(c_.get(&x, "int8 value")); v->i = x; break; }
      case GgufType::UINT16: { uint16_t x; CHIMERA_RETURN_IF_ERROR(c_.get(&x, "uint16 value")); v->u = x; v->i = x; break; }
      case GgufType::INT16: { int16_t x; CHIMERA_RETURN_IF_ERROR(c_.get(&x, "int16 value")); v->i = x; break; }
      case GgufType::UINT32: { uint32_t x; CHIMERA_RETURN_IF_ERROR(c_.get(&x, "uint32 value")); v->u = x; v->i = x; break; }
      case GgufType::INT32: { int32_t x; CHIMERA_RETURN_IF_ERROR(c_.get(&x, "int32 value")); v->i = x; break; }
      case GgufType::UINT64: { uint64_t x; CHIMERA_RETURN_IF_ERROR(c_.get(&x, "uint64 value")); v->u = x; v->i = (int64_t)x; break; }
      case GgufType::INT64: { int64_t x; CHIMERA_RETURN_IF_ERROR(c_.get(&x, "int64 value")); v->i = x; break; }
      case GgufType::FLOAT32: { float x; CHIMERA_RETURN_IF_ERROR(c_.get(&x, "float32 value")); v->f = x; break; }
      case GgufType::FLOAT64: { double x; CHIMERA_RETURN_IF_ERROR(c_.get(&x, "float64 value")); v->f = x; break; }
      case GgufType::BOOL: {
        const size_t at = c_.pos();
        uint8_t x;
        CHIMERA_RETURN_IF_ERROR(c_.get(&x, "bool value"));
        if (x > 1)
          return invalid_argument("bool value " + std::to_string(x) + " at byte " + std::to_string(at) +
                                  " is not 0 or 1");
        v->u = x; v->i = x;
        break;
      }
      case GgufType::STRING: CHIMERA_RETURN_IF_ERROR(c_.get_string(&v->s, "string value")); break;
      case GgufType::ARRAY: {
        const size_t at = c_.pos();
        if (depth >= kGgufMaxArrayDepth)
          return invalid_argument("arrays nested more than " + std::to_string(kGgufMaxArrayDepth) +
                                  " levels deep at byte " + std::to_string(at));
        uint32_t et;
        uint64_t n;
        CHIMERA_RETURN_IF_ERROR(c_.get(&et, "array element type"));
        if (!valid_value_type(et))
          return invalid_argument("unknown array element type " + std::to_string(et) + " at byte " + std::to_string(at));
        CHIMERA_RETURN_IF_ERROR(c_.get(&n, "array length"));
        const size_t min_sz = min_encoded_size((GgufType)et);
        if (n > c_.remaining() / min_sz)
          return out_of_range("array of " + std::to_string(n) + " " + gguf_type_name((GgufType)et) +
                              " elements at byte " + std::to_string(at) + " cannot fit in the remaining " +
                              std::to_string(c_.remaining()) + " bytes");
        CHIMERA_RETURN_IF_ERROR(charge_values(n, key));
        v->elem_type = (GgufType)et;
        v->arr.resize(n);
        for (uint64_t k = 0; k < n; ++k)
          CHIMERA_RETURN_IF_ERROR(read_value(v->elem_type, &v->arr[k], depth + 1, key));
        break;
      }
    }
    return Status::ok();
  }

  Status read_metadata() {
    g_->kv_.reserve(std::min(n_kv_, kMaxReserve));
    for (uint64_t k = 0; k < n_kv_; ++k) {
      const std::string where = "metadata entry " + std::to_string(k) + " of " + std::to_string(n_kv_);
      std::string key;
      CHIMERA_RETURN_IF_ERROR(c_.get_string(&key, "metadata key").with_context(where));
      if (key.empty()) return invalid_argument(where + " has an empty key");
      if (g_->kv_index_.count(key)) return invalid_argument("duplicate metadata key " + q(key));
      uint32_t t;
      CHIMERA_RETURN_IF_ERROR(c_.get(&t, "metadata value type").with_context("metadata " + q(key)));
      if (!valid_value_type(t))
        return invalid_argument("metadata " + q(key) + " has unknown value type " + std::to_string(t));
      CHIMERA_RETURN_IF_ERROR(charge_values(1, key));
      GgufValue v;
      CHIMERA_RETURN_IF_ERROR(read_value((GgufType)t, &v, 0, key).with_context("metadata " + q(key)));
      g_->kv_index_.emplace(key, g_->kv_.size());
      g_->kv_.emplace_back(std::move(key), std::move(v));
    }
    return Status::ok();
  }

  Status read_alignment() {
    const GgufValue* a = g_->find("general.alignment");
    if (!a) return Status::ok();
    auto av = a->as_int();
    if (!av || a->type == GgufType::BOOL)
      return invalid_argument(std::string("general.alignment must be an integer (got ") + gguf_type_name(a->type) +
                              " " + a->to_display(4) + ")");
    if (*av <= 0 || (*av & (*av - 1)) != 0 || (uint64_t)*av > kGgufMaxAlignment)
      return invalid_argument("general.alignment must be a power of two between 1 and " +
                              std::to_string(kGgufMaxAlignment) + " (got " + std::to_string(*av) + ")");
    g_->alignment_ = (uint64_t)*av;
    return Status::ok();
  }

  Status read_tensor_info(uint64_t k, GgufTensorInfo* t) {
    CHIMERA_RETURN_IF_ERROR(c_.get_string(&t->name, "tensor name")
                                .with_context("tensor " + std::to_string(k) + " of " + std::to_string(n_tensors_)));
    if (t->name.empty()) return invalid_argument("tensor " + std::to_string(k) + " has an empty name");
    const std::string ctx = "tensor " + q(t->name);
    if (g_->tensor_index_.count(t->name)) return invalid_argument("duplicate tensor name " + q(t->name));
    uint32_t n_dims;
    CHIMERA_RETURN_IF_ERROR(c_.get(&n_dims, "tensor dimension count").with_context(ctx));
    if (n_dims == 0 || n_dims > kGgufMaxDims)
      return invalid_argument(ctx + ": " + std::to_string(n_dims) + " dimensions (1 to " +
                              std::to_string(kGgufMaxDims) + " allowed)");
    t->ne.resize(n_dims);
    uint64_t n_el = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim;
      CHIMERA_RETURN_IF_ERROR(c_.get(&dim, "tensor dimension").with_context(ctx));
      if (dim == 0 || dim > (uint64_t)std::numeric_limits<int64_t>::max())
        return invalid_argument(ctx + ": dimension " + std::to_string(d) + " is " +
                                (dim == 0 ? std::string("0 (empty tensors are not allowed)")
                                          : std::to_string(dim) + " (larger than INT64_MAX)"));
      if (n_el > (uint64_t)std::numeric_limits<int64_t>::max() / dim)
        return out_of_range(ctx + ": element count overflows int64 at dimension " + std::to_string(d));
      n_el *= dim;
      t->ne[d] = (int64_t)dim;
    }
    uint32_t type;
    CHIMERA_RETURN_IF_ERROR(c_.get(&type, "tensor type").with_context(ctx));
    auto info = ggml_type_info(type);
    if (!info) return unsupported(ctx + ": unknown tensor type id " + std::to_string(type) + removed_type_hint(type));
    t->type = (GgmlType)type;
    if (t->ne[0] % info->block_size != 0)
      return invalid_argument(ctx + ": row length " + std::to_string(t->ne[0]) + " is not a multiple of the " +
                              info->name + " block size " + std::to_string(info->block_size));
    const uint64_t blocks = n_el / (uint64_t)info->block_size;
    if (blocks > std::numeric_limits<uint64_t>::max() / info->type_size)
      return out_of_range(ctx + ": byte size overflows");
    t->n_elements = n_el;
    t->n_bytes = blocks * info->type_size + ggml_tensor_tail_bytes(t->type);  // I2_S: + 32-byte scale tail
    CHIMERA_RETURN_IF_ERROR(c_.get(&t->offset, "tensor data offset").with_context(ctx));
    if (t->offset % g_->alignment_ != 0)
      return invalid_argument(ctx + ": data offset " + std::to_string(t->offset) +
                              " is not a multiple of the alignment " + std::to_string(g_->alignment_));
    return Status::ok();
  }

  Status read_tensor_infos() {
    g_->tensors_.reserve(std::min(n_tensors_, kMaxReserve));
    for (uint64_t k = 0; k < n_tensors_; ++k) {
      GgufTensorInfo t;
      CHIMERA_RETURN_IF_ERROR(read_tensor_info(k, &t));
      g_->tensor_index_.emplace(t.name, g_->tensors_.size());
      g_->tensors_.push_back(std::move(t));
    }
    return Status::ok();
  }

  // Data section starts at the next multiple of the alignment after the header.
  Status place_tensors() {
    const uint64_t size = file_->size();
    const uint64_t hdr = c_.pos();
    const uint64_t align = g_->alignment_;
    const uint64_t data_start = (hdr + align - 1) / align * align;
    g_->data_offset_ = data_start;
    if (g_->tensors_.empty()) return Status::ok();
    if (data_start > size)
      return out_of_range("file ends at byte " + std::to_string(size) + ", before the tensor data section at byte " +
                          std::to_string(data_start) + "; the file may be truncated");
    const uint64_t data_size = size - data_start;
    auto& ts = g_->tensors_;
    for (auto& t : ts) {
      if (t.offset > data_size || t.n_bytes > data_size - t.offset)
        return out_of_range("tensor " + q(t.name) + " (" + std::to_string(t.n_bytes) + " bytes at data offset " +
                            std::to_string(t.offset) + ") extends past the end of the file (the data section has " +
                            std::to_string(data_size) + " bytes); the file may be truncated");
      t.data = file_->data() + data_start + t.offset;
    }
    // Tensors may not share bytes: a file whose tensors alias each other is corrupt.
    std::vector<size_t> order(ts.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ts[a].offset < ts[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const auto& prev = ts[order[k - 1]];
      const auto& cur = ts[order[k]];
      if (cur.offset < prev.offset + prev.n_bytes)
        return invalid_argument("tensor " + q(cur.name) + " (data offset " + std::to_string(cur.offset) +
                                ") overlaps tensor " + q(prev.name) + " (data offset " + std::to_string(prev.offset) +
                                ", " + std::to_string(prev.n_bytes) + " bytes)");
    }
    return Status::ok();
  }

  std::shared_ptr<MappedFile> file_;
  Cursor c_;
  std::unique_ptr<GgufFile> g_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  uint64_t values_ = 0;
};

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  CHIMERA_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  auto r = GgufParser(std::move(file)).run();
  if (!r.is_ok()) return r.status().with_context("'" + path + "'");
  return r;
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(std::shared_ptr<MappedFile> file) {
  if (!file) return invalid_argument("no file to parse");
  return GgufParser(std::move(file)).run();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_int() : std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_double() : std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == GgufType::BOOL) return v->u != 0;
  if (auto i = v->as_int()) return *i != 0;
  return std::nullopt;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::STRING) return std::nullopt;
  return v->s;
}

const GgufValue* GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  return (v && v->type == GgufType::ARRAY) ? v : nullptr;
}

Result<std::vector<int64_t>> GgufFile::get_per_layer_int(std::string_view key, size_t n_layer,
                                                          std::optional<int64_t> fallback) const {
  // n_layer usually comes from the file (block_count): refuse absurd values
  // rather than allocating for them.
  if (n_layer > kGgufMaxLayers)
    return invalid_argument("metadata '" + std::string(key) + "': layer count " + std::to_string(n_layer) +
                            " is implausible (limit " + std::to_string(kGgufMaxLayers) + ")");
  const GgufValue* v = find(key);
  if (!v) {
    if (!fallback) return not_found("missing metadata key '" + std::string(key) + "'");
    return std::vector<int64_t>(n_layer, *fallback);
  }
  if (v->type == GgufType::ARRAY) {
    if (v->arr.size() != n_layer)
      return invalid_argument("metadata '" + std::string(key) + "' has " + std::to_string(v->arr.size()) +
                              " entries, expected one per layer (" + std::to_string(n_layer) + ")");
    std::vector<int64_t> out;
    for (const auto& e : v->arr) {
      auto x = e.as_int();
      if (!x) return invalid_argument("metadata '" + std::string(key) + "' must hold integers");
      out.push_back(*x);
    }
    return out;
  }
  auto x = v->as_int();
  if (!x) return invalid_argument("metadata '" + std::string(key) + "' must be an integer");
  return std::vector<int64_t>(n_layer, *x);
}

std::string GgufFile::architecture() const { return get_string("general.architecture").value_or(""); }

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

uint64_t GgufFile::tensor_bytes() const {
  uint64_t s = 0;
  for (const auto& t : tensors_) s += t.n_bytes;
  return s;
}

}  // namespace chimera::format
