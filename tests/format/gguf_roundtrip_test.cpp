// Writer -> reader round trips: every metadata value type (including arrays of
// arrays and empty arrays), GGUF v2 and v3, custom alignments, tensor layout and
// bytes, typed accessors, and writer -> reader -> writer byte identity. Also
// writes the fuzzer's seed corpus ($CHIMERA_FUZZ_CORPUS or <build>/fuzz-corpus).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "format/gguf/gguf.h"
#include "format/gguf_test_files.h"
#include "test_util.h"

namespace chimera::format {
namespace {

using test::all_type_metadata;
using test::pattern_bytes;

std::unique_ptr<GgufFile> parse_ok(const std::vector<uint8_t>& bytes) {
  auto r = GgufFile::parse(MappedFile::from_bytes(bytes.data(), bytes.size()));
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (!r.is_ok()) return nullptr;
  return std::move(r).value();
}

// Re-emits a parsed file with the writer (same metadata order, same tensors).
std::vector<uint8_t> rewrite(const GgufFile& f) {
  GgufWriter w(f.version());
  for (const auto& [k, v] : f.metadata()) w.set(k, v);
  // Replaces the general.alignment entry in place, so the metadata order is kept.
  if (f.alignment() != 32) w.set_alignment((uint32_t)f.alignment());
  for (const auto& t : f.tensors()) EXPECT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
  return w.to_bytes();
}

class GgufRoundTrip : public ::testing::TestWithParam<std::pair<uint32_t, uint32_t>> {};

TEST_P(GgufRoundTrip, EveryValueTypeAndTensor) {
  const auto [version, alignment] = GetParam();
  const auto bytes = test::small_model_gguf(version, alignment);
  auto f = parse_ok(bytes);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), version);
  EXPECT_EQ(f->alignment(), alignment);
  EXPECT_EQ(f->data_offset() % alignment, 0u);
  EXPECT_EQ(f->file_size(), bytes.size());

  // Metadata: same keys, same order, same values.
  auto expected = all_type_metadata();
  size_t extra = alignment != 32 ? 1 : 0;  // general.alignment comes first
  ASSERT_EQ(f->metadata().size(), expected.size() + extra);
  if (extra) {
    EXPECT_EQ(f->metadata()[0].first, "general.alignment");
    EXPECT_EQ(f->metadata()[0].second.type, GgufType::UINT32);
  }
  for (size_t k = 0; k < expected.size(); ++k) {
    const auto& [key, value] = f->metadata()[k + extra];
    EXPECT_EQ(key, expected[k].first);
    EXPECT_TRUE(value == expected[k].second) << key << ": " << value.to_display() << " vs "
                                             << expected[k].second.to_display();
    EXPECT_EQ(f->find(key), &value);
  }

  // Tensors: order, shapes, types, sizes, alignment and bytes.
  const auto& ts = f->tensors();
  ASSERT_EQ(ts.size(), 5u);
  const char* names[] = {"token_embd.weight", "blk.0.attn_norm.weight", "blk.0.ffn_up.weight",
                         "blk.0.attn_q.weight", "output.weight"};
  const GgmlType types[] = {GgmlType::F32, GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_K};
  const uint64_t sizes[] = {128, 32, 96, 68, 144};
  const uint64_t elements[] = {32, 8, 48, 64, 256};
  for (size_t k = 0; k < ts.size(); ++k) {
    EXPECT_EQ(ts[k].name, names[k]);
    EXPECT_EQ(ts[k].type, types[k]);
    EXPECT_EQ(ts[k].n_bytes, sizes[k]);
    EXPECT_EQ(ts[k].n_elements, elements[k]);
    EXPECT_EQ(ts[k].offset % alignment, 0u);
    const size_t file_pos = f->data_offset() + ts[k].offset;
    EXPECT_EQ(file_pos % alignment, 0u);
    EXPECT_EQ(std::memcmp(ts[k].data, pattern_bytes(sizes[k], (uint8_t)(k + 1)).data(), sizes[k]), 0) << names[k];
    EXPECT_EQ(std::memcmp(ts[k].data, bytes.data() + file_pos, sizes[k]), 0);
    EXPECT_EQ(f->find_tensor(names[k]), &ts[k]);
  }
  EXPECT_EQ(ts[2].shape_string(), "[8, 3, 1, 2]");
  EXPECT_EQ(ts[2].dim(3), 2);
  EXPECT_EQ(ts[2].dim(7), 1);
  EXPECT_EQ(f->tensor_bytes(), 128u + 32 + 96 + 68 + 144);
  EXPECT_EQ(f->find_tensor("missing"), nullptr);

