// Import of ternary (BitNet b1.58 style) llama2.c-like checkpoints
// (`chimera convert --from bitnet-llama2c MODEL.bin --vocab TOK.bin -o OUT.gguf`).
//
// Checkpoint layout (little-endian; $CHIMERA_SHARED/models/README.md): a
// 256-byte header (uint32 magic 0x616b3432, int32 version 1, 7 int32 config
// values dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len,
// uint8 shared-classifier flag, zero padding), fp32 final norm [dim], fp32
// token embeddings [vocab][dim], then for each matrix kind wq, wk, wv, wo, w1,
// w2, w3 and each layer: fp32 scale, ternary codes row-major [out][in] packed
// 4 per byte, weight j of a byte at bit shift 6 - 2*(j & 3) (01 = +1, 11 = -1,
// 00 = 0; 10 is rejected). Only shared classifiers are supported.
//
// GGUF produced (arch "bitnet" with bitnet.bitlinear = "absmax-int8", which
// selects models/bitnet_llama2c.cpp): token_embd.weight / output_norm.weight
// F32, per layer blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_gate(w1),
// ffn_down(w2),ffn_up(w3)}.weight as TQ2_0 with every block scale 1.0 (so the
// stored value is exactly the code) and blk.N.<same>.scale F32 [1] holding the
// fp32 scale bit for bit. A matrix whose row length is not a multiple of 256
// (the dim-128 model) is stored flattened as [256, out*in/256] (natural
// row-major element order; the model knows the logical shape). The vocabulary
// is written exactly as the llama2c importer writes it. Lossless: no rounding.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/mmap_file.h"
#include "core/status.h"
#include "format/gguf/gguf.h"

namespace chimera::format::bitnet_llama2c {

inline constexpr uint32_t kMagic = 0x616b3432u;
inline constexpr int64_t kHeaderBytes = 256;

struct Config {
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
  bool shared_classifier = true;
  int32_t head_size() const { return dim / n_heads; }
  int32_t kv_dim() const { return dim / n_heads * n_kv_heads; }
};

// One ternary matrix: fp32 scale and codes in {-1, 0, 1}, row-major [out][in].
struct TernaryMatrix {
  int64_t out = 0, in = 0;
  float scale = 0.f;
  std::vector<int8_t> codes;
};

struct Checkpoint {
  Config config;
  std::vector<float> final_norm;  // [dim]
  std::vector<float> embedding;   // [vocab][dim]
  // kinds[k][layer], k in order wq, wk, wv, wo, w1, w2, w3.
  std::vector<TernaryMatrix> kinds[7];
  static Result<Checkpoint> open(const std::string& path);
  static Result<Checkpoint> parse(const uint8_t* data, size_t size, const std::string& what);
};

struct ConvertOptions {
  std::string name;                // general.name
  uint32_t context_length = 0;     // 0: seq_len
  std::function<void(const std::string& name, const std::vector<int64_t>& ne, const char* type)> progress;
  // Required: run on the output before it is written (hf::ConvertOptions::check).
  GgufCheck check;
};

// Reads both files and writes out_path (temporary file renamed into place).
Status convert(const std::string& model_path, const std::string& vocab_path, const std::string& out_path,
               const ConvertOptions& opts);

}  // namespace chimera::format::bitnet_llama2c
