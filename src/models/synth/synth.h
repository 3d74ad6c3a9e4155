// `synth`: random-weight GGUF files with the exact shapes, metadata and vocabulary
// size of real checkpoints, so speed at real size can be measured without
// downloading weights. Three tables drive it, each extended by adding entries:
//   - models (synth_registry.cpp): NAME -> a family builder + that family's config;
//   - family builders (synth_<family>.cpp): config -> SynthPlan (metadata with
//     llama.cpp's key names; the tensors, their shapes, initialisers and roles from
//     the family's tensor table, models/tensor_table.h, which the loader reads too);
//   - output types (synth_types.cpp): TYPE -> a per-tensor storage-type rule and an
//     encoder (F32/F16/BF16 now; quantized types plug in as rule + encoder).
// Invariants: output is a pure function of (request, seed) — every tensor has its
// own counter-based random stream keyed by (seed, tensor name), so a tensor's
// values do not depend on --layers or tensor order; tensors are generated and
// written one chunk at a time, so memory use is independent of model size.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "format/gguf/gguf.h"
#include "format/rope_factors.h"
#include "quant/tensor_role.h"

namespace chimera::models::synth {

// How a tensor's values are made.
struct SynthInit {
  enum class Kind { kNormal, kConstant, kValues };
  Kind kind = Kind::kNormal;
  float value = 0.02f;        // kNormal: standard deviation; kConstant: the value
  std::vector<float> values;  // kValues: exactly n_elements values (e.g. rope_freqs)

  static SynthInit normal(float std_dev) { return {Kind::kNormal, std_dev, {}}; }
  static SynthInit constant(float v) { return {Kind::kConstant, v, {}}; }
  static SynthInit exact(std::vector<float> v) { return {Kind::kValues, 0.0f, std::move(v)}; }
};

struct SynthTensor {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous dimension
  SynthInit init;
  format::GgmlType type = format::GgmlType::F32;  // set by apply_type()
  quant::TensorRole role = quant::TensorRole::kUnknown;  // from the family's tensor table
  uint64_t n_elements() const;
  uint64_t n_bytes() const;
};

struct SynthPlan {
  std::vector<std::pair<std::string, format::GgufValue>> metadata;  // insertion order
  std::vector<SynthTensor> tensors;
  void set(const std::string& key, format::GgufValue v);  // replaces an existing key
  const format::GgufValue* find(std::string_view key) const;
  uint64_t total_bytes() const;
  uint64_t total_elements() const;
};

// An output TYPE: picks each tensor's storage type and encodes float rows into it.
struct SynthType {
  std::string_view name;       // "F16"
  format::GgmlType matrix;     // storage type for weight matrices
  uint32_t file_type;          // general.file_type (llama_ftype numbering)
  // Storage type of one tensor (1-D tensors stay F32 as llama.cpp's converter does).
  // Null for quantization mixes: quant::choose_tensor_type decides (see synth_types.cpp).
  format::GgmlType (*rule)(const SynthType& self, const SynthTensor& t);
};
const std::vector<SynthType>& synth_types();
const SynthType* find_synth_type(std::string_view name);  // case-insensitive
// Sets every tensor's type and general.file_type.
Status apply_type(const SynthType& type, SynthPlan& plan);
// Encodes n floats (whole rows) of `type` into dst (ggml_row_size(type, n) bytes).
Status encode_values(format::GgmlType type, const float* src, int64_t n, uint8_t* dst);

// What the user asked for.
struct SynthRequest {
  std::string like;                 // model NAME
  std::string type = "F16";         // output TYPE
  std::optional<int64_t> n_layers;  // fewer (or more) layers than the real model
  std::optional<int64_t> n_vocab;   // test-only: smaller vocabulary
  uint64_t seed = 42;
};

// One model table entry.
struct SynthModel {
  std::string_view name;
  std::string_view description;
  std::function<Result<SynthPlan>(const SynthRequest&)> build;
};
const std::vector<SynthModel>& synth_models();
const SynthModel* find_synth_model(std::string_view name);
std::string synth_model_names();  // "a, b, c"
std::string synth_type_names();

// Validates the request and returns the full plan with tensor types resolved.
Result<SynthPlan> make_synth_plan(const SynthRequest& req);

// Values of elements [begin, begin + n) of a tensor (deterministic in seed + name).
void synth_values(const SynthTensor& t, uint64_t seed, uint64_t begin, uint64_t n, float* out);

// Called after each chunk: bytes written so far, total tensor bytes, current tensor.
using SynthProgress = std::function<void(uint64_t done, uint64_t total, const std::string& tensor)>;
// Streams the plan to `path` (via path + ".partial", renamed on success).
Status write_synth_gguf(const SynthPlan& plan, uint64_t seed, const std::string& path,
                        const SynthProgress& progress);

// Helpers shared by family builders.
// SentencePiece-style vocabulary ("llama" tokenizer): <unk> <s> </s>, 256 byte
// tokens <0x00>..<0xFF> (type 6), then unique filler pieces "▁tok<i>"; bos 1, eos 2.
Status add_spm_vocab(SynthPlan& plan, int64_t n_vocab);

}  // namespace chimera::models::synth
