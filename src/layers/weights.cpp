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
  CHIMERA_RETURN_IF_ERROR(check_declared(name, {cols, rows}));
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
  CHIMERA_RETURN_IF_ERROR(check_declared(name, {n}));
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

namespace {

std::string shape_text(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

Result<const std::vector<int64_t>*> WeightBinder::declared_shape(const std::string& name) const {
  if (!declared_) return internal_error("tensor '" + name + "': no tensor table to take its shape from");
  auto it = declared_->find(name);
  if (it == declared_->end()) return internal_error("tensor '" + name + "' is not in the family's tensor table");
  return &it->second;
}

Status WeightBinder::check_declared(const std::string& name, std::initializer_list<int64_t> ne) const {
  if (!declared_) return Status::ok();
  CHIMERA_ASSIGN_OR_RETURN(const std::vector<int64_t>* want, declared_shape(name));
  if (*want != std::vector<int64_t>(ne))
    return internal_error("tensor '" + name + "' is bound as " + shape_text(ne) + " but the tensor table declares " +
                          shape_text(*want));
  return Status::ok();
}

Result<kernels::WeightView> WeightBinder::matrix(const std::string& name) const {
  CHIMERA_ASSIGN_OR_RETURN(const std::vector<int64_t>* ne, declared_shape(name));
  if (ne->size() != 2) return internal_error("tensor '" + name + "' is declared " + shape_text(*ne) + ", not a matrix");
  return matrix(name, (*ne)[0], (*ne)[1]);
}

Result<Vec> WeightBinder::vector(const std::string& name) const {
  CHIMERA_ASSIGN_OR_RETURN(const std::vector<int64_t>* ne, declared_shape(name));
  if (ne->size() != 1) return internal_error("tensor '" + name + "' is declared " + shape_text(*ne) + ", not a vector");
  return vector(name, (*ne)[0]);
}

Result<Vec> WeightBinder::optional_vector(const std::string& name) const {
  CHIMERA_ASSIGN_OR_RETURN(const std::vector<int64_t>* ne, declared_shape(name));
  if (ne->size() != 1) return internal_error("tensor '" + name + "' is declared " + shape_text(*ne) + ", not a vector");
  return optional_vector(name, (*ne)[0]);
}

}  // namespace chimera::layers
