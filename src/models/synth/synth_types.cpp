// Output TYPE table for `synth`: each entry is a per-tensor storage-type rule plus
// the general.file_type it records. Float types store matrices in the chosen type
// and keep 1-D tensors (norms, biases, rope_freqs) in F32, as llama.cpp's
// converter does. Quantized types are added as entries whose rule also falls back
// for rows that are not a multiple of the block size, with encode_values()
// calling the quantizer for the block format.
#include <cctype>
#include <cstring>

#include "core/fp16.h"
#include "models/synth/synth.h"

namespace chimera::models::synth {

using format::GgmlType;

namespace {

GgmlType float_rule(const SynthType& self, const SynthTensor& t) {
  return t.ne.size() >= 2 ? self.matrix : GgmlType::F32;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower((unsigned char)a[i]) != std::tolower((unsigned char)b[i])) return false;
  return true;
}

}  // namespace

const std::vector<SynthType>& synth_types() {
  // file_type values are llama_ftype: ALL_F32 = 0, MOSTLY_F16 = 1, MOSTLY_BF16 = 32.
  static const std::vector<SynthType> kTypes = {
      {"F32", GgmlType::F32, 0, float_rule},
      {"F16", GgmlType::F16, 1, float_rule},
      {"BF16", GgmlType::BF16, 32, float_rule},
  };
  return kTypes;
}

const SynthType* find_synth_type(std::string_view name) {
  for (const auto& t : synth_types())
    if (iequals(t.name, name)) return &t;
  return nullptr;
}

std::string synth_type_names() {
  std::string s;
  for (const auto& t : synth_types()) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

Status apply_type(const SynthType& type, SynthPlan& plan) {
  for (auto& t : plan.tensors) {
    t.type = type.rule(type, t);
    if (format::ggml_row_size(t.type, t.ne.empty() ? 0 : t.ne[0]) == 0)
      return invalid_argument("tensor '" + t.name + "': row of " + std::to_string(t.ne.empty() ? 0 : t.ne[0]) +
                              " elements cannot be stored as " + format::ggml_type_name(t.type));
  }
  plan.set("general.file_type", format::GgufValue::from_u32(type.file_type));
  return Status::ok();
}

Status encode_values(GgmlType type, const float* src, int64_t n, uint8_t* dst) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, (size_t)n * sizeof(float));
      return Status::ok();
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return Status::ok();
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return Status::ok();
    default:
      return unsupported("synth cannot encode " + format::ggml_type_name(type) + " yet");
  }
}

}  // namespace chimera::models::synth
