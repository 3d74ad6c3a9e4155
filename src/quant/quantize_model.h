// Whole-model quantization (`chimera quantize`, and `synth` for quantized TYPEs):
// the quantization mixes (Q4_K_M, Q8_0, ...), the per-tensor type rules that turn
// a mix into a storage type for each tensor, row encoders/decoders for every type
// the mixes produce, and the GGUF-to-GGUF driver.
//
// The type rules follow llama.cpp's llama_tensor_get_type (no imatrix, dense
// models): only 2-D+ "*weight" tensors that are not norms are quantized; the
// output head (or a tied token_embd) gets Q6_K unless the base type is Q8_0;
// attn_v / ffn_down get more bits on the layers use_more_bits() selects (K_M
// mixes), on the first layers (K_S mixes) or always (Q2_K / Q3_K_M); fused
// attn_qkv and attn_kv_b follow the attn_v rules (llama.cpp's category_is_attn_v);
// a tensor whose row length is not a multiple of the chosen type's block falls
// back (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0, then F16).
// IQ4_XS (LLAMA_FTYPE_MOSTLY_IQ4_XS, no imatrix): output head as above (Q6_K),
// attn_v Q5_K when n_gqa >= 4, ffn_down Q5_K on the first n/8 layers, the rest
// IQ4_XS; rows that are not whole 256-blocks fall back to IQ4_NL.
// TQ1_0 / TQ2_0 (llama.cpp's LLAMA_FTYPE_MOSTLY_TQ*): the output head (or tied
// token_embd) gets Q6_K (Q8_0 if its rows are not whole 256-blocks), an untied
// token_embd Q4_K, 1-D tensors and norms stay as they are, every other matrix is
// ternarized with absmean scaling (quant/ternarize.h): ONE scale per 2-D matrix
// (per expert slice of a 3-D tensor), as BitNet b1.58 trains — not llama.cpp's
// per-256-block absmax. TQ blocks carry an f16 d per 256 values; every block of
// a matrix stores the same d = f16(scale) (0 for an all-zero block), so the file
// is a plain TQ file any TQ reader decodes to code x scale. Matrices whose rows
// are not whole 256-blocks fall back to Q4_0 (then F16), as llama.cpp does.
// encode_rows() on TQ types is llama.cpp's per-block absmax quantizer (used by
// synth, which writes chunk by chunk and never sees a whole matrix).
// Invariants: choose_tensor_type depends only on (mix, context, name, shape, role),
// so quantize and synth agree (both take roles from the model's tensor table); encode_rows is deterministic and gives the same bytes
// for any thread count (rows are independent).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "format/gguf/ggml_types.h"
#include "quant/tensor_role.h"

namespace chimera {
class ThreadPool;
}

namespace chimera::quant {

// One quantization TYPE as llama-quantize spells it.
struct QuantMix {
  std::string_view name;      // "Q4_K_M"
  uint32_t ftype;             // llama_ftype number recorded as general.file_type
  format::GgmlType base;      // default storage type of quantized tensors
};
const std::vector<QuantMix>& quant_mixes();
const QuantMix* find_quant_mix(std::string_view name);  // case-insensitive
std::string quant_mix_names();                          // "Q8_0, Q4_0, ..."

// A tensor as the rules see it. With a role (the model's tensor table,
// models/tensor_table.h) the rules key on it; kUnknown falls back to
// llama.cpp's name patterns. Both give the same types for the same tensor.
struct TensorShape {
  std::string name;
  std::vector<int64_t> ne;  // ggml order
  TensorRole role = TensorRole::kUnknown;
};

// Model-wide facts the rules need (llama.cpp's quantize_state).
struct MixContext {
  int64_t n_attn_v = 0;     // attn_v / attn_qkv tensors (by name: *attn_v.weight / *attn_qkv.weight / *attn_kv_b.weight)
  int64_t n_ffn_down = 0;   // ffn_down tensors, expert and shared-expert ones too (by name: *ffn_down*)
  bool has_output = false;  // output.weight present (else token_embd is the tied head)
  int64_t n_gqa = 1;        // head_count / head_count_kv
};
// Builds the context from the tensor list and the attention head counts (0 = unknown).
MixContext make_mix_context(const std::vector<TensorShape>& tensors, int64_t n_head, int64_t n_head_kv);

// Whether llama.cpp would quantize this tensor at all (else it keeps its type).
bool is_quantizable(const TensorShape& t);

// The storage type of one tensor under `mix`. For non-quantizable tensors this is
// F32 (callers that copy inputs as-is check is_quantizable first). `fallback` is
// set when the row length forced a fallback type.
format::GgmlType choose_tensor_type(const QuantMix& mix, const MixContext& ctx, const TensorShape& t,
                                    bool* fallback = nullptr);

// Encodes n_rows rows of n_cols floats into `type` (ggml_row_size(type, n_cols)
// bytes per row). Supports F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
// Q2_K..Q6_K, IQ4_XS, TQ1_0, TQ2_0 (per-block absmax, llama.cpp's quantizer). With a pool, rows are split across its threads.
Status encode_rows(format::GgmlType type, const float* src, int64_t n_rows, int64_t n_cols, uint8_t* dst,
                   ThreadPool* pool = nullptr);
// Absmean ternarization (quant/ternarize.h) of a tensor with ggml shape `ne`
// (ne[0] a multiple of 256): one scale per 2-D matrix ne[0] x ne[1], each 3-D
// slice separately; scales (optional) gets them in slice order.
Status ternarize_matrices(format::GgmlType type, const float* src, const std::vector<int64_t>& ne, uint8_t* dst,
                          size_t dst_bytes, std::vector<float>* scales = nullptr);
// Decodes n elements (whole blocks) of `type` to f32; same type list plus Q8_K.
Status decode_row(format::GgmlType type, const uint8_t* src, int64_t n, float* dst);

struct QuantizeOptions {
  ThreadPool* pool = nullptr;  // null = single-threaded
  // Called once per tensor after it is encoded.
  std::function<void(size_t index, size_t count, const std::string& name, format::GgmlType from,
                     format::GgmlType to, uint64_t bytes_in, uint64_t bytes_out, bool fallback)>
      on_tensor;
  std::function<void(const std::string& message)> warn;  // requantization and similar notes
  // The role of a tensor of architecture `arch` (its tensor table), or
  // kUnknown; unset = every tensor by name.
  std::function<TensorRole(std::string_view arch, std::string_view name)> role_of;
};

struct QuantizeStats {
  uint64_t bytes_in = 0, bytes_out = 0;
  size_t n_tensors = 0, n_quantized = 0, n_fallback = 0;
};

// Reads a GGUF, writes it with every tensor converted by the mix rules. The
// output is written to out_path + ".partial" and renamed on success. Tensors
// are produced while the file is written (on_tensor fires then), one at a
// time, so memory is bounded by the largest tensor, not the model.
Result<QuantizeStats> quantize_model(const std::string& in_path, const std::string& out_path, const QuantMix& mix,
                                     const QuantizeOptions& opts);

}  // namespace chimera::quant
