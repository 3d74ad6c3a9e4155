// GGUF writer: metadata in insertion order, tensor data aligned to
// `general.alignment`. Used by tests, `convert`, `quantize` and `synth`.
// Invariants: tensors are packed in insertion order, each padded to the
// alignment (the layout llama.cpp expects); shapes are checked against the byte
// count with overflow checks. The writer does not validate metadata (tests use
// it to build hostile files); it only refuses a padding alignment that is not a
// power of two.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <sys/mman.h>

#include "core/memory.h"
#include "format/gguf/gguf.h"

namespace chimera::format {

namespace {

bool valid_alignment(uint64_t a) { return a != 0 && (a & (a - 1)) == 0 && a <= kGgufMaxAlignment; }

struct FileSink {
  std::FILE* f;
  bool ok = true;
  uint64_t pos = 0;
  void put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f) != n) ok = false;
    pos += n;
  }
};
struct VecSink {
  std::vector<uint8_t>* v;
  bool ok = true;
  uint64_t pos = 0;
  void put(const void* p, size_t n) {
    // resize + memcpy: GCC 12 flags vector::insert of a small literal here
    // with a false -Wstringop-overflow.
    if (n == 0) return;
    const size_t at = v->size();
    v->resize(at + n);
    std::memcpy(v->data() + at, p, n);
    pos += n;
  }
};

template <typename Sink, typename T>
void put_pod(Sink& s, T v) { s.put(&v, sizeof v); }

template <typename Sink>
void put_string(Sink& s, const std::string& str) {
  put_pod<Sink, uint64_t>(s, str.size());
  s.put(str.data(), str.size());
}

template <typename Sink>
void put_value(Sink& s, const GgufValue& v) {
  switch (v.type) {
    case GgufType::UINT8: put_pod<Sink, uint8_t>(s, (uint8_t)v.u); break;
    case GgufType::INT8: put_pod<Sink, int8_t>(s, (int8_t)v.i); break;
    case GgufType::UINT16: put_pod<Sink, uint16_t>(s, (uint16_t)v.u); break;
    case GgufType::INT16: put_pod<Sink, int16_t>(s, (int16_t)v.i); break;
    case GgufType::UINT32: put_pod<Sink, uint32_t>(s, (uint32_t)v.u); break;
    case GgufType::INT32: put_pod<Sink, int32_t>(s, (int32_t)v.i); break;
    case GgufType::UINT64: put_pod<Sink, uint64_t>(s, v.u); break;
    case GgufType::INT64: put_pod<Sink, int64_t>(s, v.i); break;
    case GgufType::FLOAT32: put_pod<Sink, float>(s, (float)v.f); break;
    case GgufType::FLOAT64: put_pod<Sink, double>(s, v.f); break;
    case GgufType::BOOL: put_pod<Sink, uint8_t>(s, v.u ? 1 : 0); break;
    case GgufType::STRING: put_string(s, v.s); break;
    case GgufType::ARRAY:
      put_pod<Sink, uint32_t>(s, (uint32_t)v.elem_type);
      put_pod<Sink, uint64_t>(s, v.arr.size());
      for (const auto& e : v.arr) put_value(s, e);
      break;
  }
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::set_alignment(uint32_t a) {
  alignment_ = a;
  set("general.alignment", GgufValue::from_u32(a));
}

Status GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne, const void* data,
                              size_t n_bytes) {
  if (ne.empty() || ne.size() > kGgufMaxDims)
    return invalid_argument("tensor '" + name + "': 1 to 4 dimensions required");
  for (int64_t d : ne)
    if (d <= 0) return invalid_argument("tensor '" + name + "': dimensions must be positive");
  size_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) {
    if ((size_t)ne[d] > SIZE_MAX / rows) return invalid_argument("tensor '" + name + "': shape overflows");
    rows *= (size_t)ne[d];
  }
  const size_t row = ggml_row_size(type, ne[0]);
  if (row == 0 || rows > SIZE_MAX / row || row * rows + ggml_tensor_tail_bytes(type) != n_bytes)
    return invalid_argument("tensor '" + name + "': " + std::to_string(n_bytes) + " bytes do not match shape and type");
  for (const auto& t : tensors_)
    if (t.name == name) return invalid_argument("duplicate tensor name '" + name + "'");
  tensors_.push_back({name, type, std::move(ne), data, n_bytes, nullptr});
  return Status::ok();
}

std::unique_ptr<GgufFile> GgufWriter::describe() const {
  std::unique_ptr<GgufFile> g(new GgufFile());
  g->file_ = MappedFile::from_bytes(nullptr, 0);
  g->version_ = version_;
  g->alignment_ = alignment_;
  g->header_only_ = true;
  for (const auto& [k, v] : kv_) {
    g->kv_index_[k] = g->kv_.size();
    g->kv_.emplace_back(k, v);
  }
  for (const Tensor& t : tensors_) {
    GgufTensorInfo i;
    i.name = t.name;
    i.type = t.type;
    i.ne = t.ne;
    i.n_elements = 1;
    for (int64_t d : t.ne) i.n_elements *= (uint64_t)d;
    i.n_bytes = t.n_bytes;
    g->tensor_index_[t.name] = g->tensors_.size();
    g->tensors_.push_back(std::move(i));
  }
  return g;
}

