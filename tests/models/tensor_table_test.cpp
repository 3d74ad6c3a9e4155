// Tensor tables (models/tensor_table.h): enumeration of llama's table for a
// known set of sizes (names, shapes, order, roles, required flags), layer tags,
// shape-expression errors, checking a file against the rows (a missing, a
// misshapen and an unexpected tensor are errors naming the tensor), role
// lookup by pattern, and the WeightBinder refusing what the table does not
// declare.
#include <gtest/gtest.h>

#include <vector>

#include "core/mmap_file.h"
#include "format/gguf/gguf.h"
#include "layers/weights.h"
#include "models/tensor_table.h"

namespace chimera::models {
namespace {

using quant::TensorRole;

// Llama sizes of a 2-layer model: GQA 4/2 heads of 16, ff 128, vocab 512.
TableParams tiny_llama() {
  TableParams p(2);
  p.set("n_embd", 64), p.set("n_vocab", 512), p.set("n_ff", 128), p.set("n_rot", 16);
  p.set("n_head", 4), p.set("n_head_kv", 2), p.set("head_dim", 16), p.set("head_dim_v", 16);
  return p;
}

const TensorTable& llama() {
  const TensorTable* t = find_tensor_table("llama");
  EXPECT_NE(t, nullptr);
  return *t;
}

const TensorRow* row(const std::vector<TensorRow>& rows, const std::string& name) {
  for (const TensorRow& r : rows)
    if (r.name == name) return &r;
  return nullptr;
}

TEST(TensorTable, EnumeratesLlamaForKnownSizes) {
  auto rows = enumerate_tensors(llama(), tiny_llama());
  ASSERT_TRUE(rows.is_ok()) << rows.status().message();
  // token_embd, rope_freqs, 2 x 16 per-layer rows (9 tensors + 7 optional biases), output_norm, output.
  ASSERT_EQ(rows->size(), 2u + 2 * 16 + 2);
  EXPECT_EQ((*rows)[0].name, "token_embd.weight");
  EXPECT_EQ((*rows)[1].name, "rope_freqs.weight");
  EXPECT_EQ((*rows)[2].name, "blk.0.attn_norm.weight");
  EXPECT_EQ((*rows)[18].name, "blk.1.attn_norm.weight");  // layer-major: all of blk.0 first
  EXPECT_EQ(rows->back().name, "output.weight");

  const TensorRow* k = row(*rows, "blk.1.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->ne, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(k->role, TensorRole::kAttnK);
  EXPECT_TRUE(k->required);
  EXPECT_EQ(k->layer, 1);
  const TensorRow* o = row(*rows, "blk.0.attn_output.weight");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->ne, (std::vector<int64_t>{64, 64}));
  const TensorRow* down = row(*rows, "blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->ne, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(down->role, TensorRole::kFfnDown);
  const TensorRow* rope = row(*rows, "rope_freqs.weight");
  ASSERT_NE(rope, nullptr);
  EXPECT_EQ(rope->ne, (std::vector<int64_t>{8}));  // n_rot / 2
  EXPECT_FALSE(rope->required);
  EXPECT_EQ(rope->layer, -1);
  EXPECT_FALSE(row(*rows, "blk.0.attn_q.bias")->required);
  EXPECT_FALSE(row(*rows, "output.weight")->required);
  EXPECT_EQ(row(*rows, "token_embd.weight")->ne, (std::vector<int64_t>{64, 512}));
}

TEST(TensorTable, LayerTagsSelectLayersAndExpressionsEvaluate) {
  const TensorTable t = {{
      {"blk.{i}.norm.weight", {"n"}, TensorRole::kNorm},
      {"blk.{i}.attn.weight", {"n", "3*n+k/2"}, TensorRole::kAttnQkv, Need::kRequired, "attn"},
      {"blk.{i}.ssm.weight", {"n", "2*(n+k)*k"}, TensorRole::kSsmIn, Need::kRequired, "ssm"},
      {"tail.weight", {"k"}, TensorRole::kNorm},
  }};
  TableParams p(3);
  p.set("n", 8), p.set("k", 5);
  p.tag(1, "attn");
  p.tag(0, "ssm"), p.tag(2, "ssm");
  auto rows = enumerate_tensors(t, p);
  ASSERT_TRUE(rows.is_ok()) << rows.status().message();
  std::vector<std::string> names;
  for (const TensorRow& r : *rows) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"blk.0.norm.weight", "blk.0.ssm.weight", "blk.1.norm.weight",
                                             "blk.1.attn.weight", "blk.2.norm.weight", "blk.2.ssm.weight",
                                             "tail.weight"}));
  EXPECT_EQ(row(*rows, "blk.1.attn.weight")->ne, (std::vector<int64_t>{8, 26}));  // 3*8 + 5/2
  EXPECT_EQ(row(*rows, "blk.2.ssm.weight")->ne, (std::vector<int64_t>{8, 130}));  // 2*(8+5)*5

