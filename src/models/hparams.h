// Reading "<arch>.<key>" hyper-parameters from GGUF metadata with clear errors
// (missing key, wrong type, out-of-range value). Shared by every family.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "format/gguf/gguf.h"
#include "kernels/ops.h"

namespace chimera::models {

class HParams {
 public:
  HParams(const format::GgufFile& g, std::string arch) : g_(g), arch_(std::move(arch)) {}
  std::string key(const std::string& k) const { return arch_ + "." + k; }
  // Required positive integer (1 .. max).
  Result<int64_t> count(const std::string& k, int64_t max = (int64_t)1 << 40) const;
  int64_t count_or(const std::string& k, int64_t dflt) const;
  Result<float> real(const std::string& k) const;
  float real_or(const std::string& k, float dflt) const;
  bool flag_or(const std::string& k, bool dflt) const;
  std::optional<std::string> str(const std::string& k) const { return g_.get_string(key(k)); }
  const format::GgufFile& gguf() const { return g_; }
  // Values a family derived instead of reading them (absent or inconsistent
  // keys), in words; the CLI prints them on the load line (ModelInfo::derived).
  void note(std::string text) const {
    for (const std::string& n : notes_)
      if (n == text) return;
    notes_.push_back(std::move(text));
  }
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  const format::GgufFile& g_;
  std::string arch_;
  mutable std::vector<std::string> notes_;
};

// Attention head sizes (key/query and value) for the given head counts:
// `key_length` / `value_length` when present; otherwise derived from the
// shapes of layer `layer`'s attn_q.weight (rows / n_head) and attn_v.weight
// (rows / n_head_kv) when the layer has them, because published files often
// lack the keys while head_dim != n_embd / n_head (Phi-tiny-MoE, Granite,
// Qwen-style checkpoints); else n_embd / n_head. A derived value that differs
// from n_embd / n_head is noted (hp.note). Every tensor shape is still checked
// against the result when the weights are bound.
struct HeadDims {
  int64_t k = 0, v = 0;
};
Result<HeadDims> read_head_dims(const HParams& hp, int64_t n_embd, int64_t n_head, int64_t n_head_kv,
                                int64_t layer);

// Attention geometry shared by uniform-attention families: head counts
// (head_count_kv defaults to head_count and must divide it) and head sizes
// (read_head_dims of layer `layer`), validated.
struct AttentionGeometry {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0, head_dim_v = 0;
};
Result<AttentionGeometry> read_attention_geometry(const HParams& hp, int64_t n_embd, int64_t layer = 0);

// Rotated dimensions per head: `rope.dimension_count`, default the head size.
// A count larger than the head (llama.cpp's converter writes hidden/heads for
// Phi-tiny-MoE, whose heads are narrower) means the whole head and is noted.
Result<int64_t> read_rope_dims(const HParams& hp, int64_t head_dim);

// RoPE parameters from `<arch>.rope.*` (freq_base, scaling type/factor, YaRN,
// original context) as llama.cpp interprets them; mode is the family's choice.
Result<kernels::RopeParams> read_rope(const HParams& hp, kernels::RopeMode mode, int64_t n_rot, int64_t n_ctx_train);

}  // namespace chimera::models
