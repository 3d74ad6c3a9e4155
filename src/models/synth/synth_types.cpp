// Output TYPE table for `synth`: each entry is a per-tensor storage-type rule plus
// the general.file_type it records. Float types store matrices in the chosen type
// and keep 1-D tensors (norms, biases, rope_freqs) in F32, as llama.cpp's
// converter does. Quantized types (Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K, TQ1_0, TQ2_0) have no rule
// of their own: they are llama.cpp quantization mixes, and apply_type() takes each
// tensor's type from quant::choose_tensor_type — the same rules `chimera quantize`
// uses (bumps for attn_v / ffn_down / the output head, row-length fallbacks) — and
// the general.file_type from the mix. encode_values() encodes block types with
// quant::encode_rows (a chunk of whole rows encodes like one long row: rows are a
// whole number of blocks).
#include <cctype>
#include <cstring>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "models/synth/synth.h"
#include "quant/quantize_model.h"

namespace chimera::models::synth {

using format::GgmlType;

namespace {

// Weight matrices take the chosen type; everything llama.cpp's converter keeps in
// F32 (1-D tensors, norms, MoE routers, SSM conv/A/D) stays F32 — the same
// is_quantizable() test the quantization mixes use.
GgmlType float_rule(const SynthType& self, const SynthTensor& t) {
  return quant::is_quantizable({t.name, t.ne, t.role}) ? self.matrix : GgmlType::F32;
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
      // Quantization mixes (rule = null: quant::choose_tensor_type; file_type from the mix).
      {"Q8_0", GgmlType::Q8_0, 7, nullptr},
      {"Q4_0", GgmlType::Q4_0, 2, nullptr},
      {"Q4_K_M", GgmlType::Q4_K, 15, nullptr},
      {"Q5_K_M", GgmlType::Q5_K, 17, nullptr},
      {"Q6_K", GgmlType::Q6_K, 18, nullptr},
      {"TQ1_0", GgmlType::TQ1_0, 36, nullptr},  // ternary (BitNet): llama.cpp's TQ mix
      {"TQ2_0", GgmlType::TQ2_0, 37, nullptr},
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
  const quant::QuantMix* mix = type.rule ? nullptr : quant::find_quant_mix(type.name);
  if (!type.rule && !mix) return internal_error("synth type " + std::string(type.name) + " has no rule");
  quant::MixContext ctx;
  if (mix) {
    std::vector<quant::TensorShape> shapes;
    for (const auto& t : plan.tensors) shapes.push_back({t.name, t.ne, t.role});
    std::string arch;
    if (const auto* a = plan.find("general.architecture")) arch = a->s;
    auto head = [&](const char* key) -> int64_t {
      const auto* v = plan.find(arch + ".attention." + key);
      return v ? v->as_int().value_or(0) : 0;
    };
    ctx = quant::make_mix_context(shapes, head("head_count"), head("head_count_kv"));
  }
  for (auto& t : plan.tensors) {
    t.type = mix ? quant::choose_tensor_type(*mix, ctx, {t.name, t.ne, t.role}) : type.rule(type, t);
    if (format::ggml_row_size(t.type, t.ne.empty() ? 0 : t.ne[0]) == 0)
      return invalid_argument("tensor '" + t.name + "': row of " + std::to_string(t.ne.empty() ? 0 : t.ne[0]) +
                              " elements cannot be stored as " + format::ggml_type_name(t.type));
  }
  plan.set("general.file_type", format::GgufValue::from_u32(mix ? mix->ftype : type.file_type));
  if (mix) plan.set("general.quantization_version", format::GgufValue::from_u32(2));
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
    default: {
      // Blocks are independent: split the chunk into equal "rows" of whole blocks so the
      // engine pool can encode them in parallel (bytes identical to one long row).
      const auto info = format::ggml_type_info((uint32_t)type);
      if (!info) return unsupported("synth cannot encode " + format::ggml_type_name(type));
      int64_t row = info->block_size;
      for (int64_t k : {64, 16, 4})
        if (n % (k * info->block_size) == 0) {
          row = k * info->block_size;
          break;
        }
      if (n % row != 0) return invalid_argument(std::to_string(n) + " values are not whole " + format::ggml_type_name(type) + " blocks");
      return quant::encode_rows(type, src, n / row, row, dst, &global_thread_pool());
    }
  }
}

}  // namespace chimera::models::synth
