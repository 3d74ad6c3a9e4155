// GGUF v2/v3 container: metadata key/values and tensor descriptors.
// The reader treats the file as untrusted: every count, length, offset and size
// is bounds- and overflow-checked against the file, and a malformed file gives a
// Status that names the problem (never a crash, abort, hang or huge allocation).
// Tensor data is used in place from the memory map.
//
// Layout (little-endian): "GGUF" u32 version, u64 n_tensors, u64 n_kv,
// n_kv × (string key, u32 type, value), n_tensors × (string name, u32 n_dims,
// u64 ne[n_dims], u32 ggml_type, u64 offset), padding to `general.alignment`
// (default 32), then the tensor data; offsets are relative to the data start.
// string = u64 length + bytes (no terminator). array = u32 elem type, u64 n, items.
//
// What the reader accepts (see gguf_reader.cpp for the exact limits):
// - versions 2 and 3 (v1 and big-endian files are refused with a clear message);
// - unique, non-empty keys; bool bytes 0 or 1; arrays nested at most
//   kGgufMaxArrayDepth deep; at most kGgufMaxValues metadata values in total
//   (each costs sizeof(GgufValue), ~96 bytes, so metadata memory stays below
//   ~800 MB even for a hostile file; real vocabularies use ~1M values); an
//   array count is checked against the bytes left and the budget before the
//   array is allocated;
// - `general.alignment`, when present, an integer power of two in [1, 2^20];
// - unique, non-empty tensor names; 1..4 dimensions, each >= 1, whose product
//   fits int64; a known ggml type whose block size divides ne[0]; an offset
//   that is a multiple of the alignment; data inside the file; no two tensors'
//   byte ranges overlap (gaps are allowed, unlike llama.cpp which requires the
//   packed order). Offsets are relative to the data section, so tensor data can
//   never overlap the header.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mmap_file.h"
#include "core/status.h"
#include "format/gguf/ggml_types.h"

namespace chimera::format {

inline constexpr int kGgufMaxArrayDepth = 8;          // array of array of ... levels
inline constexpr uint64_t kGgufMaxValues = 1ull << 23;  // metadata values, all arrays together
inline constexpr uint64_t kGgufMaxTensors = 1ull << 20;
inline constexpr uint64_t kGgufMaxKeys = 1ull << 20;
inline constexpr uint64_t kGgufMaxAlignment = 1ull << 20;
inline constexpr uint32_t kGgufMaxDims = 4;
inline constexpr size_t kGgufMaxLayers = 1u << 16;  // get_per_layer_int refuses more

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* gguf_type_name(GgufType t);

// One metadata value. Scalars live in the numeric fields; arrays hold their
// element type and items (arrays of arrays nest).
struct GgufValue {
  GgufType type = GgufType::UINT8;
  uint64_t u = 0;        // unsigned ints and bool
  int64_t i = 0;         // signed ints
  double f = 0;          // floats
  std::string s;         // STRING
  GgufType elem_type = GgufType::UINT8;  // ARRAY
  std::vector<GgufValue> arr;            // ARRAY

  bool is_integer() const;
  bool is_float() const { return type == GgufType::FLOAT32 || type == GgufType::FLOAT64; }
  // Integer value of any integer type (or bool); nullopt otherwise.
  std::optional<int64_t> as_int() const;
  // Float value of a float or integer type; nullopt otherwise.
  std::optional<double> as_double() const;
  // Short human-readable text: strings quoted and cut at 80 bytes, arrays as
  // "[type x n] {first max_items items, ...}" (nested arrays: half the items
  // per level). Not a serialization: compare values with operator==.
  std::string to_display(size_t max_items = 8) const;

  // Semantic equality: type, element type and the field(s) that type uses
  // (floats compare bitwise, so NaN == NaN when written from the same bits).
  bool operator==(const GgufValue& o) const;

