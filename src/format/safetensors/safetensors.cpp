// safetensors parsing and validation (see safetensors.h for the layout and the
// checks). The JSON header is parsed with exceptions disabled; every number is
// taken only if it is a non-negative integer, and sizes are overflow-checked
// before they are compared with the file.
#include "format/safetensors/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "core/fp16.h"

namespace chimera::format::safetensors {
namespace {

using nlohmann::json;

struct DtypeRow {
  Dtype d;
  const char* name;
  size_t size;
};
constexpr DtypeRow kDtypes[] = {
    {Dtype::BOOL, "BOOL", 1}, {Dtype::U8, "U8", 1},     {Dtype::I8, "I8", 1},
    {Dtype::I16, "I16", 2},   {Dtype::U16, "U16", 2},   {Dtype::I32, "I32", 4},
    {Dtype::U32, "U32", 4},   {Dtype::I64, "I64", 8},   {Dtype::U64, "U64", 8},
    {Dtype::F16, "F16", 2},   {Dtype::BF16, "BF16", 2}, {Dtype::F32, "F32", 4},
    {Dtype::F64, "F64", 8},   {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::F8_E5M2, "F8_E5M2", 1},
};

Result<uint64_t> get_u64(const json& v, const std::string& what) {
  if (!v.is_number_integer()) return invalid_argument(what + " must be a non-negative integer");
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  int64_t x = v.get<int64_t>();
  if (x < 0) return invalid_argument(what + " must be a non-negative integer (got " + std::to_string(x) + ")");
  return (uint64_t)x;
}

Status parse_entry(const std::string& name, const json& e, uint64_t data_size, TensorInfo* t) {
  if (!e.is_object()) return invalid_argument("entry must be an object");
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) return invalid_argument("missing or non-string 'dtype'");
  auto d = dtype_from_name(dt->get<std::string>());
  if (!d) return unsupported("unknown dtype '" + dt->get<std::string>() + "'");
  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) return invalid_argument("missing or non-array 'shape'");
  if (sh->size() > kMaxDims) return invalid_argument("shape has " + std::to_string(sh->size()) + " dimensions");
  auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2)
    return invalid_argument("'data_offsets' must be an array of two integers");
  t->name = name;
  t->dtype = *d;
  uint64_t count = 1;
  for (const json& x : *sh) {
    CHIMERA_ASSIGN_OR_RETURN(uint64_t dim, get_u64(x, "a shape dimension"));
    if (dim > (uint64_t)INT64_MAX) return invalid_argument("a shape dimension is too large");
    if (dim != 0 && count > UINT64_MAX / dim) return invalid_argument("element count overflows");
    count *= dim;
    t->shape.push_back((int64_t)dim);
  }
  const uint64_t esz = dtype_size(*d);
  if (count > UINT64_MAX / esz) return invalid_argument("byte size overflows");
  CHIMERA_ASSIGN_OR_RETURN(uint64_t b, get_u64((*off)[0], "data_offsets[0]"));
  CHIMERA_ASSIGN_OR_RETURN(uint64_t en, get_u64((*off)[1], "data_offsets[1]"));
  if (b > en) return invalid_argument("data_offsets begin " + std::to_string(b) + " > end " + std::to_string(en));
  if (en > data_size)
    return out_of_range("data_offsets end " + std::to_string(en) + " is past the data buffer (" +
                        std::to_string(data_size) + " bytes; truncated file?)");
  if (en - b != count * esz)
    return invalid_argument("data_offsets span " + std::to_string(en - b) + " bytes but shape " +
                            t->shape_string() + " of " + dtype_name(*d) + " needs " + std::to_string(count * esz));
  t->begin = b;
  t->end = en;
  return Status::ok();
}

}  // namespace

std::optional<Dtype> dtype_from_name(std::string_view name) {
  for (const DtypeRow& r : kDtypes)
    if (name == r.name) return r.d;
  return std::nullopt;
}

const char* dtype_name(Dtype d) {
  for (const DtypeRow& r : kDtypes)
    if (r.d == d) return r.name;
  return "?";
}

size_t dtype_size(Dtype d) {
  for (const DtypeRow& r : kDtypes)
    if (r.d == d) return r.size;
  return 1;
}

uint64_t TensorInfo::n_elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= (uint64_t)d;
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<std::unique_ptr<File>> File::open(const std::string& path) {
  auto m = MappedFile::open(path);
  if (!m) return m.status();
  auto f = parse(std::move(m).value());
  if (!f) return f.status().with_context("'" + path + "'");
  return f;
}

