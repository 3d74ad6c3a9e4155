// The converters check their output against the family's tensor table before
// they write it (GgufWriter::write with models::check_model_header): every HF
// family's rules name tensors of its architecture's table, and a file with a
// missing required tensor, a tensor of the wrong shape or a tensor the table
// does not have is refused with an error naming the tensor, leaving no file
// (no output, no ".partial"). The HF end-to-end cases are in
// hf_llama_convert_test.cpp (wrong shape, unknown tensor) and
// hf_mamba_convert_test.cpp (a tensor the table requires but the rules allow
// to be absent).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "format/gguf/gguf.h"
#include "format/hf/hf_convert.h"
#include "models/model.h"
#include "models/tensor_table.h"
#include "test_util.h"

namespace chimera::format {
namespace {

namespace fs = std::filesystem;

bool has_entry(const models::TensorTable& t, std::string_view pattern) {
  for (const models::TensorEntry& e : t.entries)
    if (e.pattern == pattern) return true;
  return false;
}

// Each rule's GGUF name is an entry of the table of the family's arch, and
// a per-layer HF name maps to a per-layer GGUF name (and a global one to a
// global one).
TEST(ConvertTableCheck, EveryHfRuleNamesATensorOfItsArchsTable) {
  int rules = 0;
  for (const hf::FamilySpec& f : hf::families()) {
    const models::TensorTable* table = models::find_tensor_table(f.arch);
    ASSERT_NE(table, nullptr) << f.arch;
    for (const hf::TensorRule& r : f.rules) {
      if (!r.gguf) continue;  // claimed and dropped
      ++rules;
      EXPECT_TRUE(has_entry(*table, r.gguf)) << f.arch << ": rule " << r.hf << " -> " << r.gguf;
      const bool hf_layer = std::string_view(r.hf).find("{i}") != std::string_view::npos;
      const bool gguf_layer = std::string_view(r.gguf).find("{i}") != std::string_view::npos;
      EXPECT_EQ(hf_layer, gguf_layer) << f.arch << ": " << r.hf << " -> " << r.gguf;
    }
  }
  EXPECT_GT(rules, 100);
}

// The golden tiny-llama's keys and tensors in a writer; `edit` changes the
// tensor list (name, type, ne, bytes) before it is added.
struct Tensor {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
};

GgufWriter copy_of(const GgufFile& g, const std::function<void(std::vector<Tensor>&)>& edit) {
  GgufWriter w;
  for (const auto& [k, v] : g.metadata()) w.set(k, v);
  std::vector<Tensor> ts;
  for (const GgufTensorInfo& t : g.tensors())
    ts.push_back({t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.n_bytes)});
  if (edit) edit(ts);
  for (Tensor& t : ts) EXPECT_TRUE(w.add_tensor_copy(t.name, t.type, t.ne, std::move(t.bytes)).is_ok()) << t.name;
  return w;
}

// Writes `w` with the loader's checks; returns the error ("" when written).
std::string write_checked(const GgufWriter& w, const std::string& out) {
  fs::remove(out);
  Status s = w.write(out, &models::check_model_header);
  if (s) {
    EXPECT_TRUE(fs::exists(out));
    fs::remove(out);
    return "";
  }
  EXPECT_FALSE(fs::exists(out)) << s.message();
  EXPECT_FALSE(fs::exists(out + ".partial")) << s.message();
  EXPECT_NE(s.message().find("not written"), std::string::npos) << s.message();
  return s.message();
}

TEST(ConvertTableCheck, MissingWrongShapeAndUnknownTensorsAreRefusedByName) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto g = GgufFile::open(shared + "/golden/models/tiny-llama.gguf");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const std::string out = test::temp_path("table-check.gguf");
  // The unchanged file passes (the check is not refusing everything).
  EXPECT_EQ(write_checked(copy_of(**g, nullptr), out), "");

  std::string e = write_checked(copy_of(**g,
                                        [](std::vector<Tensor>& ts) {
                                          std::erase_if(ts, [](const Tensor& t) { return t.name == "blk.1.ffn_up.weight"; });
                                        }),
                                out);
  EXPECT_NE(e.find("missing tensor 'blk.1.ffn_up.weight'"), std::string::npos) << e;

  // Same bytes, another shape: ffn_down [n_ff, n_embd] = [128, 64] as [64, 128].
  e = write_checked(copy_of(**g,
                            [](std::vector<Tensor>& ts) {
                              for (Tensor& t : ts)
                                if (t.name == "blk.0.ffn_down.weight") {
                                  ASSERT_EQ(t.ne, (std::vector<int64_t>{128, 64}));
                                  t.ne = {64, 128};
                                }
                            }),
                    out);
  EXPECT_NE(e.find("tensor 'blk.0.ffn_down.weight' has shape [64, 128], expected [128, 64]"), std::string::npos)
      << e;

  e = write_checked(copy_of(**g,
                            [](std::vector<Tensor>& ts) {
                              ts.push_back({"blk.0.attn_q_norm.weight", GgmlType::F32, {64}, std::vector<uint8_t>(256)});
                            }),
                    out);
  EXPECT_NE(e.find("unexpected tensor 'blk.0.attn_q_norm.weight'"), std::string::npos) << e;

  // A hyper-parameter the loader refuses is refused before writing too.
  GgufWriter bad = copy_of(**g, nullptr);
  bad.set("llama.attention.head_count_kv", GgufValue::from_u32(3));  // 4 heads do not share 3 KV heads
  e = write_checked(bad, out);
  EXPECT_NE(e.find("head_count_kv"), std::string::npos) << e;
}

// No check given: nothing is written (a converter cannot skip the check).
TEST(ConvertTableCheck, WritingWithoutACheckIsRefused) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::from_string("llama"));
  const std::string out = test::temp_path("table-check-none.gguf");
  fs::remove(out);
  Status s = w.write(out, GgufCheck());
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("no output check"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(out));
}

// A header-only description holds the writer's keys, names, types and
// shapes, and no data.
TEST(ConvertTableCheck, DescribeHoldsKeysAndTensorShapesWithoutData) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::from_string("llama"));
  std::vector<uint8_t> bytes(2 * 3 * 4);
  ASSERT_TRUE(w.add_tensor("a", GgmlType::F32, {3, 2}, bytes.data(), bytes.size()).is_ok());
  std::unique_ptr<GgufFile> d = w.describe();
  EXPECT_TRUE(d->header_only());
  EXPECT_EQ(d->architecture(), "llama");
  const GgufTensorInfo* t = d->find_tensor("a");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->ne, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t->n_elements, 6u);
  EXPECT_EQ(t->n_bytes, 24u);
  EXPECT_EQ(t->data, nullptr);
}

}  // namespace
}  // namespace chimera::format
