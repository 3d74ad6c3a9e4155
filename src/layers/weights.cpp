// WeightBinder implementation.
#include "layers/weights.h"

#include <cstring>

#include "core/fp16.h"

namespace chimera::layers {

Result<kernels::WeightView> WeightBinder::matrix(const std::string& name, int64_t cols, int64_t rows) const {
  CHIMERA_ASSIGN_OR_RETURN(kernels::WeightView w, table(name, cols, rows));
  if (packs_) packs_->pack(w);
  return w;
}

Result<kernels::WeightView> WeightBinder::table(const std::string& name, int64_t cols, int64_t rows) const {
  const format::GgufTensorInfo* t = gguf_.find_tensor(name);
  if (!t) return not_found("missing tensor '" + name + "'");
  if (t->dim(2) != 1 || t->dim(3) != 1)
    return invalid_argument("tensor '" + name + "' has shape " + t->shape_string() + ", expected a matrix");
  if (t->dim(0) != cols || t->dim(1) != rows)
    return invalid_argument("tensor '" + name + "' has shape " + t->shape_string() + ", expected [" +
                            std::to_string(cols) + ", " + std::to_string(rows) + "]");
  CHIMERA_RETURN_IF_ERROR(kernels::check_matmul_shape(t->type, cols).with_context("tensor '" + name + "'"));
  kernels::WeightView w;
  w.type = t->type;
  w.data = t->data;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = format::ggml_row_size(t->type, cols);
  return w;
}

Result<kernels::WeightView> WeightBinder::optional_matrix(const std::string& name, int64_t cols,
                                                          int64_t rows) const {
  if (!has(name)) return kernels::WeightView{};
  return matrix(name, cols, rows);
}

Result<Vec> WeightBinder::vector(const std::string& name, int64_t n) const {
  const format::GgufTensorInfo* t = gguf_.find_tensor(name);
  if (!t) return not_found("missing tensor '" + name + "'");
  if ((int64_t)t->n_elements != n || t->dim(0) != n)
    return invalid_argument("tensor '" + name + "' has shape " + t->shape_string() + ", expected [" +
                            std::to_string(n) + "]");
  Vec v;
  v.data.resize((size_t)n);
  float* out = v.data.data();
  switch (t->type) {
    case format::GgmlType::F32: std::memcpy(out, t->data, (size_t)n * 4); break;
    case format::GgmlType::F16: {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(t->data);
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(p[i]);
      break;
    }
    case format::GgmlType::BF16: {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(t->data);
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      break;
    }
    default:
      return unsupported("tensor '" + name + "' has type " + format::ggml_type_name(t->type) +
                         "; 1-D tensors must be F32, F16 or BF16");
  }
  return v;
}

Result<Vec> WeightBinder::optional_vector(const std::string& name, int64_t n) const {
  if (!has(name)) return Vec{};
  return vector(name, n);
}

}  // namespace chimera::layers