Result<std::unique_ptr<File>> File::parse(std::shared_ptr<MappedFile> file) {
  const uint64_t size = file->size();
  if (size < 8) return invalid_argument("too small for a safetensors file (" + std::to_string(size) + " bytes)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file->data()[i];
  if (n > kMaxHeaderBytes) return invalid_argument("header length " + std::to_string(n) + " exceeds the 100 MiB cap");
  if (n > size - 8)
    return out_of_range("header length " + std::to_string(n) + " is past the end of the file (" +
                        std::to_string(size) + " bytes; truncated?)");
  const char* hp = (const char*)file->data() + 8;
  json h = json::parse(hp, hp + n, nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded()) return invalid_argument("header is not valid JSON");
  if (!h.is_object()) return invalid_argument("header must be a JSON object");
  std::unique_ptr<File> f(new File());
  f->file_ = std::move(file);
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = size - data_start;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return invalid_argument("__metadata__ must be an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return invalid_argument("__metadata__['" + m.key() + "'] must be a string");
        f->metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    if (it.key().empty()) return invalid_argument("empty tensor name");
    TensorInfo t;
    Status st = parse_entry(it.key(), *it, data_size, &t);
    if (!st) return st.with_context("tensor '" + it.key() + "'");
    t.data = f->file_->data() + data_start + t.begin;
    f->tensors_.push_back(std::move(t));
  }
  // nlohmann's object keeps keys unique (a duplicate key overwrites), so names
  // are unique here; order tensors by their data as the file stores them.
  std::sort(f->tensors_.begin(), f->tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  for (size_t i = 0; i < f->tensors_.size(); ++i) {
    if (i > 0 && f->tensors_[i].begin < f->tensors_[i - 1].end)
      return invalid_argument("tensors '" + f->tensors_[i - 1].name + "' and '" + f->tensors_[i].name +
                              "' overlap in the data buffer");
    f->pos_[f->tensors_[i].name] = i;
  }
  return f;
}

const TensorInfo* File::find(std::string_view name) const {
  auto it = pos_.find(name);
  return it == pos_.end() ? nullptr : &tensors_[it->second];
}

Status Checkpoint::add(std::unique_ptr<File> f) {
  for (const TensorInfo& t : f->tensors()) {
    if (!by_name_.emplace(t.name, &t).second)
      return invalid_argument("tensor '" + t.name + "' appears in more than one shard");
    all_.push_back(&t);
  }
  files_.push_back(std::move(f));
  return Status::ok();
}

Result<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::unique_ptr<Checkpoint> c(new Checkpoint());
  if (!fs::is_directory(path, ec)) {
    auto f = File::open(path);
    if (!f) return f.status();
    CHIMERA_RETURN_IF_ERROR(c->add(std::move(f).value()));
    return c;
  }
  const fs::path dir(path);
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index, ec)) {
    const fs::path single = dir / "model.safetensors";
    if (!fs::exists(single, ec))
      return not_found("'" + path + "' holds neither model.safetensors nor model.safetensors.index.json");
    auto f = File::open(single.string());
    if (!f) return f.status();
    CHIMERA_RETURN_IF_ERROR(c->add(std::move(f).value()));
    return c;
  }
  auto m = MappedFile::open(index.string());
  if (!m) return m.status();
  const char* p = (const char*)(*m)->data();
  json j = json::parse(p, p + (*m)->size(), nullptr, false);
  const std::string where = "'" + index.string() + "'";
  if (j.is_discarded() || !j.is_object()) return invalid_argument(where + " is not a JSON object");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) return invalid_argument(where + " has no 'weight_map' object");
  std::set<std::string> shards;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string()) return invalid_argument(where + ": weight_map['" + it.key() + "'] must be a string");
    const std::string s = it->get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s.find('\\') != std::string::npos || s == "." || s == "..")
      return invalid_argument(where + ": shard name '" + s + "' must be a plain file name in the same folder");
    shards.insert(s);
  }
  for (const std::string& s : shards) {
    auto f = File::open((dir / s).string());
    if (!f) return f.status();
    CHIMERA_RETURN_IF_ERROR(c->add(std::move(f).value()));
  }
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    const TensorInfo* t = c->find(it.key());
    if (!t) return not_found(where + " lists tensor '" + it.key() + "' but no shard holds it");
  }
  return c;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Result<std::vector<float>> to_f32(const TensorInfo& t) {
  const uint64_t n = t.n_elements();
  std::vector<float> out(n);
  const uint8_t* p = t.data;
  switch (t.dtype) {
    case Dtype::F32:
      std::memcpy(out.data(), p, n * 4);
      break;
    case Dtype::F64:
      for (uint64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = (float)d;
      }
      break;
    case Dtype::F16:
    case Dtype::BF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = t.dtype == Dtype::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      break;
    default:
      return unsupported("tensor '" + t.name + "' has dtype " + dtype_name(t.dtype) + ", not a float type");
  }
  return out;
}

}  // namespace chimera::format::safetensors
