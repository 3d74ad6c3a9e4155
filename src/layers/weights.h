// Binding named GGUF tensors to a model: required/optional lookup with shape
// and type checks that name the offending tensor. Matrices stay in place in the
// memory map (kernels::WeightView); 1-D tensors (norm weights, biases) are
// widened to float32 once at load.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "core/memory.h"
#include "core/status.h"
#include "format/gguf/gguf.h"
#include "kernels/matmul.h"

namespace chimera::layers {

// A float32 vector owned by the model (norm weight, bias).
struct Vec {
  AlignedBuffer<float> data;
  bool present() const { return data.size() > 0; }
  const float* ptr() const { return data.size() ? data.data() : nullptr; }
};

class WeightBinder {
 public:
  explicit WeightBinder(const format::GgufFile& gguf) : gguf_(gguf) {}

  // Matrix with ggml shape [cols, rows] (ne0 = cols = input features).
  Result<kernels::WeightView> matrix(const std::string& name, int64_t cols, int64_t rows) const;
  // Same, but absent -> empty view (data == nullptr).
  Result<kernels::WeightView> optional_matrix(const std::string& name, int64_t cols, int64_t rows) const;
  // 1-D tensor of n elements widened to float32.
  Result<Vec> vector(const std::string& name, int64_t n) const;
  Result<Vec> optional_vector(const std::string& name, int64_t n) const;
  bool has(const std::string& name) const { return gguf_.find_tensor(name) != nullptr; }

 private:
  const format::GgufFile& gguf_;
};

}  // namespace chimera::layers