  // A per-layer size (Granite's per-layer head counts) applies to its layer only.
  p.set(1, "n", 4);
  rows = enumerate_tensors(t, p);
  ASSERT_TRUE(rows.is_ok()) << rows.status().message();
  EXPECT_EQ(row(*rows, "blk.1.attn.weight")->ne, (std::vector<int64_t>{4, 14}));
  EXPECT_EQ(row(*rows, "blk.1.norm.weight")->ne, (std::vector<int64_t>{4}));
  EXPECT_EQ(row(*rows, "blk.0.norm.weight")->ne, (std::vector<int64_t>{8}));
}

TEST(TensorTable, BadExpressionsNameTheTensor) {
  const TensorTable unset = {{{"blk.{i}.x.weight", {"n_embd", "n_missing"}, TensorRole::kAttnQ}}};
  TableParams p(1);
  p.set("n_embd", 4);
  auto r = enumerate_tensors(unset, p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("blk.0.x.weight"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("n_missing"), std::string::npos) << r.status().message();

  const TensorTable zero = {{{"y.weight", {"n_embd/8"}, TensorRole::kNorm}}};
  r = enumerate_tensors(zero, p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("y.weight"), std::string::npos) << r.status().message();
  // An optional tensor the sizes rule out is left out instead.
  const TensorTable zero_opt = {{{"y.weight", {"n_embd/8"}, TensorRole::kNorm, Need::kOptional}}};
  r = enumerate_tensors(zero_opt, p);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->empty());

  for (std::string_view bad : {"n_embd*", "(n_embd+1", "n_embd)", "n_embd/0"}) {
    const TensorTable syntax = {{{"z.weight", {bad}, TensorRole::kNorm}}};
    r = enumerate_tensors(syntax, p);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("z.weight"), std::string::npos) << r.status().message();
  }
}

// An in-memory GGUF with F32 tensors of the given shapes (zeros).
struct MemGguf {
  std::vector<uint8_t> bytes;
  std::unique_ptr<format::GgufFile> file;
};
MemGguf make_gguf(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  format::GgufWriter w;
  w.set("general.architecture", format::GgufValue::from_string("llama"));
  std::vector<std::vector<float>> data;
  for (const auto& [name, ne] : tensors) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    data.emplace_back((size_t)n, 0.f);
    EXPECT_TRUE(w.add_tensor(name, format::GgmlType::F32, ne, data.back().data(), (size_t)n * 4).is_ok());
  }
  MemGguf m;
  m.bytes = w.to_bytes();
  auto f = format::GgufFile::parse(MappedFile::from_bytes(m.bytes.data(), m.bytes.size()));
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  if (f.is_ok()) m.file = std::move(*f);
  return m;
}

// The required rows of the tiny llama as (name, shape) pairs.
std::vector<std::pair<std::string, std::vector<int64_t>>> required_tensors() {
  std::vector<std::pair<std::string, std::vector<int64_t>>> v;
  const std::vector<TensorRow> rows = enumerate_tensors(llama(), tiny_llama()).value();
  for (const TensorRow& r : rows)
    if (r.required) v.emplace_back(r.name, r.ne);
  return v;
}

TEST(TensorTable, CheckAcceptsAMatchingFile) {
  const auto rows = enumerate_tensors(llama(), tiny_llama()).value();
  auto tensors = required_tensors();
  tensors.emplace_back("output.weight", std::vector<int64_t>{64, 512});  // an optional one, right shape
  MemGguf g = make_gguf(tensors);
  ASSERT_TRUE(g.file);
  Status s = check_tensors(rows, *g.file, "llama");
  EXPECT_TRUE(s.is_ok()) << s.message();
}

