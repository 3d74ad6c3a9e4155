// Hostile GGUF files: each malformed header field gives an error Status whose
// message says what is wrong (never a crash, abort, hang or huge allocation).
// Files are built byte by byte with RawGguf (tests/format/gguf_test_files.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "format/gguf/gguf.h"
#include "format/gguf_test_files.h"
#include "test_util.h"

namespace chimera::format {
namespace {

using test::RawGguf;

Result<std::unique_ptr<GgufFile>> parse(const std::vector<uint8_t>& b) {
  return GgufFile::parse(MappedFile::from_bytes(b.data(), b.size()));
}

// Expects a parse error whose message contains `needle`.
void expect_error(const std::vector<uint8_t>& b, const std::string& needle) {
  auto r = parse(b);
  ASSERT_FALSE(r.is_ok()) << "expected an error containing '" << needle << "'";
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << "message '" << r.status().message() << "' lacks '" << needle << "'";
}

// A file with one tensor `t` of the given dims/type/offset and data padding.
std::vector<uint8_t> one_tensor(const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset,
                                size_t data_bytes = 64) {
  RawGguf g;
  g.header(3, 1, 0).tensor("t", ne, type, offset).pad(32).zeros(data_bytes);
  return g.b;
}

TEST(GgufHostileTest, MagicAndVersion) {
  expect_error({}, "too small");
  expect_error({'G', 'G', 'U'}, "too small");
  RawGguf bad;
  bad.b = {'G', 'G', 'U', 'X'};
  bad.u32(3).u64(0).u64(0);
  expect_error(bad.b, "bad magic");
  expect_error(RawGguf().header(1, 0, 0).b, "version 1 is not supported");
  expect_error(RawGguf().header(99, 0, 0).b, "unsupported GGUF version 99");
  expect_error(RawGguf().header(0x03000000u, 0, 0).b, "big-endian");
  EXPECT_TRUE(parse(RawGguf().header(2, 0, 0).b).is_ok());
  EXPECT_TRUE(parse(RawGguf().header(3, 0, 0).b).is_ok());
  expect_error({'G', 'G', 'U', 'F', 3, 0}, "unexpected end of file reading the version");
}

TEST(GgufHostileTest, AbsurdCounts) {
  expect_error(RawGguf().header(3, 0, 1ull << 63).b, "metadata count 9223372036854775808 is larger than the file");
  expect_error(RawGguf().header(3, ~0ull, 0).b, "tensor count");
  // Small counts that still exceed what the remaining bytes can encode.
  expect_error(RawGguf().header(3, 0, 2).kv_u32("a", 1).b, "metadata count 2");
  expect_error(RawGguf().header(3, kGgufMaxTensors + 1, 0).b, "tensor count");
}

TEST(GgufHostileTest, HugeStringLengths) {
  // Key length.
  expect_error(RawGguf().header(3, 0, 1).u64(1ull << 62).u32(4).u32(0).b, "metadata key at byte 24 claims");
  // String value length.
  expect_error(RawGguf().header(3, 0, 1).str("k").u32(8).u64(~0ull).zeros(8).b, "string value");
  // Tensor name length.
  expect_error(RawGguf().header(3, 1, 0).u64(1ull << 40).zeros(40).b, "tensor name");
}

TEST(GgufHostileTest, HugeArrayCounts) {
  // u8 array claiming 2^62 elements: refused before any allocation.
  expect_error(RawGguf().header(3, 0, 1).str("a").u32(9).u32(0).u64(1ull << 62).zeros(16).b, "array of");
  // Array of strings / arrays: the per-element minimum (8 / 12 bytes) is used.
  expect_error(RawGguf().header(3, 0, 1).str("a").u32(9).u32(8).u64(3).zeros(20).b, "array of 3 str elements");
  expect_error(RawGguf().header(3, 0, 1).str("a").u32(9).u32(9).u64(2).zeros(20).b, "array of 2 arr elements");
  // Nested array whose inner count is absurd.
  expect_error(RawGguf().header(3, 0, 1).str("a").u32(9).u32(9).u64(1).u32(6).u64(1ull << 60).zeros(8).b,
               "array of 1152921504606846976 f32 elements");
}

TEST(GgufHostileTest, MetadataValueBudget) {
  // Enough bytes for kGgufMaxValues + 1 u8 items: refused by the value budget,
  // which bounds memory (each value costs sizeof(GgufValue) bytes).
  const uint64_t n = kGgufMaxValues + 1;
  RawGguf g;
  g.header(3, 0, 1).str("big").u32(9).u32(0).u64(n).zeros(n);
  expect_error(g.b, "more than 8388608 metadata values");
  // (Not tested: that the budget is shared across arrays — that needs a
  // legitimately parsed array of millions of values, hundreds of MB in memory.)
}

TEST(GgufHostileTest, ValueTypes) {
  expect_error(RawGguf().header(3, 0, 1).str("k").u32(13).u32(0).b, "metadata 'k' has unknown value type 13");
  expect_error(RawGguf().header(3, 0, 1).str("k").u32(9).u32(99).u64(0).b, "unknown array element type 99");
  expect_error(RawGguf().header(3, 0, 1).str("k").u32(7).u8(2).b, "bool value 2 at byte");
  expect_error(RawGguf().header(3, 0, 1).str("k").u32(9).u32(7).u64(2).u8(1).u8(255).b, "bool value 255");
  expect_error(RawGguf().header(3, 0, 1).str("").u32(4).u32(0).b, "empty key");
  expect_error(RawGguf().header(3, 0, 2).kv_u32("dup", 1).kv_str("dup", "x").b, "duplicate metadata key 'dup'");
}

TEST(GgufHostileTest, NestedArrayDepth) {
  auto nested = [](int levels) {
    GgufValue v = GgufValue::from_i32s({1});
    for (int k = 1; k < levels; ++k) v = GgufValue::from_array(GgufType::ARRAY, {v});
    GgufWriter w;
    w.set("deep", v);
    return w.to_bytes();
  };
  auto ok = parse(nested(kGgufMaxArrayDepth));
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok.value()->find("deep")->to_display(), "[arr x 1] {[arr x 1] {[arr x 1] {[arr x 1] {[arr x 1] "
                                                    "{[arr x 1] {[arr x 1] {[i32 x 1] {1}}}}}}}}");
  expect_error(nested(kGgufMaxArrayDepth + 1), "arrays nested more than 8 levels deep");
  // 100k levels of array headers: refused at level 9, no deep recursion.
  RawGguf g;
  g.header(3, 0, 1).str("d").u32(9);
  for (int k = 0; k < 100000; ++k) g.u32(9).u64(1);
  expect_error(g.b, "nested more than 8 levels");
}

TEST(GgufHostileTest, Alignment) {
  auto with_alignment = [](GgufValue a) {
    auto w = test::small_model_writer();
    w.set("general.alignment", std::move(a));
    return w.to_bytes();
  };
  expect_error(with_alignment(GgufValue::from_u32(0)), "general.alignment must be a power of two");
  expect_error(with_alignment(GgufValue::from_u32(3)), "(got 3)");
  expect_error(with_alignment(GgufValue::from_i32(-32)), "(got -32)");
  expect_error(with_alignment(GgufValue::from_u32(1u << 21)), "power of two between 1 and 1048576");
  expect_error(with_alignment(GgufValue::from_string("32")), "general.alignment must be an integer (got str");
  expect_error(with_alignment(GgufValue::from_bool(true)), "must be an integer (got bool");
  expect_error(with_alignment(GgufValue::from_f32(32)), "must be an integer (got f32");
  // Any integer type with a valid value is accepted.
  auto r = parse(with_alignment(GgufValue::from_u64(32)));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value()->alignment(), 32u);
}