  // Writer -> reader -> writer is byte-identical.
  EXPECT_EQ(rewrite(*f), bytes);
}

INSTANTIATE_TEST_SUITE_P(VersionsAndAlignments, GgufRoundTrip,
                         ::testing::Values(std::make_pair(3u, 32u), std::make_pair(2u, 32u),
                                           std::make_pair(3u, 1u), std::make_pair(3u, 8u),
                                           std::make_pair(2u, 64u), std::make_pair(3u, 4096u)),
                         [](const auto& info) {
                           return "v" + std::to_string(info.param.first) + "_align" +
                                  std::to_string(info.param.second);
                         });

TEST(GgufRoundTripTest, TypedAccessors) {
  auto f = parse_ok(test::small_model_gguf());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->architecture(), "llama");
  EXPECT_EQ(f->get_string("general.name"), "tiny test model");
  EXPECT_EQ(f->get_int("t.u8"), 250);
  EXPECT_EQ(f->get_int("t.i8"), -100);
  EXPECT_EQ(f->get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(f->get_int("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(f->get_int("t.u64"), std::nullopt);  // does not fit int64
  EXPECT_EQ(f->find("t.u64")->u, 18000000000000000000ull);
  EXPECT_DOUBLE_EQ(*f->get_float("t.f64"), 3.141592653589793);
  EXPECT_FLOAT_EQ((float)*f->get_float("t.f32"), -1.5e-3f);
  EXPECT_DOUBLE_EQ(*f->get_float("t.u16"), 65000.0);
  EXPECT_EQ(f->get_bool("t.bool_true"), true);
  EXPECT_EQ(f->get_bool("t.bool_false"), false);
  EXPECT_EQ(f->get_string("t.str"), "hello\nworld \"quoted\"");
  EXPECT_EQ(f->get_string("t.str_empty"), "");
  EXPECT_EQ(f->get_string("t.u8"), std::nullopt);
  EXPECT_EQ(f->get_int("t.str"), std::nullopt);
  EXPECT_EQ(f->get_int("absent"), std::nullopt);
  EXPECT_EQ(f->get_array("t.str"), nullptr);
  const GgufValue* a = f->get_array("t.arr_of_arr");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->elem_type, GgufType::ARRAY);
  ASSERT_EQ(a->arr.size(), 3u);
  EXPECT_EQ(a->arr[0].arr.size(), 2u);
  EXPECT_TRUE(a->arr[1].arr.empty());
  EXPECT_EQ(a->arr[2].elem_type, GgufType::STRING);
  EXPECT_EQ(a->to_display(), "[arr x 3] {[i32 x 2] {1, 2}, [i32 x 0], [str x 1] {\"x\"}}");
  const GgufValue* e = f->get_array("t.arr_empty_str");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->elem_type, GgufType::STRING);
  EXPECT_TRUE(e->arr.empty());

  auto kv = f->get_per_layer_int("llama.attention.head_count_kv", 2, std::nullopt);
  ASSERT_TRUE(kv.is_ok());
  EXPECT_EQ(kv.value(), (std::vector<int64_t>{2, 1}));
  auto h = f->get_per_layer_int("llama.attention.head_count", 3, std::nullopt);
  ASSERT_TRUE(h.is_ok());
  EXPECT_EQ(h.value(), (std::vector<int64_t>{4, 4, 4}));
  EXPECT_FALSE(f->get_per_layer_int("llama.attention.head_count_kv", 3, std::nullopt).is_ok());
  EXPECT_FALSE(f->get_per_layer_int("t.arr_str", 3, std::nullopt).is_ok());
  EXPECT_FALSE(f->get_per_layer_int("absent", 2, std::nullopt).is_ok());
  // A hostile block_count must not turn into a huge allocation.
  EXPECT_FALSE(f->get_per_layer_int("llama.attention.head_count", size_t{1} << 40, std::nullopt).is_ok());
  auto fb = f->get_per_layer_int("absent", 2, 7);
  ASSERT_TRUE(fb.is_ok());
  EXPECT_EQ(fb.value(), (std::vector<int64_t>{7, 7}));
}