TEST(TensorTable, MissingWrongShapeAndUnexpectedTensorsAreNamed) {
  const auto rows = enumerate_tensors(llama(), tiny_llama()).value();
  {
    auto tensors = required_tensors();
    std::erase_if(tensors, [](const auto& t) { return t.first == "blk.1.ffn_up.weight"; });
    MemGguf g = make_gguf(tensors);
    Status s = check_tensors(rows, *g.file, "llama");
    EXPECT_EQ(s.code(), StatusCode::kNotFound);
    EXPECT_NE(s.message().find("missing tensor 'blk.1.ffn_up.weight'"), std::string::npos) << s.message();
  }
  {
    auto tensors = required_tensors();
    for (auto& t : tensors)
      if (t.first == "blk.0.attn_v.weight") t.second = {32, 64};
    MemGguf g = make_gguf(tensors);
    Status s = check_tensors(rows, *g.file, "llama");
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("blk.0.attn_v.weight"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("expected [64, 32]"), std::string::npos) << s.message();
  }
  {
    auto tensors = required_tensors();
    tensors.emplace_back("rope_freqs.weight", std::vector<int64_t>{16});  // optional, wrong shape
    MemGguf g = make_gguf(tensors);
    Status s = check_tensors(rows, *g.file, "llama");
    EXPECT_NE(s.message().find("rope_freqs.weight"), std::string::npos) << s.message();
  }
  for (const char* extra : {"blk.2.attn_q.weight", "blk.0.attn_qkv.weight", "output.bias"}) {
    auto tensors = required_tensors();
    tensors.emplace_back(extra, std::vector<int64_t>{64});
    MemGguf g = make_gguf(tensors);
    Status s = check_tensors(rows, *g.file, "llama");
    EXPECT_FALSE(s.is_ok()) << extra;
    EXPECT_NE(s.message().find(std::string("unexpected tensor '") + extra + "'"), std::string::npos) << s.message();
  }
}

TEST(TensorTable, RolesByPattern) {
  EXPECT_EQ(tensor_role(llama(), "blk.12.attn_v.weight"), TensorRole::kAttnV);
  EXPECT_EQ(tensor_role(llama(), "blk.0.ffn_down.weight"), TensorRole::kFfnDown);
  EXPECT_EQ(tensor_role(llama(), "output.weight"), TensorRole::kOutput);
  EXPECT_EQ(tensor_role(llama(), "token_embd.weight"), TensorRole::kTokenEmbd);
  EXPECT_EQ(tensor_role(llama(), "blk.3.attn_norm.weight"), TensorRole::kNorm);
  EXPECT_EQ(tensor_role(llama(), "blk.x.attn_v.weight"), TensorRole::kUnknown);
  EXPECT_EQ(tensor_role(llama(), "blk..attn_v.weight"), TensorRole::kUnknown);
  EXPECT_EQ(tensor_role(llama(), "blk.1.attn_v.weightx"), TensorRole::kUnknown);
  EXPECT_EQ(find_tensor_table("warpdrive"), nullptr);
}

TEST(TensorTable, BinderRefusesWhatTheTableDoesNotDeclare) {
  auto tensors = required_tensors();
  tensors.emplace_back("blk.0.attn_q.bias", std::vector<int64_t>{64});
  MemGguf g = make_gguf(tensors);
  auto declared = declare_tensors("llama", tiny_llama(), *g.file);
  ASSERT_TRUE(declared.is_ok()) << declared.status().message();
  layers::WeightBinder b(*g.file, nullptr, &*declared);
  // Declared: shapes come from the table.
  auto v = b.vector("blk.1.ffn_norm.weight");
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  EXPECT_EQ(v->data.size(), 64u);
  auto m = b.matrix("blk.0.attn_k.weight");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->rows, 32);
  EXPECT_TRUE(b.optional_vector("blk.0.attn_q.bias").is_ok());
  EXPECT_FALSE(b.optional_vector("blk.0.attn_k.bias")->present());  // declared, absent
  // Explicit shapes equal to the table's bind as before.
  EXPECT_TRUE(b.matrix("blk.0.attn_q.weight", 64, 64).is_ok());
  EXPECT_TRUE(b.table("token_embd.weight", 64, 512).is_ok());
  // An undeclared name is an internal error naming it.
  auto undeclared = b.vector("blk.0.attn_sub_norm.weight");
  ASSERT_FALSE(undeclared.is_ok());
  EXPECT_EQ(undeclared.status().code(), StatusCode::kInternal);
  EXPECT_NE(undeclared.status().message().find("blk.0.attn_sub_norm.weight"), std::string::npos);
}

TEST(TensorTable, BinderRefusesAShapeTheTableDoesNotDeclare) {
  // A file and table that disagree with what a (buggy) binder asks for.
  const TensorTable t = {{{"w.weight", {"a", "b"}, TensorRole::kAttnQ}}};
  TableParams p;
  p.set("a", 4), p.set("b", 8);
  const auto rows = enumerate_tensors(t, p).value();
  layers::DeclaredShapes declared;
  for (const TensorRow& r : rows) declared.emplace(r.name, r.ne);
  declared["w.weight"] = {8, 4};  // the binder's view differs from the file's [4, 8]
  MemGguf g = make_gguf({{"w.weight", {4, 8}}});
  layers::WeightBinder b(*g.file, nullptr, &declared);
  auto m = b.matrix("w.weight", 4, 8);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInternal);
  EXPECT_NE(m.status().message().find("w.weight"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("[8, 4]"), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace chimera::models
