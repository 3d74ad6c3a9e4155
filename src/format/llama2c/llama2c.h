// llama2.c import: readers for Karpathy's legacy (version 0) checkpoint and
// its tokenizer.bin vocabulary, and a converter to the GGUF that llama.cpp's
// convert-llama2c-to-ggml writes (arch "llama", all tensors F32, same metadata
// keys, key order and tensor order; see docs/CONVERT.md for the differences).
//
// Checkpoint layout (little-endian): 7 int32 (dim, hidden_dim, n_layers,
// n_heads, n_kv_heads, vocab_size, seq_len; vocab_size < 0 means the classifier
// is stored separately at the end), then fp32 arrays: token_embedding
// [vocab][dim], rms_att [L][dim], wq [L][dim][dim], wk [L][kv_dim][dim],
// wv [L][kv_dim][dim], wo [L][dim][dim], rms_ffn [L][dim], w1 [L][hidden][dim],
// w2 [L][dim][hidden], w3 [L][hidden][dim], rms_final [dim], legacy RoPE tables
// (seq_len * head_size floats, skipped), then wcls [vocab][dim] if unshared.
// Vocabulary layout: int32 max_token_length, then per token: f32 score,
// int32 byte length, bytes. The file holds no token count; it must hold exactly
// vocab_size tokens.
//
// Invariants: both files are untrusted. Every size is computed with overflow
// checks and must match the file size exactly; errors say what is wrong
// (truncated, trailing bytes, impossible header, vocabulary mismatch). Arrays
// are used in place from the memory map (zero copy): a Checkpoint keeps its
// mapping alive, and a GgufWriter built from it must not outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/mmap_file.h"
#include "core/status.h"
#include "format/gguf/gguf.h"

namespace chimera::format::llama2c {

struct Config {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;  // always positive here; the sign lives in shared_classifier
  int32_t seq_len = 0;
  bool shared_classifier = true;

  int32_t head_size() const { return dim / n_heads; }
  int32_t kv_dim() const { return dim / n_heads * n_kv_heads; }
};

// One fp32 array of the checkpoint: byte offset in the file and element count.
struct Array {
  uint64_t offset = 0;
  uint64_t count = 0;
  uint64_t bytes() const { return count * sizeof(float); }
};

class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::string& path);
  static Result<Checkpoint> parse(std::shared_ptr<MappedFile> file);

  const Config& config() const { return config_; }
  const std::string& path() const { return file_->path(); }
  // Raw little-endian fp32 bytes of `a` (inside the mapping).
  const uint8_t* data(const Array& a) const { return file_->data() + a.offset; }
  // Layer `layer`'s slice of a per-layer array.
  Array layer_slice(const Array& a, int32_t layer) const;

  Array token_embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final;
  Array classifier;  // == token_embedding when shared

 private:
  Config config_;
  std::shared_ptr<MappedFile> file_;
};

// ggml token types (llama_token_type).
enum class TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct VocabEntry {
  std::string text;  // raw bytes as stored
  float score = 0;
};

struct Vocab {
  int32_t max_token_length = 0;
  std::vector<VocabEntry> tokens;

  static Result<Vocab> open(const std::string& path);
  // `what` names the source in error messages.
  static Result<Vocab> parse(const uint8_t* data, size_t size, const std::string& what);
};

// Ids llama.cpp's converter hard-codes for llama2.c vocabularies.
inline constexpr int32_t kUnknownId = 0;
inline constexpr int32_t kBosId = 1;
inline constexpr int32_t kEosId = 2;

// A token as llama.cpp's converter stores it: ids 0/1/2 become <unk>/<s>/</s>,
// spaces become U+2581, and the type follows its rules (empty -> control,
// "<0xHH>" -> byte, else normal).
struct GgufToken {
  std::string text;
  float score = 0;
  TokenType type = TokenType::kNormal;
};
GgufToken to_gguf_token(int32_t id, const VocabEntry& e);

// One output tensor: GGUF name and shape (ggml order) and its source bytes.
struct TensorPlan {
  std::string name;
  std::vector<int64_t> ne;
  Array source;
};
// Every tensor in llama.cpp's order: token_embd, output_norm, output, then per
// layer attn_q, attn_k, attn_v, attn_output, attn_norm, ffn_gate (w1),
// ffn_down (w2), ffn_up (w3), ffn_norm.
std::vector<TensorPlan> tensor_plan(const Checkpoint& ckpt);

struct ConvertOptions {
  // general.name; empty gives "llama" (llama.cpp's constant).
  std::string name;
  // llama.context_length; 0 uses the checkpoint's seq_len. (llama.cpp's tool
  // always writes 128, its built-in default, whatever the model was trained on.)
  uint32_t context_length = 0;
  // Called once per tensor, in order, as it is added.
  std::function<void(const TensorPlan&)> progress;
  // Required: run on the output before it is written (hf::ConvertOptions::check).
  GgufCheck check;
};

// Builds the GGUF image; the writer points into `ckpt`'s mapping.
Result<GgufWriter> build_gguf(const Checkpoint& ckpt, const Vocab& vocab, const ConvertOptions& opts);

// Reads both files and writes `out_path` (via a temporary file renamed into
// place, so a failed conversion never leaves a partial output).
Status convert(const std::string& model_path, const std::string& vocab_path, const std::string& out_path,
               const ConvertOptions& opts);

}  // namespace chimera::format::llama2c
