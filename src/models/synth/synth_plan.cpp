// Plan helpers for `synth`: random streams, the SentencePiece-style vocabulary,
// llama3 rope factors, and request validation. Random values come from a
// counter-based generator (splitmix64 of key + index), so any element range of a
// tensor can be produced independently and the result never depends on chunking.
#include <cmath>
#include <numbers>

#include "models/synth/synth.h"
#include "models/synth/synth_families.h"

namespace chimera::models::synth {

using format::GgufType;
using format::GgufValue;

uint64_t SynthTensor::n_elements() const {
  uint64_t n = 1;
  for (int64_t d : ne) n *= (uint64_t)d;
  return n;
}

uint64_t SynthTensor::n_bytes() const {
  uint64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= (uint64_t)ne[d];
  return rows * format::ggml_row_size(type, ne.empty() ? 0 : ne[0]);
}

void SynthPlan::set(const std::string& key, GgufValue v) {
  for (auto& kv : metadata) {
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  }
  metadata.emplace_back(key, std::move(v));
}

const GgufValue* SynthPlan::find(std::string_view key) const {
  for (const auto& kv : metadata)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

uint64_t SynthPlan::total_bytes() const {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.n_bytes();
  return n;
}

uint64_t SynthPlan::total_elements() const {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.n_elements();
  return n;
}

void set_general_header(SynthPlan& p, const std::string& arch, std::string_view name) {
  p.set("general.architecture", GgufValue::from_string(arch));
  p.set("general.type", GgufValue::from_string("model"));
  p.set("general.name", GgufValue::from_string(std::string(name)));
  p.set("general.file_type", GgufValue::from_u32(0));
}

Status add_table_tensors(SynthPlan& p, std::string_view arch, const TableParams& params,
                         const std::vector<std::string_view>& optional) {
  CHIMERA_ASSIGN_OR_RETURN(const TensorTable* table, require_tensor_table(arch));
  for (std::string_view want : optional) {
    bool found = false;
    for (const TensorEntry& e : table->entries) found |= e.pattern == want && e.need == Need::kOptional;
    if (!found)
      return internal_error("synth: '" + std::string(want) + "' is not an optional tensor of arch '" +
                            std::string(arch) + "'");
  }
  CHIMERA_ASSIGN_OR_RETURN(std::vector<TensorRow> rows, enumerate_tensors(*table, params));
  for (TensorRow& r : rows) {
    if (!r.required) {
      bool keep = false;
      for (std::string_view want : optional) keep |= want == r.entry->pattern;
      if (!keep) continue;
    }
    const SynthFill f = r.entry->fill;
    SynthTensor t{std::move(r.name), std::move(r.ne), f.constant ? SynthInit::constant(f.value) : SynthInit::normal(f.value)};
    t.role = r.role;
    p.tensors.push_back(std::move(t));
  }
  return Status::ok();
}

namespace {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

void synth_values(const SynthTensor& t, uint64_t seed, uint64_t begin, uint64_t n, float* out) {
  switch (t.init.kind) {
    case SynthInit::Kind::kConstant:
      for (uint64_t i = 0; i < n; ++i) out[i] = t.init.value;
      return;
    case SynthInit::Kind::kValues:
      CHIMERA_CHECK(begin + n <= t.init.values.size());
      for (uint64_t i = 0; i < n; ++i) out[i] = t.init.values[begin + i];
      return;
    case SynthInit::Kind::kNormal: {
      // Irwin-Hall: the sum of four 16-bit uniforms (mean 2, variance 1/3) is close
      // to normal and costs one 64-bit hash per value.
      const uint64_t key = splitmix64(seed ^ fnv1a(t.name));
      const float scale = t.init.value * std::sqrt(3.0f) / 65536.0f;
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t r = splitmix64(key + (begin + i) * 0xd1b54a32d192ed03ull);
        const uint32_t s = (uint32_t)(r & 0xffff) + (uint32_t)((r >> 16) & 0xffff) +
                           (uint32_t)((r >> 32) & 0xffff) + (uint32_t)(r >> 48);
        out[i] = ((float)s - 131070.0f) * scale;  // centred: E[s] = 4 * 65535 / 2
      }
      return;
    }
  }
}

Status add_spm_vocab(SynthPlan& plan, int64_t n_vocab) {
  constexpr int64_t kFixed = 3 + 256;
  if (n_vocab < kFixed)
    return invalid_argument("vocabulary of " + std::to_string(n_vocab) + " tokens is too small (minimum " +
                            std::to_string(kFixed) + ")");
  // Token types as llama.cpp numbers them: 1 normal, 2 unknown, 3 control, 6 byte.
  std::vector<GgufValue> tokens, scores, types;
  tokens.reserve((size_t)n_vocab);
  scores.reserve((size_t)n_vocab);
  types.reserve((size_t)n_vocab);
  auto add = [&](std::string text, float score, int32_t type) {
    tokens.push_back(GgufValue::from_string(std::move(text)));
    scores.push_back(GgufValue::from_f32(score));
    types.push_back(GgufValue::from_i32(type));
  };
  add("<unk>", 0.0f, 2);
  add("<s>", 0.0f, 3);
  add("</s>", 0.0f, 3);
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0.0f, 6);
  for (int64_t i = kFixed; i < n_vocab; ++i) add("\xE2\x96\x81tok" + std::to_string(i), -(float)(i - kFixed), 1);

  plan.set("tokenizer.ggml.model", GgufValue::from_string("llama"));
  plan.set("tokenizer.ggml.tokens", GgufValue::from_array(GgufType::STRING, std::move(tokens)));
  plan.set("tokenizer.ggml.scores", GgufValue::from_array(GgufType::FLOAT32, std::move(scores)));
  plan.set("tokenizer.ggml.token_type", GgufValue::from_array(GgufType::INT32, std::move(types)));
  plan.set("tokenizer.ggml.bos_token_id", GgufValue::from_u32(1));
  plan.set("tokenizer.ggml.eos_token_id", GgufValue::from_u32(2));
  plan.set("tokenizer.ggml.unknown_token_id", GgufValue::from_u32(0));
  plan.set("tokenizer.ggml.add_bos_token", GgufValue::from_bool(true));
  plan.set("tokenizer.ggml.add_eos_token", GgufValue::from_bool(false));
  return Status::ok();
}

Result<SynthPlan> make_synth_plan(const SynthRequest& req) {
  const SynthModel* model = find_synth_model(req.like);
  if (!model) return invalid_argument("unknown model '" + req.like + "' for --like (known: " + synth_model_names() + ")");
  const SynthType* type = find_synth_type(req.type);
  if (!type) {
    if (format::ggml_type_from_name(req.type))
      return unsupported("type '" + req.type + "' is not supported by synth yet (supported: " + synth_type_names() +
                         ")");
    return invalid_argument("unknown type '" + req.type + "' (supported: " + synth_type_names() + ")");
  }
  if (req.n_layers && (*req.n_layers < 1 || *req.n_layers > 4096))
    return invalid_argument("--layers must be between 1 and 4096, got " + std::to_string(*req.n_layers));
  if (req.n_vocab && (*req.n_vocab < 1 || *req.n_vocab > (int64_t(1) << 24)))
    return invalid_argument("--vocab out of range: " + std::to_string(*req.n_vocab));
  CHIMERA_ASSIGN_OR_RETURN(SynthPlan plan, model->build(req));
  CHIMERA_RETURN_IF_ERROR(apply_type(*type, plan));
  plan.set("chimera.synth.like", GgufValue::from_string(std::string(model->name)));
  plan.set("chimera.synth.seed", GgufValue::from_u64(req.seed));
  return plan;
}

}  // namespace chimera::models::synth
