// Tensor tables: enumeration, checking a file against them, role lookup
// (see tensor_table.h).
#include "models/tensor_table.h"

#include <cctype>
#include <unordered_map>

#include "models/model.h"

namespace chimera::models {

namespace {

void set_size(std::vector<std::pair<std::string, int64_t>>& sizes, std::string_view name, int64_t value) {
  for (auto& [k, v] : sizes)
    if (k == name) {
      v = value;
      return;
    }
  sizes.emplace_back(std::string(name), value);
}

std::optional<int64_t> find_size(const std::vector<std::pair<std::string, int64_t>>& sizes, std::string_view name) {
  for (const auto& [k, v] : sizes)
    if (k == name) return v;
  return std::nullopt;
}

}  // namespace

void TableParams::set(std::string_view name, int64_t value) { set_size(sizes_, name, value); }

void TableParams::set(int64_t layer, std::string_view name, int64_t value) {
  if (layer < 0 || layer >= n_layer()) return;
  if (layer_sizes_.size() <= (size_t)layer) layer_sizes_.resize((size_t)layer + 1);
  set_size(layer_sizes_[(size_t)layer], name, value);
}

std::optional<int64_t> TableParams::get(std::string_view name, int64_t layer) const {
  if (layer >= 0 && (size_t)layer < layer_sizes_.size())
    if (auto v = find_size(layer_sizes_[(size_t)layer], name)) return v;
  return find_size(sizes_, name);
}

void TableParams::tag(int64_t layer, std::string_view tag) {
  if (layer < 0 || layer >= n_layer() || has_tag(layer, tag)) return;
  tags_[(size_t)layer].emplace_back(tag);
}

void TableParams::tag_all(std::string_view tag) {
  for (int64_t l = 0; l < n_layer(); ++l) this->tag(l, tag);
}

bool TableParams::has_tag(int64_t layer, std::string_view tag) const {
  if (layer < 0 || layer >= n_layer()) return false;
  for (const std::string& t : tags_[(size_t)layer])
    if (t == tag) return true;
  return false;
}

namespace {

std::string shape_text(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// Evaluates a dimension expression: sums of products / quotients of integers,
// size names and parenthesised sums ("2*d_inner+2*n_group*d_state+n_head",
// "n_rot/2", "(n_head+2*n_head_kv)*head_dim"), left to right within a
// product, integer division.
class DimExpr {
 public:
  DimExpr(std::string_view text, const TableParams& p, int64_t layer) : s_(text), p_(p), layer_(layer) {}

  Result<int64_t> eval() {
    CHIMERA_ASSIGN_OR_RETURN(int64_t v, sum());
    if (i_ != s_.size()) return error("unexpected '" + std::string(1, s_[i_]) + "'");
    return v;
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }

  Result<int64_t> sum() {
    CHIMERA_ASSIGN_OR_RETURN(int64_t v, term());
    while (peek() == '+') {
      ++i_;
      CHIMERA_ASSIGN_OR_RETURN(int64_t t, term());
      v += t;
    }
    return v;
  }

  Result<int64_t> term() {
    CHIMERA_ASSIGN_OR_RETURN(int64_t v, factor());
    while (peek() == '*' || peek() == '/') {
      const char op = s_[i_++];
      CHIMERA_ASSIGN_OR_RETURN(int64_t f, factor());
      if (op == '*') {
        v *= f;
      } else {
        if (f == 0) return error("division by zero");
        v /= f;
      }
    }
    return v;
  }

  Result<int64_t> factor() {
    if (peek() == '(') {
      ++i_;
      CHIMERA_ASSIGN_OR_RETURN(int64_t v, sum());
      if (peek() != ')') return error("missing ')'");
      ++i_;
      return v;
    }
    const size_t b = i_;
    if (std::isdigit((unsigned char)peek())) {
      int64_t v = 0;
      while (std::isdigit((unsigned char)peek())) v = v * 10 + (s_[i_++] - '0');
      return v;
    }
    while (std::isalnum((unsigned char)peek()) || peek() == '_') ++i_;
    if (b == i_) return error("expected a number or a size name");
    const std::string_view name = s_.substr(b, i_ - b);
    const std::optional<int64_t> v = p_.get(name, layer_);
    if (!v) return error("size '" + std::string(name) + "' is not set");
    return *v;
  }

  Status error(const std::string& what) const {
    return internal_error("shape expression '" + std::string(s_) + "': " + what);
  }

  std::string_view s_;
  const TableParams& p_;
  int64_t layer_;
  size_t i_ = 0;
};

Status add_row(const TensorEntry& e, int64_t layer, const TableParams& p, std::vector<TensorRow>& out) {
  TensorRow r;
  r.name = tn::at(e.pattern, layer);
  r.role = e.role;
  r.required = e.need == Need::kRequired;
  r.layer = layer;
  r.entry = &e;
  for (std::string_view d : e.shape) {
    auto v = DimExpr(d, p, layer).eval();
    if (!v) return v.status().with_context("tensor '" + r.name + "'");
    if (*v < 1) {
      if (e.need == Need::kOptional) return Status::ok();  // the sizes rule it out; present = unexpected
      return invalid_argument("tensor '" + r.name + "': dimension " + std::string(d) + " = " + std::to_string(*v) +
                              " (the hyper-parameters give no such tensor)");
    }
    r.ne.push_back(*v);
  }
  out.push_back(std::move(r));
  return Status::ok();
}

bool matches(std::string_view pattern, std::string_view name) {
  const size_t at = pattern.find("{i}");
  if (at == std::string_view::npos) return pattern == name;
  const std::string_view pre = pattern.substr(0, at), suf = pattern.substr(at + 3);
  if (name.size() <= pre.size() + suf.size() || name.substr(0, pre.size()) != pre ||
      name.substr(name.size() - suf.size()) != suf)
    return false;
  for (char c : name.substr(pre.size(), name.size() - pre.size() - suf.size()))
    if (!std::isdigit((unsigned char)c)) return false;
  return true;
}

}  // namespace

Result<std::vector<TensorRow>> enumerate_tensors(const TensorTable& table, const TableParams& params) {
  std::vector<TensorRow> rows;
  const auto& es = table.entries;
  for (size_t i = 0; i < es.size();) {
    if (!es[i].per_layer()) {
      CHIMERA_RETURN_IF_ERROR(add_row(es[i], -1, params, rows));
      ++i;
      continue;
    }
    size_t end = i;
    while (end < es.size() && es[end].per_layer()) ++end;
    for (int64_t l = 0; l < params.n_layer(); ++l)
      for (size_t k = i; k < end; ++k)
        if (es[k].layers.empty() || params.has_tag(l, es[k].layers))
          CHIMERA_RETURN_IF_ERROR(add_row(es[k], l, params, rows));
    i = end;
  }
  return rows;
}

Status check_tensors(const std::vector<TensorRow>& rows, const format::GgufFile& g, std::string_view arch) {
  std::unordered_map<std::string_view, const TensorRow*> by_name;
  for (const TensorRow& r : rows) {
    by_name.emplace(r.name, &r);
    const format::GgufTensorInfo* t = g.find_tensor(r.name);
    if (!t) {
      if (r.required) return not_found("missing tensor '" + r.name + "'");
      continue;
    }
    bool same = true;
    for (size_t d = 0; d < 4 && same; ++d) same = t->dim(d) == (d < r.ne.size() ? r.ne[d] : 1);
    if (!same)
      return invalid_argument("tensor '" + r.name + "' has shape " + t->shape_string() + ", expected " +
                              shape_text(r.ne));
  }
  for (const format::GgufTensorInfo& t : g.tensors())
    if (!by_name.count(t.name))
      return invalid_argument("unexpected tensor '" + t.name + "': arch '" + std::string(arch) +
                              "' with these hyper-parameters has no such tensor");
  return Status::ok();
}

Result<layers::DeclaredShapes> declare_tensors(std::string_view arch, const TableParams& params,
                                               const format::GgufFile& g) {
  CHIMERA_ASSIGN_OR_RETURN(const TensorTable* table, require_tensor_table(arch));
  CHIMERA_ASSIGN_OR_RETURN(std::vector<TensorRow> rows, enumerate_tensors(*table, params));
  CHIMERA_RETURN_IF_ERROR(check_tensors(rows, g, g.architecture()));
  layers::DeclaredShapes shapes;
  for (TensorRow& r : rows) shapes.emplace(std::move(r.name), std::move(r.ne));
  return shapes;
}

quant::TensorRole tensor_role(const TensorTable& table, std::string_view name) {
  for (const TensorEntry& e : table.entries)
    if (matches(e.pattern, name)) return e.role;
  return quant::TensorRole::kUnknown;
}

const TensorTable* find_tensor_table(std::string_view arch) {
  for (const RegistryEntry& e : model_registry())
    if (arch == e.arch) return e.tensors;
  return nullptr;
}

Result<const TensorTable*> require_tensor_table(std::string_view arch) {
  const TensorTable* t = find_tensor_table(arch);
  if (!t) return internal_error("arch '" + std::string(arch) + "' has no tensor table");
  return t;
}

Result<int64_t> embedding_rows(const format::GgufFile& g) {
  const format::GgufTensorInfo* t = g.find_tensor(tn::kTokenEmbd);
  if (!t) return not_found(std::string("missing tensor '") + tn::kTokenEmbd + "'");
  return t->dim(1);
}

}  // namespace chimera::models
