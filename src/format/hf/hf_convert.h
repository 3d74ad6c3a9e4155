// Hugging Face checkpoint import: a folder with config.json, safetensors
// weights (single or sharded), tokenizer.json, tokenizer_config.json and
// generation_config.json becomes one GGUF file.
//
// Design: the generic part (this header, hf_convert.cpp, hf_tokenizer.cpp)
// reads the folder, writes general.* and tokenizer.ggml.* keys and runs a
// family's tensor table; a family (hf_family_*.cpp, one FamilySpec each,
// registered in hf_families.cpp) plugs in with (a) the config.json
// `model_type` values it accepts, (b) a function that writes its `<arch>.*`
// hyper-parameters and returns the per-layer kind of every layer, and (c) a
// table of TensorRule rows: HF name pattern -> GGUF name pattern ("{i}" =
// layer index, "{e}" = expert index, stacked), the layer kinds the row applies
// to, a transform / reshape, and whether the tensor is kept in F32 whatever
// --type says.
//
// Invariants: every input file is untrusted (errors name the file and the
// key/tensor); every tensor of the checkpoint must be claimed by exactly one
// rule, or by the two halves of a split (an unclaimed tensor is an error, so a
// layout the table does not know is never silently dropped); required tensors
// must be present; the output file is removed when conversion fails.
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
  // Halves of a fused [..., 2F, in] tensor along dim -2 (Granite's
  // input_linear = [gate | up]): two rules claim the same HF tensor.
  kSplitFirstHalf,
  kSplitSecondHalf,
  // A BitNet b1.58 BitLinear weight. Float master weights are ternarized with
  // one absmean scale per tensor as llama.cpp's BitnetModel.weight_quant does
  // (s = max(mean|W|, 1e-5), W' = clamp(round(W / s), -1, 1) * s, rounded to
  // the checkpoint's float type); packed U8 weights [rows/4, cols] (row
  // r + k * rows/4 in bits 2k..2k+1, code = w + 1) are unpacked with the
  // rule's `scale` tensor (LayerPlan::bitnet_scale_multiplies).
  kBitnetTernary,
};

// Shape changes that keep the bytes (llama.cpp's reshapes for Mamba-2).
enum class Reshape {
  kKeep,
  kAppendOne,  // [n] -> [n, 1] (Mamba-2 A and D: ggml ne [1, n])
  kGroups,     // [n] -> [n_group, n / n_group] (Mamba-2 gated norm; LayerPlan::n_group)
};

// A layer-kind bit mask; families define their own kinds (bit i = kind i).
using KindMask = uint32_t;
inline constexpr KindMask kAllKinds = 0xffffffffu;

struct TensorRule {
  // e.g. "model.layers.{i}.attn.in_proj.weight"; no "{i}": a global tensor.
  // "{e}" (expert index): the LayerPlan::n_expert tensors [R, C] are stacked
  // into one [n_expert, R, C] tensor (llama.cpp's ffn_*_exps).
  const char* hf;
  // The GGUF name: a tn:: constant (format/gguf/tensor_names.h) that is an
  // entry of the arch's tensor table, e.g. tn::kSsmIn; null: claimed and
  // dropped (e.g. rotary inv_freq buffers).
  const char* gguf;
  KindMask kinds = kAllKinds;  // per-layer rows: the layer kinds it applies to
  Transform transform = Transform::kNone;
  // Also F32 whatever --type says, as in llama.cpp: 1-D tensors, names not
  // ending in ".weight" (ssm_a, ssm_d, biases) and "*_norm.weight".
  bool keep_f32 = false;
  bool optional = false;
  Reshape reshape = Reshape::kKeep;
  // HF name of a tensor this one is dropped for when byte-equal to it
  // (llama.cpp's Mamba omits an lm_head identical to the embedding).
  const char* drop_if_equal_to = nullptr;
  // kBitnetTernary: HF name pattern of the packed weight's scale tensor
  // ("...weight_scale"; a rule of its own claims it).
  const char* scale = nullptr;
};

// What a family's hyper-parameter step tells the driver.
struct LayerPlan {
  std::vector<int> kinds;          // the kind of each layer
  int64_t n_head = 0, n_head_kv = 0;  // for the RoPE permutations
  int64_t n_group = 0;                // for Reshape::kGroups
  int64_t n_expert = 0;               // for "{e}" rules
  // The token table's size when the family pads it (llama.cpp's
  // pad_vocab_size_multiple for Mamba); 0: config.json's vocab_size.
  int64_t vocab_size = 0;
  // Tensors computed from config.json (llama.cpp's rope_freqs.weight for Llama 3 RoPE scaling).
  std::vector<std::pair<std::string, std::vector<float>>> extra_f32;
  // HF names of optional rules that this config requires (an lm_head when
  // the config says the embeddings are not tied).
  std::vector<std::string> required;
  // Packed BitNet weights: W = codes * scale (transformers' AutoBitLinear)
  // instead of codes / scale (BitLinear, llama.cpp's reading).
  bool bitnet_scale_multiplies = false;
};

struct FamilySpec {
  std::vector<const char*> model_types;  // config.json "model_type" values
  const char* arch;                      // general.architecture
  // Writes `<arch>.*` keys from config.json (defaults for missing keys are the
  // family's business) and fills the layer plan.
  Status (*hparams)(const nlohmann::json& config, GgufWriter& w, LayerPlan* plan);
  std::vector<TensorRule> rules;
  // Optional: keys written after the tokenizer (llama.cpp's LLaDA forces
  // tokenizer.ggml.add_bos_token = true whatever tokenizer_config.json says).
  Status (*after_tokenizer)(const nlohmann::json& config, GgufWriter& w) = nullptr;
};

// The registered families (hf_families.cpp).
const std::vector<FamilySpec>& families();

struct ConvertOptions {
  std::string out_type;  // "f32", "f16", "bf16"; empty: the checkpoint's float type (bf16/f16/f32)
  std::string name;      // general.name; empty: the folder name
  std::function<void(const std::string& gguf_name, const std::vector<int64_t>& ne, GgmlType type)> progress;
  // Required: run on the output before it is written (GgufWriter::write).
  // Callers pass models::check_model_header (format/ sits below models/), so
  // a tensor the family's table does not declare, a wrong shape or a missing
  // required tensor is an error naming it, and no file is left.
  GgufCheck check;
};

// Converts HF_DIR into a GGUF file at `out`.
Status convert(const std::string& hf_dir, const std::string& out, const ConvertOptions& opts);

// Reads the tokenizer (+ tokenizer_config.json, generation_config.json, the
// config's token ids) into tokenizer.ggml.* keys: a SentencePiece
// tokenizer.model when present, else tokenizer.json as byte-level BPE (the
// pre-tokenizer recognised from its split regex: o200k / GPT-4o, Llama 3; or a
// ByteLevel step with the GPT-2 regex: GPT-NeoX, GPT-2).
Status write_tokenizer(const std::string& hf_dir, const nlohmann::json& config, GgufWriter& w);
// tokenizer.model (SentencePiece) -> tokenizer.ggml.model "llama", tokens,
// scores, token_type, pre "default"; returns the vocabulary size written.
Result<int64_t> write_spm_vocab(const std::string& hf_dir, const nlohmann::json& config, GgufWriter& w);

// JSON file helper: parses without exceptions; a missing file is not_found.
Result<nlohmann::json> read_json(const std::string& path);

}  // namespace chimera::format::hf
