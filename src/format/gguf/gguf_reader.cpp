// GGUF parser. Every read goes through Cursor, which refuses to move past the
// end of the file; counts are checked against the bytes that remain before any
// allocation, so a hostile header cannot make us allocate or loop without bound.
#include <algorithm>
#include <cstring>
#include <limits>

#include "format/gguf/gguf.h"

namespace chimera::format {

namespace {

constexpr uint64_t kMaxStringLen = 1ull << 30;   // 1 GiB
constexpr int kMaxArrayDepth = 8;
constexpr uint32_t kMaxDims = 4;

std::string hexu(uint64_t v) { return std::to_string(v); }

class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return n_ - pos_; }
  Status read(void* out, size_t bytes, const char* what) {
    if (bytes > remaining())
      return out_of_range(std::string("unexpected end of file while reading ") + what + " at byte " +
                          std::to_string(pos_));
    std::memcpy(out, p_ + pos_, bytes);
    pos_ += bytes;
    return Status::ok();
  }
  template <typename T>
  Status get(T* out, const char* what) { return read(out, sizeof(T), what); }
  Status get_string(std::string* out, const char* what) {
    uint64_t len;
    CHIMERA_RETURN_IF_ERROR(get(&len, what));
    if (len > remaining() || len > kMaxStringLen)
      return out_of_range(std::string(what) + ": string length " + std::to_string(len) +
                          " exceeds the remaining " + std::to_string(remaining()) + " bytes");
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

bool valid_type(uint32_t t) { return t <= 12; }

Status read_value(Cursor& c, GgufType type, GgufValue* v, int depth, const std::string& key) {
  v->type = type;
  switch (type) {
    case GgufType::UINT8: { uint8_t x; CHIMERA_RETURN_IF_ERROR(c.get(&x, "uint8 value")); v->u = x; v->i = x; break; }
    case GgufType::INT8: { int8_t x; CHIMERA_RETURN_IF_ERROR(c.get(&x, "int8 value")); v->i = x; break; }
    case GgufType::UINT16: { uint16_t x; CHIMERA_RETURN_IF_ERROR(c.get(&x, "uint16 value")); v->u = x; v->i = x; break; }
    case GgufType::INT16: { int16_t x; CHIMERA_RETURN_IF_ERROR(c.get(&x, "int16 value")); v->i = x; break; }
    case GgufType::UINT32: { uint32_t x; CHIMERA_RETURN_IF_ERROR(c.get(&x, "uint32 value")); v->u = x; v->i = x; break; }
    case GgufType::INT32: { int32_t x; CHIMERA_RETURN_IF_ERROR(c.get(&x, "int32 value")); v->i = x; break; }
    case GgufType::UINT64: { uint64_t x; CHIMERA_RETURN_IF_ERROR(c.get(&x, "uint64 value")); v->u = x; v->i = (int64_t)x; break; }
    case GgufType::INT64: { int64_t x; CHIMERA_RETURN_IF_ERROR(c.get(&x, "int64 value")); v->i = x; break; }
    case GgufType::FLOAT32: { float x; CHIMERA_RETURN_IF_ERROR(c.get(&x, "float32 value")); v->f = x; break; }
    case GgufType::FLOAT64: { double x; CHIMERA_RETURN_IF_ERROR(c.get(&x, "float64 value")); v->f = x; break; }
    case GgufType::BOOL: {
      uint8_t x;
      CHIMERA_RETURN_IF_ERROR(c.get(&x, "bool value"));
      if (x > 1) return invalid_argument("metadata '" + key + "': bool value " + std::to_string(x) + " is not 0 or 1");
      v->u = x; v->i = x;
      break;
    }
    case GgufType::STRING: CHIMERA_RETURN_IF_ERROR(c.get_string(&v->s, "string value")); break;
    case GgufType::ARRAY: {
      if (depth >= kMaxArrayDepth) return invalid_argument("metadata '" + key + "': arrays nested too deeply");
      uint32_t et;
      uint64_t n;
      CHIMERA_RETURN_IF_ERROR(c.get(&et, "array element type"));
      if (!valid_type(et)) return invalid_argument("metadata '" + key + "': unknown array element type " + std::to_string(et));
      CHIMERA_RETURN_IF_ERROR(c.get(&n, "array length"));
      const size_t min_sz = min_encoded_size((GgufType)et);
      if (n > c.remaining() / min_sz)
        return out_of_range("metadata '" + key + "': array of " + std::to_string(n) +
                            " elements cannot fit in the remaining " + std::to_string(c.remaining()) + " bytes");
      v->elem_type = (GgufType)et;
      v->arr.resize(n);
      for (uint64_t k = 0; k < n; ++k)
        CHIMERA_RETURN_IF_ERROR(read_value(c, v->elem_type, &v->arr[k], depth + 1, key));
      break;
    }
  }
  return Status::ok();
}

}  // namespace

class GgufParser {
 public:
  static Result<std::unique_ptr<GgufFile>> run(std::shared_ptr<MappedFile> file) {
    std::unique_ptr<GgufFile> g(new GgufFile());
    g->file_ = file;
    Cursor c(file->data(), file->size());
    char magic[4];
    if (file->size() < 4) return invalid_argument("file is too small to be GGUF (" + std::to_string(file->size()) + " bytes)");
    CHIMERA_RETURN_IF_ERROR(c.read(magic, 4, "magic"));
    if (std::memcmp(magic, "GGUF", 4) != 0) return invalid_argument("not a GGUF file (bad magic)");
    CHIMERA_RETURN_IF_ERROR(c.get(&g->version_, "version"));
    if (g->version_ == 1) return unsupported("GGUF version 1 is not supported (re-convert the model)");
    if (g->version_ != 2 && g->version_ != 3)
      return unsupported("unsupported GGUF version " + std::to_string(g->version_));
    uint64_t n_tensors, n_kv;
    CHIMERA_RETURN_IF_ERROR(c.get(&n_tensors, "tensor count"));
    CHIMERA_RETURN_IF_ERROR(c.get(&n_kv, "metadata count"));
    // Each KV needs >= 8 (key len) + 4 (type) + 1 bytes; each tensor info >= 24.
    if (n_kv > c.remaining() / 13)
      return out_of_range("metadata count " + std::to_string(n_kv) + " is larger than the file can hold");
    if (n_tensors > c.remaining() / 24)
      return out_of_range("tensor count " + std::to_string(n_tensors) + " is larger than the file can hold");

    g->kv_.reserve(n_kv);
    for (uint64_t k = 0; k < n_kv; ++k) {
      std::string key;
      CHIMERA_RETURN_IF_ERROR(c.get_string(&key, "metadata key").with_context("metadata entry " + std::to_string(k)));
      if (key.empty()) return invalid_argument("metadata entry " + std::to_string(k) + " has an empty key");
      uint32_t t;
      CHIMERA_RETURN_IF_ERROR(c.get(&t, "metadata type"));
      if (!valid_type(t)) return invalid_argument("metadata '" + key + "' has unknown value type " + std::to_string(t));
      GgufValue v;
      CHIMERA_RETURN_IF_ERROR(read_value(c, (GgufType)t, &v, 0, key).with_context("metadata '" + key + "'"));
      if (g->kv_index_.count(key)) return invalid_argument("duplicate metadata key '" + key + "'");
      g->kv_index_.emplace(key, g->kv_.size());
      g->kv_.emplace_back(std::move(key), std::move(v));
    }

    if (const GgufValue* a = g->find("general.alignment")) {
      auto av = a->as_int();
      if (!av || *av <= 0 || (*av & (*av - 1)) != 0 || *av > (1 << 20))
        return invalid_argument("general.alignment must be a power of two (got " + a->to_display() + ")");
      g->alignment_ = (uint64_t)*av;
    }

    g->tensors_.reserve(n_tensors);
    for (uint64_t k = 0; k < n_tensors; ++k) {
      GgufTensorInfo t;
      CHIMERA_RETURN_IF_ERROR(c.get_string(&t.name, "tensor name").with_context("tensor " + std::to_string(k)));
      const std::string ctx = "tensor '" + t.name + "'";
      uint32_t n_dims;
      CHIMERA_RETURN_IF_ERROR(c.get(&n_dims, "tensor dimension count").with_context(ctx));
      if (n_dims == 0 || n_dims > kMaxDims)
        return invalid_argument(ctx + ": " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
      t.ne.resize(n_dims);
      uint64_t n_el = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t dim;
        CHIMERA_RETURN_IF_ERROR(c.get(&dim, "tensor dimension").with_context(ctx));
        if (dim == 0 || dim > (uint64_t)std::numeric_limits<int64_t>::max())
          return invalid_argument(ctx + ": invalid dimension " + std::to_string(dim));
        if (n_el > (uint64_t)std::numeric_limits<int64_t>::max() / dim)
          return out_of_range(ctx + ": element count overflows");
        n_el *= dim;
        t.ne[d] = (int64_t)dim;
      }
      uint32_t type;
      CHIMERA_RETURN_IF_ERROR(c.get(&type, "tensor type").with_context(ctx));
      auto info = ggml_type_info(type);
      if (!info) return unsupported(ctx + ": unknown tensor type id " + std::to_string(type));
      t.type = (GgmlType)type;
      if (t.ne[0] % info->block_size != 0)
        return invalid_argument(ctx + ": row length " + std::to_string(t.ne[0]) + " is not a multiple of the " +
                                info->name + " block size " + std::to_string(info->block_size));
      const uint64_t blocks = n_el / (uint64_t)info->block_size;
      if (blocks > std::numeric_limits<uint64_t>::max() / info->type_size)
        return out_of_range(ctx + ": byte size overflows");
      t.n_elements = n_el;
      t.n_bytes = blocks * info->type_size;
      CHIMERA_RETURN_IF_ERROR(c.get(&t.offset, "tensor offset").with_context(ctx));
      if (t.offset % g->alignment_ != 0)
        return invalid_argument(ctx + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                                std::to_string(g->alignment_));
      if (g->tensor_index_.count(t.name)) return invalid_argument("duplicate tensor name '" + t.name + "'");
      g->tensor_index_.emplace(t.name, g->tensors_.size());
      g->tensors_.push_back(std::move(t));
    }

    // Data section starts at the next multiple of the alignment.
    const uint64_t hdr = c.pos();
    const uint64_t data_start = (hdr + g->alignment_ - 1) / g->alignment_ * g->alignment_;
    if (!g->tensors_.empty() && data_start > file->size())
      return out_of_range("file ends before the tensor data section");
    g->data_offset_ = data_start;
    const uint64_t data_size = file->size() > data_start ? file->size() - data_start : 0;
    for (auto& t : g->tensors_) {
      if (t.offset > data_size || t.n_bytes > data_size - t.offset)
        return out_of_range("tensor '" + t.name + "' (" + std::to_string(t.n_bytes) + " bytes at offset " +
                            hexu(t.offset) + ") extends past the end of the file (data section has " +
                            std::to_string(data_size) + " bytes); the file may be truncated");
      t.data = file->data() + data_start + t.offset;
    }
    return g;
  }
};

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  CHIMERA_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  auto r = GgufParser::run(std::move(file));
  if (!r.is_ok()) return r.status().with_context("'" + path + "'");
  return r;
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(std::shared_ptr<MappedFile> file) {
  return GgufParser::run(std::move(file));
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
