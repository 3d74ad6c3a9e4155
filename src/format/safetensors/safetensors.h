// safetensors reader: Hugging Face's tensor container, memory-mapped and used in
// place (zero copy), single files and sharded checkpoints.
//
// Layout: u64 little-endian N, then N bytes of UTF-8 JSON (the header), then the
// data buffer. The header is an object mapping tensor names to
// {"dtype": "BF16", "shape": [d0, ...], "data_offsets": [begin, end]} (offsets
// relative to the data buffer, end exclusive), plus an optional "__metadata__"
// object of string -> string. Sharded checkpoints add
// model.safetensors.index.json whose "weight_map" maps each tensor name to the
// shard file (a plain file name in the same folder) that holds it.
//
// Invariants: every file is untrusted. The header length is checked against the
// file and a cap (kMaxHeaderBytes); the JSON must parse; every entry needs a
// known dtype, a shape of non-negative dimensions whose element count and byte
// size fit (overflow-checked), data_offsets with begin <= end inside the data
// buffer and end - begin equal to the shape's byte size; names are unique and
// non-empty; no two tensors' byte ranges overlap (gaps are allowed). A shard
// name in an index must not contain a path separator. Every failure is a Status
// naming the file and the problem. A Checkpoint keeps its mappings alive; the
// `data` pointers of its tensors are valid while it lives.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mmap_file.h"
#include "core/status.h"

namespace chimera::format::safetensors {

inline constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's cap
inline constexpr size_t kMaxDims = 8;

enum class Dtype { BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2 };

std::optional<Dtype> dtype_from_name(std::string_view name);
const char* dtype_name(Dtype d);
size_t dtype_size(Dtype d);

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;  // row-major (PyTorch order): shape.back() is the contiguous axis
  uint64_t begin = 0;          // offsets inside the data buffer
  uint64_t end = 0;
  const uint8_t* data = nullptr;  // points into the mapping
  uint64_t n_elements() const;
  uint64_t n_bytes() const { return end - begin; }
  std::string shape_string() const;
};

// One .safetensors file.
class File {
 public:
  static Result<std::unique_ptr<File>> open(const std::string& path);
  static Result<std::unique_ptr<File>> parse(std::shared_ptr<MappedFile> file);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in file order
  const TensorInfo* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return file_->path(); }

 private:
  File() = default;
  std::shared_ptr<MappedFile> file_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, size_t, std::less<>> pos_;
};

// A whole checkpoint: a folder with model.safetensors.index.json (sharded) or
// model.safetensors, or a single .safetensors file.
class Checkpoint {
 public:
  static Result<std::unique_ptr<Checkpoint>> open(const std::string& path);

  // Tensors of every shard, shards in index order (sorted file names), each in file order.
  const std::vector<const TensorInfo*>& tensors() const { return all_; }
  const TensorInfo* find(std::string_view name) const;
  size_t n_files() const { return files_.size(); }

 private:
  Checkpoint() = default;
  Status add(std::unique_ptr<File> f);
  std::vector<std::unique_ptr<File>> files_;
  std::vector<const TensorInfo*> all_;
  std::map<std::string, const TensorInfo*, std::less<>> by_name_;
};

// Widens a floating-point tensor (F32, F16, BF16, F64) to float32.
Result<std::vector<float>> to_f32(const TensorInfo& t);

}  // namespace chimera::format::safetensors