TEST(GgufHostileTest, TensorDims) {
  expect_error(one_tensor({1, 1, 1, 1, 1}, 0, 0), "tensor 't': 5 dimensions (1 to 4 allowed)");
  expect_error(one_tensor({}, 0, 0), "tensor 't': 0 dimensions");
  expect_error(one_tensor({4, 0}, 0, 0), "dimension 1 is 0");
  expect_error(one_tensor({1ull << 63}, 0, 0), "larger than INT64_MAX");
  expect_error(one_tensor({1ull << 32, 1ull << 32}, 0, 0), "element count overflows int64");
  expect_error(one_tensor({1ull << 62}, 28 /* F64 */, 0), "byte size overflows");
  expect_error(one_tensor({16}, 8 /* Q8_0 */, 0), "row length 16 is not a multiple of the Q8_0 block size 32");
  EXPECT_TRUE(parse(one_tensor({4, 2}, 0, 0)).is_ok());
}

TEST(GgufHostileTest, TensorTypes) {
  expect_error(one_tensor({32}, 4, 0), "unknown tensor type id 4 (Q4_2/Q4_3 were removed");
  expect_error(one_tensor({32}, 31, 0), "unknown tensor type id 31 (Q4_0_4_4");
  expect_error(one_tensor({32}, 37, 0), "unknown tensor type id 37 (IQ4_NL");
  expect_error(one_tensor({32}, 100, 0), "unknown tensor type id 100");
  expect_error(one_tensor({32}, 40, 0), "unknown tensor type id 40");
  EXPECT_TRUE(parse(one_tensor({32}, 39 /* MXFP4 */, 0)).is_ok());
}

