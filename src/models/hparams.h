// Reading "<arch>.<key>" hyper-parameters from GGUF metadata with clear errors
// (missing key, wrong type, out-of-range value). Shared by every family.
#pragma once

#include <optional>
#include <string>

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

 private:
  const format::GgufFile& g_;
  std::string arch_;
};

// Attention geometry shared by uniform-attention families: head counts
// (head_count_kv defaults to head_count and must divide it) and head sizes
// (key_length / value_length, default n_embd / head_count), validated.
struct AttentionGeometry {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0, head_dim_v = 0;
};
Result<AttentionGeometry> read_attention_geometry(const HParams& hp, int64_t n_embd);

// RoPE parameters from `<arch>.rope.*` (freq_base, scaling type/factor, YaRN,
// original context) as llama.cpp interprets them; mode is the family's choice.
Result<kernels::RopeParams> read_rope(const HParams& hp, kernels::RopeMode mode, int64_t n_rot, int64_t n_ctx_train);

}  // namespace chimera::models