  static GgufValue from_u8(uint8_t v);
  static GgufValue from_i8(int8_t v);
  static GgufValue from_u16(uint16_t v);
  static GgufValue from_i16(int16_t v);
  static GgufValue from_i64(int64_t v);
  static GgufValue from_f64(double v);
  static GgufValue from_u32(uint32_t v);
  static GgufValue from_i32(int32_t v);
  static GgufValue from_u64(uint64_t v);
  static GgufValue from_f32(float v);
  static GgufValue from_bool(bool v);
  static GgufValue from_string(std::string v);
  static GgufValue from_array(GgufType elem, std::vector<GgufValue> items);
  static GgufValue from_strings(const std::vector<std::string>& v);
  static GgufValue from_f32s(const std::vector<float>& v);
  static GgufValue from_i32s(const std::vector<int32_t>& v);
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> ne;   // ggml order: ne[0] is the contiguous (row) dimension
  uint64_t offset = 0;       // relative to the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping
  int64_t dim(size_t i) const { return i < ne.size() ? ne[i] : 1; }
  std::string shape_string() const;
};

class GgufFile {
 public:
  // Opens and validates a GGUF file (memory-mapped).
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Parses an in-memory image (tests, fuzzing).
  static Result<std::unique_ptr<GgufFile>> parse(std::shared_ptr<MappedFile> file);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return file_->size(); }
  const std::string& path() const { return file_->path(); }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  // Returns the array value under key (nullptr when absent or not an array).
  const GgufValue* get_array(std::string_view key) const;
  // A per-layer integer: either a scalar (same for every layer) or an array of
  // n_layer values. Error when an array has the wrong length or bad type, or
  // n_layer > kGgufMaxLayers.
  Result<std::vector<int64_t>> get_per_layer_int(std::string_view key, size_t n_layer,
                                                 std::optional<int64_t> fallback) const;
  // general.architecture, or "" when absent.
  std::string architecture() const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // Total bytes of tensor data.
  uint64_t tensor_bytes() const;
  // A description without tensor data (GgufWriter::describe: the file a
  // writer is about to write): metadata and tensor names, types and shapes;
  // every tensor's data pointer is null. Checks that read only those
  // (models::check_model_header) run on it before a converter writes.
  bool header_only() const { return header_only_; }

 private:
  GgufFile() = default;
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  bool header_only_ = false;
  friend class GgufParser;
  friend class GgufWriter;
};

// A check of the file a writer is about to write (GgufWriter::describe), run
// by the converters before they write: models::check_model_header, passed in
// by the caller because format/ sits below models/.
using GgufCheck = std::function<Status(const GgufFile& header)>;

// Builds a GGUF file: metadata in insertion order, tensors laid out aligned.
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}
  void set(const std::string& key, GgufValue value);  // replaces an existing key
  // A power of two; write()/to_bytes() fall back to 32 (and write() fails)
  // otherwise. Setting "general.alignment" through set() changes only the
  // metadata, not the padding actually used (tests use that to build bad files).
  void set_alignment(uint32_t a);
  // Adds a tensor; `data` must hold ggml_row_size(type, ne[0]) * rows bytes.
  Status add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                    const void* data, size_t n_bytes);
  // Same, for `data` inside a read-only file mapping (a converter's source
  // checkpoint): written in chunks whose pages are dropped from memory right
  // after (they fault back in from the file if read again), so copying a large
  // checkpoint does not keep it resident. Never for anonymous memory.
  Status add_tensor_mapped(const std::string& name, GgmlType type, std::vector<int64_t> ne, const void* data,
                           size_t n_bytes);
  // Same, but the writer keeps its own copy of the bytes.
  Status add_tensor_copy(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                         std::vector<uint8_t> bytes);
  // Same, but the bytes are produced while the file is written: `fill` gets a
  // buffer of n_bytes (reused from tensor to tensor), so a converter holds one
  // tensor in memory at a time. An error from `fill` fails write().
  using Filler = std::function<Status(uint8_t* dst)>;
  Status add_tensor_lazy(const std::string& name, GgmlType type, std::vector<int64_t> ne, size_t n_bytes,
                         Filler fill);
  // The file this writer would write, as a header-only GgufFile (metadata,
  // tensor names, types and shapes; no data): for checks before write().
  std::unique_ptr<GgufFile> describe() const;
  // Writes path + ".partial", then renames it to path (removed on failure).
  Status write(const std::string& path) const;
  // check(*describe()) first; a failed check (or no check) writes nothing
  // and names the problem ("'path' not written: ...").
  Status write(const std::string& path, const GgufCheck& check) const;
  // The file image; an invalid alignment is replaced by 32 (see set_alignment).
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    const void* data;
    size_t n_bytes;
    std::shared_ptr<std::vector<uint8_t>> owned;
    Filler fill;
    bool drop_after_write = false;  // add_tensor_mapped
  };
  template <typename Sink> Status emit(Sink& sink) const;
  uint32_t version_;
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace chimera::format