Status GgufWriter::write(const std::string& path, const GgufCheck& check) const {
  if (!check) return internal_error("'" + path + "': no output check given (the converters must check before writing)");
  CHIMERA_RETURN_IF_ERROR(check(*describe()).with_context("'" + path + "' not written"));
  return write(path);
}

Status GgufWriter::add_tensor_copy(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                                   std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  CHIMERA_RETURN_IF_ERROR(add_tensor(name, type, std::move(ne), owned->data(), owned->size()));
  tensors_.back().owned = owned;
  return Status::ok();
}

Status GgufWriter::add_tensor_mapped(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                                     const void* data, size_t n_bytes) {
  CHIMERA_RETURN_IF_ERROR(add_tensor(name, type, std::move(ne), data, n_bytes));
  tensors_.back().drop_after_write = true;
  return Status::ok();
}

Status GgufWriter::add_tensor_lazy(const std::string& name, GgmlType type, std::vector<int64_t> ne, size_t n_bytes,
                                   Filler fill) {
  CHIMERA_RETURN_IF_ERROR(add_tensor(name, type, std::move(ne), nullptr, n_bytes));
  tensors_.back().fill = std::move(fill);
  return Status::ok();
}

template <typename Sink>
Status GgufWriter::emit(Sink& s) const {
  const uint64_t alignment = valid_alignment(alignment_) ? alignment_ : 32;
  s.put("GGUF", 4);
  put_pod<Sink, uint32_t>(s, version_);
  put_pod<Sink, uint64_t>(s, tensors_.size());
  put_pod<Sink, uint64_t>(s, kv_.size());
  for (const auto& kv : kv_) {
    put_string(s, kv.first);
    put_pod<Sink, uint32_t>(s, (uint32_t)kv.second.type);
    put_value(s, kv.second);
  }
  uint64_t off = 0;
  for (const auto& t : tensors_) {
    put_string(s, t.name);
    put_pod<Sink, uint32_t>(s, (uint32_t)t.ne.size());
    for (int64_t d : t.ne) put_pod<Sink, uint64_t>(s, (uint64_t)d);
    put_pod<Sink, uint32_t>(s, (uint32_t)t.type);
    put_pod<Sink, uint64_t>(s, off);
    off += (t.n_bytes + alignment - 1) / alignment * alignment;
  }
  static const uint8_t zeros[256] = {0};
  auto pad = [&] {
    uint64_t p = (alignment - s.pos % alignment) % alignment;
    while (p) {
      uint64_t n = p > sizeof zeros ? sizeof zeros : p;
      s.put(zeros, n);
      p -= n;
    }
  };
  pad();
  std::vector<uint8_t> buf;  // lazy tensors, one at a time
  for (const auto& t : tensors_) {
    if (t.fill) {
      buf.resize(t.n_bytes);
      Status st = t.fill(buf.data());
      if (!st) return st.with_context("tensor '" + t.name + "'");
      s.put(buf.data(), t.n_bytes);
    } else if (t.drop_after_write) {
      constexpr size_t kChunk = size_t(16) << 20;
      const uint8_t* p = static_cast<const uint8_t*>(t.data);
      for (size_t o = 0; o < t.n_bytes; o += kChunk) {
        const size_t n = std::min(kChunk, t.n_bytes - o);
        s.put(p + o, n);
        advise_pages(p + o, n, /*outward=*/true, MADV_DONTNEED);
      }
    } else {
      s.put(t.data, t.n_bytes);
    }
    pad();
  }
  return Status::ok();
}

Status GgufWriter::write(const std::string& path) const {
  if (!valid_alignment(alignment_))
    return invalid_argument("alignment " + std::to_string(alignment_) + " is not a power of two");
  // Written to path + ".partial" and renamed on success, so a failed or
  // interrupted write never leaves a truncated file under the final name.
  const std::string tmp = path + ".partial";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return io_error("cannot create '" + tmp + "'");
  FileSink s{f};
  const Status filled = emit(s);
  bool ok = s.ok;
  if (std::fclose(f) != 0) ok = false;
  std::error_code ec;
  if (!filled) {
    std::filesystem::remove(tmp, ec);
    return filled;
  }
  if (!ok) {
    std::filesystem::remove(tmp, ec);
    return io_error("failed writing '" + tmp + "' (disk full?)");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return io_error("cannot move the output into place at '" + path + "': " + ec.message());
  }
  return Status::ok();
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> v;
  VecSink s{&v};
  if (!emit(s)) v.clear();  // a lazy tensor failed
  return v;
}

}  // namespace chimera::format
