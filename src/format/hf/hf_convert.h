// Hugging Face checkpoint import: a folder with config.json, safetensors
// weights (single or sharded), tokenizer.json, tokenizer_config.json and
// generation_config.json becomes one GGUF file.
//
// Design: the generic part (this header, hf_convert.cpp, hf_tokenizer.cpp)
// reads the folder, writes general.* and tokenizer.ggml.* keys and runs a
// family's tensor table; a family (hf_families.cpp, one FamilySpec each) plugs
// in with (a) the config.json `model_type` values it accepts, (b) a function
// that writes its `<arch>.*` hyper-parameters and returns the per-layer kind
// of every layer, and (c) a table of TensorRule rows: HF name pattern -> GGUF
// name pattern ("{i}" = layer index), the layer kinds the row applies to, a
// transform, and whether the tensor is kept in F32 whatever --type says.
//
// Invariants: every input file is untrusted (errors name the file and the
// key/tensor); every tensor of the checkpoint must be claimed by exactly one
// rule (an unclaimed tensor is an error, so a layout the table does not know is
// never silently dropped); required tensors must be present; the output file is
// removed when conversion fails.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "format/gguf/gguf.h"

namespace chimera::format::hf {

enum class Transform {
  kNone,
  kNegExp,         // A = -exp(A_log) (Mamba)
  kSqueezeMiddle,  // [C, 1, K] -> [C, K] (depthwise conv1d weights)
  // llama.cpp's Q/K row permutation for rotate-half checkpoints stored for
  // interleaved (NORM) RoPE: within each head of d rows, GGUF row 2i + j is
  // HF row j * d/2 + i (heads: LayerPlan::n_head for Q, n_head_kv for K).
  kRopePermuteQ,
  kRopePermuteK,
};

// A layer-kind bit mask; families define their own kinds (bit i = kind i).
using KindMask = uint32_t;
inline constexpr KindMask kAllKinds = 0xffffffffu;

struct TensorRule {
  const char* hf;    // e.g. "model.layers.{i}.attn.in_proj.weight"; no "{i}": a global tensor
  const char* gguf;  // e.g. "blk.{i}.ssm_in.weight"; null: claimed and dropped (e.g. rotary inv_freq buffers)
  KindMask kinds = kAllKinds;  // per-layer rows: the layer kinds it applies to
  Transform transform = Transform::kNone;
  bool keep_f32 = false;  // 1-D tensors are always F32
  bool optional = false;
};

// What a family's hyper-parameter step tells the driver.
struct LayerPlan {
  std::vector<int> kinds;          // the kind of each layer
  int64_t n_head = 0, n_head_kv = 0;  // for the RoPE permutations
  // Tensors computed from config.json (llama.cpp's rope_freqs.weight for Llama 3 RoPE scaling).
  std::vector<std::pair<std::string, std::vector<float>>> extra_f32;
};

struct FamilySpec {
  std::vector<const char*> model_types;  // config.json "model_type" values
  const char* arch;                      // general.architecture
  // Writes `<arch>.*` keys from config.json (defaults for missing keys are the
  // family's business) and fills the layer plan.
  Status (*hparams)(const nlohmann::json& config, GgufWriter& w, LayerPlan* plan);
  std::vector<TensorRule> rules;
};

// The registered families (hf_families.cpp).
const std::vector<FamilySpec>& families();

struct ConvertOptions {
  std::string out_type;  // "f32", "f16", "bf16"; empty: the checkpoint's float type (bf16/f16/f32)
  std::string name;      // general.name; empty: the folder name
  std::function<void(const std::string& gguf_name, const std::vector<int64_t>& ne, GgmlType type)> progress;
};

// Converts HF_DIR into a GGUF file at `out`.
Status convert(const std::string& hf_dir, const std::string& out, const ConvertOptions& opts);

// Reads the tokenizer (+ tokenizer_config.json, generation_config.json, the
// config's token ids) into tokenizer.ggml.* keys: a SentencePiece
// tokenizer.model when present, else tokenizer.json as byte-level BPE (the
// pre-tokenizer recognised from its split regex: o200k / GPT-4o, Llama 3).
Status write_tokenizer(const std::string& hf_dir, const nlohmann::json& config, GgufWriter& w);
// tokenizer.model (SentencePiece) -> tokenizer.ggml.model "llama", tokens,
// scores, token_type, pre "default"; returns the vocabulary size written.
Result<int64_t> write_spm_vocab(const std::string& hf_dir, const nlohmann::json& config, GgufWriter& w);

// JSON file helper: parses without exceptions; a missing file is not_found.
Result<nlohmann::json> read_json(const std::string& path);

}  // namespace chimera::format::hf
