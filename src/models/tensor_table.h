// A family's tensors, declared once: every tensor name pattern
// ("blk.{i}.attn_q.weight"), its shape as expressions over named sizes
// ("n_embd", "2*n_ff"; ggml order, ne0 = columns), whether it is required,
// which layers have it (a layer tag from the family's layer plan: "attn",
// "mamba2", ...; none = every layer), its role (quant/tensor_role.h) and the
// values `synth` fills it with. Read by
//   - the loader: check_tensors() before binding (a missing required tensor,
//     a wrong shape or a tensor the table does not have is an error naming
//     it), and the WeightBinder, which refuses to bind a tensor or shape the
//     table does not declare (layers/weights.h DeclaredShapes);
//   - synth: the plan's tensor list is enumerate_tensors() of the same table;
//   - quantize: the per-tensor rules key on tensor_role() (name patterns
//     remain the fallback for architectures without a table).
// A family registers its table on its registry line (models/registry.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "format/gguf/gguf.h"
#include "format/gguf/tensor_names.h"
#include "layers/weights.h"
#include "quant/tensor_role.h"

namespace chimera::models {

namespace tn = format::tn;  // the tensor-name patterns the tables are built from

// The values `synth` writes into a tensor: normal(σ = value) or a constant.
struct SynthFill {
  bool constant = false;
  float value = 0.02f;
};
constexpr SynthFill fill_normal(float std_dev) { return {false, std_dev}; }
constexpr SynthFill fill_constant(float v) { return {true, v}; }

enum class Need : uint8_t { kRequired, kOptional };

struct TensorEntry {
  std::string_view pattern;             // "{i}" stands for the layer index
  std::vector<std::string_view> shape;  // dimension expressions: names, integers, + * / ( )
  quant::TensorRole role = quant::TensorRole::kUnknown;
  Need need = Need::kRequired;
  std::string_view layers = {};         // per-layer entries: the layer tag required ("" = all)
  SynthFill fill = {};                  // default: normal(0.02)
  bool per_layer() const { return pattern.find("{i}") != std::string_view::npos; }
};

// Entries in file order: a run of consecutive per-layer entries is expanded
// layer by layer (blk.0.*, blk.1.*, ...), as llama.cpp's converter writes.
struct TensorTable {
  std::vector<TensorEntry> entries;
};

// The sizes a table's shapes refer to, and the layer plan's tags.
class TableParams {
 public:
  explicit TableParams(int64_t n_layer = 0) : tags_((size_t)(n_layer > 0 ? n_layer : 0)) {}
  int64_t n_layer() const { return (int64_t)tags_.size(); }
  void set(std::string_view name, int64_t value);
  // A size that differs per layer (Granite's per-layer head counts): layer's
  // own value, used by that layer's entries instead of the model-wide one.
  void set(int64_t layer, std::string_view name, int64_t value);
  // layer >= 0: that layer's value if it has one, else the model-wide value.
  std::optional<int64_t> get(std::string_view name, int64_t layer = -1) const;
  void tag(int64_t layer, std::string_view tag);
  void tag_all(std::string_view tag);
  bool has_tag(int64_t layer, std::string_view tag) const;

 private:
  using Sizes = std::vector<std::pair<std::string, int64_t>>;
  Sizes sizes_;
  std::vector<Sizes> layer_sizes_;  // per layer, grown on demand
  std::vector<std::vector<std::string>> tags_;
};

// One concrete tensor of a model.
struct TensorRow {
  std::string name;
  std::vector<int64_t> ne;
  quant::TensorRole role = quant::TensorRole::kUnknown;
  bool required = true;
  int64_t layer = -1;  // -1: a whole-model tensor
  const TensorEntry* entry = nullptr;
};

// The table's tensors for these sizes and layer plan, in file order. An
// expression naming a size the family did not set, or a dimension below 1 of
// a required tensor, is an error naming the tensor; an optional tensor with a
// dimension below 1 is left out.
Result<std::vector<TensorRow>> enumerate_tensors(const TensorTable& table, const TableParams& params);

// Checks a file's tensors against the rows: a missing required tensor, a
// tensor of another shape and a tensor that is not a row are errors naming
// the tensor (arch names the architecture in the message).
Status check_tensors(const std::vector<TensorRow>& rows, const format::GgufFile& g, std::string_view arch);

// enumerate_tensors + check_tensors of arch's registered table; the rows'
// shapes, for the WeightBinder.
Result<layers::DeclaredShapes> declare_tensors(std::string_view arch, const TableParams& params,
                                               const format::GgufFile& g);

// The role of a tensor name under a table (kUnknown if no entry matches).
quant::TensorRole tensor_role(const TensorTable& table, std::string_view name);

// The registered table of an architecture (models/registry.cpp), or null.
const TensorTable* find_tensor_table(std::string_view arch);
// The same; no table is an internal error naming arch.
Result<const TensorTable*> require_tensor_table(std::string_view arch);

// Rows of token_embd.weight (the vocabulary size every table's embedding
// shapes use); a missing token_embd.weight is an error naming it.
Result<int64_t> embedding_rows(const format::GgufFile& g);

}  // namespace chimera::models