TEST(GgufHostileTest, TensorOffsets) {
  expect_error(one_tensor({4}, 0, 16), "data offset 16 is not a multiple of the alignment 32");
  expect_error(one_tensor({4}, 0, 1ull << 40), "extends past the end of the file");
  expect_error(one_tensor({4}, 0, ~0ull - 31), "extends past the end of the file");
  expect_error(one_tensor({16}, 0, 32, 64), "tensor 't' (64 bytes at data offset 32) extends past the end");
  EXPECT_TRUE(parse(one_tensor({8}, 0, 32, 64)).is_ok());
  // Header ends exactly at EOF: no room for the data section.
  expect_error(RawGguf().header(3, 1, 0).tensor("t", {4}, 0, 0).b, "before the tensor data section");
}

TEST(GgufHostileTest, TensorNamesAndOverlap) {
  RawGguf dup;
  dup.header(3, 2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad(32).zeros(64);
  expect_error(dup.b, "duplicate tensor name 'w'");
  RawGguf empty;
  empty.header(3, 1, 0).tensor("", {8}, 0, 0).pad(32).zeros(32);
  expect_error(empty.b, "tensor 0 has an empty name");
  RawGguf same;
  same.header(3, 2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 0).pad(32).zeros(64);
  expect_error(same.b, "overlaps tensor");
  RawGguf partial;  // a: 64 bytes at 0; b at 32 overlaps its tail
  partial.header(3, 2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad(32).zeros(96);
  expect_error(partial.b, "tensor 'b' (data offset 32) overlaps tensor 'a' (data offset 0, 64 bytes)");
  // Out of order and with gaps is fine.
  RawGguf gaps;
  gaps.header(3, 2, 0).tensor("a", {8}, 0, 64).tensor("b", {8}, 0, 0).pad(32).zeros(128);
  auto r = parse(gaps.b);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value()->find_tensor("a")->offset, 64u);
}

TEST(GgufHostileTest, OpenErrors) {
  auto missing = GgufFile::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos);
  auto dir = GgufFile::open(std::filesystem::temp_directory_path().string());
  EXPECT_FALSE(dir.is_ok());
  const std::string path = test::temp_path("hostile.gguf");
  {
    auto b = one_tensor({4}, 4, 0);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), (std::streamsize)b.size());
  }
  auto bad = GgufFile::open(path);
  ASSERT_FALSE(bad.is_ok());
  // open() names the file.
  EXPECT_NE(bad.status().message().find(path), std::string::npos) << bad.status().message();
  EXPECT_EQ(bad.status().code(), StatusCode::kUnsupported);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace chimera::format