TEST(GgufRoundTripTest, EmptyFileAndMetadataOnly) {
  auto f = parse_ok(GgufWriter(3).to_bytes());
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->metadata().empty());
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->architecture(), "");
  EXPECT_EQ(f->tensor_bytes(), 0u);
  auto m = parse_ok(test::small_model_writer(2, 32, true, false).to_bytes());
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->tensors().empty());
}

TEST(GgufRoundTripTest, WriteToDiskAndOpen) {
  const std::string path = test::temp_path("roundtrip.gguf");
  auto w = test::small_model_writer(3, 64);
  ASSERT_TRUE(w.write(path).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f.value()->path(), path);
  EXPECT_EQ(f.value()->alignment(), 64u);
  EXPECT_EQ(test::read_file_bytes(path), w.to_bytes());
  std::filesystem::remove(path);
}

TEST(GgufWriterTest, RejectsBadTensorsAndAlignment) {
  GgufWriter w;
  auto data = pattern_bytes(64, 0);
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {}, data.data(), 0).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {1, 1, 1, 1, 1}, data.data(), 4).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {-4}, data.data(), 16).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {0}, data.data(), 0).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {4}, data.data(), 15).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::Q8_0, {16}, data.data(), 17).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {1 << 30, 1 << 30, 1 << 30, 1 << 30}, data.data(), 0).is_ok());
  EXPECT_TRUE(w.add_tensor("x", GgmlType::F32, {4}, data.data(), 16).is_ok());
  EXPECT_FALSE(w.add_tensor("x", GgmlType::F32, {4}, data.data(), 16).is_ok());  // duplicate
  w.set_alignment(3);
  EXPECT_FALSE(w.write(test::temp_path("bad-align.gguf")).is_ok());
  // to_bytes falls back to 32-byte padding, but the metadata says 3: the reader refuses it.
  auto bytes = w.to_bytes();
  EXPECT_FALSE(GgufFile::parse(MappedFile::from_bytes(bytes.data(), bytes.size())).is_ok());
}

TEST(GgufValueTest, DisplayAndEquality) {
  EXPECT_EQ(GgufValue::from_string(std::string(200, 'a')).to_display().size(), 82u);  // quotes + 77 + "..."
  EXPECT_EQ(GgufValue::from_bool(true).to_display(), "true");
  EXPECT_EQ(GgufValue::from_i8(-3).to_display(), "-3");
  EXPECT_EQ(GgufValue::from_u64(~0ull).to_display(), "18446744073709551615");
  std::vector<int32_t> many(100, 5);
  EXPECT_EQ(GgufValue::from_i32s(many).to_display(2), "[i32 x 100] {5, 5, ...}");
  EXPECT_TRUE(GgufValue::from_u8(3) == GgufValue::from_u8(3));
  EXPECT_FALSE(GgufValue::from_u8(3) == GgufValue::from_u16(3));
  EXPECT_FALSE(GgufValue::from_f32s({1.f}) == GgufValue::from_f32s({1.f, 2.f}));
  EXPECT_FALSE(GgufValue::from_array(GgufType::INT32, {}) == GgufValue::from_array(GgufType::UINT32, {}));
  EXPECT_TRUE(GgufValue::from_f32(std::nanf("")) == GgufValue::from_f32(std::nanf("")));
}

// Not a check: leaves valid seed files for the libFuzzer target (scripts/fuzz.sh).
TEST(GgufRoundTripTest, WritesFuzzSeedCorpus) {
  std::string dir = std::string(CHIMERA_BINARY_DIR) + "/fuzz-corpus";
  if (const char* e = std::getenv("CHIMERA_FUZZ_CORPUS"); e && *e) dir = e;
  ASSERT_TRUE(test::write_seed_corpus(dir)) << dir;
  for (const auto& [name, bytes] : test::seed_files()) {
    auto r = GgufFile::open(dir + "/" + name);
    EXPECT_TRUE(r.is_ok()) << name << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace chimera::format
