// Binding named GGUF tensors to a model: required/optional lookup with shape
// and type checks that name the offending tensor. Matrices stay in place in the
// memory map (kernels::WeightView); 1-D tensors (norm weights, biases) are
// widened to float32 once at load.
#pragma once

#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/memory.h"
#include "core/status.h"
#include "format/gguf/gguf.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"

namespace chimera::layers {

// A float32 vector owned by the model (norm weight, bias).
struct Vec {
  AlignedBuffer<float> data;
  bool present() const { return data.size() > 0; }
  const float* ptr() const { return data.size() ? data.data() : nullptr; }
};

// Tensor name -> shape (ggml order) as a family's tensor table declares them
// (models/tensor_table.h declare_tensors).
using DeclaredShapes = std::unordered_map<std::string, std::vector<int64_t>>;

class WeightBinder {
 public:
  // With `packs`, matrices are repacked into their kernel's layout at bind
  // time (kernels/repack.h) and the copies owned by *packs. With `declared`
  // (the family's tensor table), binding a tensor the table does not declare,
  // or with another shape than the table's, is an internal error naming it:
  // names and shapes have one source, the table.
  explicit WeightBinder(const format::GgufFile& gguf, kernels::PackedWeights* packs = nullptr,
                        const DeclaredShapes* declared = nullptr)
      : gguf_(gguf), packs_(packs), declared_(declared) {}

  // Matrix with ggml shape [cols, rows] (ne0 = cols = input features), for matmul.
  Result<kernels::WeightView> matrix(const std::string& name, int64_t cols, int64_t rows) const;
  // Same shape checks, never repacked: a lookup table read a row at a time
  // (token embeddings).
  Result<kernels::WeightView> table(const std::string& name, int64_t cols, int64_t rows) const;
  kernels::PackedWeights* packs() const { return packs_; }
  // Same, but absent -> empty view (data == nullptr).
  Result<kernels::WeightView> optional_matrix(const std::string& name, int64_t cols, int64_t rows) const;
  // 1-D tensor of n elements widened to float32.
  Result<Vec> vector(const std::string& name, int64_t n) const;
  Result<Vec> optional_vector(const std::string& name, int64_t n) const;
  bool has(const std::string& name) const { return gguf_.find_tensor(name) != nullptr; }

  // The same lookups with the shape the table declares (needs `declared`).
  Result<kernels::WeightView> matrix(const std::string& name) const;
  Result<Vec> vector(const std::string& name) const;
  Result<Vec> optional_vector(const std::string& name) const;

 private:
  // With a declaration: the tensor and this shape must be declared.
  Status check_declared(const std::string& name, std::initializer_list<int64_t> ne) const;
  Result<const std::vector<int64_t>*> declared_shape(const std::string& name) const;

  const format::GgufFile& gguf_;
  kernels::PackedWeights* packs_ = nullptr;
  const DeclaredShapes* declared_ = nullptr;
};

}  // namespace chimera::layers
