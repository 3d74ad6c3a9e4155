// safetensors reader tests: small files built in the test (single file and a
// sharded folder with an index), dtype widening, and hostile inputs — truncated
// files, oversized / non-JSON headers, bad dtypes and shapes, offsets past the
// data, spans that disagree with the shape, overlaps, unsafe shard names. Every
// bad input must give a Status, never a crash.
#include "format/safetensors/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/fp16.h"
#include "test_util.h"

namespace chimera::format::safetensors {
namespace {

std::vector<uint8_t> make_file(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b(8);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) b[i] = (uint8_t)(n >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

Result<std::unique_ptr<File>> parse_bytes(const std::vector<uint8_t>& b) {
  return File::parse(MappedFile::from_bytes(b.data(), b.size()));
}

std::vector<uint8_t> floats(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

void write_file(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write((const char*)b.data(), (std::streamsize)b.size());
}

TEST(Safetensors, ParsesTensorsAndMetadata) {
  std::vector<uint8_t> data = floats({1, 2, 3, 4, 5, 6});
  uint16_t bf[2] = {f32_to_bf16(1.5f), f32_to_bf16(-2.0f)};
  data.insert(data.end(), (uint8_t*)bf, (uint8_t*)bf + 4);
  const std::string h =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2],"data_offsets":[24,28]},)"
      R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  auto f = parse_bytes(make_file(h, data));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ASSERT_EQ((*f)->tensors().size(), 2u);
  EXPECT_EQ((*f)->tensors()[0].name, "a");  // file order
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  const TensorInfo* a = (*f)->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  auto av = to_f32(*a);
  ASSERT_TRUE(av.is_ok());
  EXPECT_EQ((*av)[5], 6.0f);
  auto bv = to_f32(*(*f)->find("b"));
  ASSERT_TRUE(bv.is_ok());
  EXPECT_EQ((*bv)[0], 1.5f);
  EXPECT_EQ((*bv)[1], -2.0f);
  EXPECT_EQ((*f)->find("c"), nullptr);
}

TEST(Safetensors, EmptyTensorAndEmptyHeaderObject) {
  auto f = parse_bytes(make_file(R"({"e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})", {}));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ((*f)->find("e")->n_elements(), 0u);
  auto g = parse_bytes(make_file("{}", {}));
  ASSERT_TRUE(g.is_ok());
  EXPECT_TRUE((*g)->tensors().empty());
}

TEST(Safetensors, HostileInputsGiveErrors) {
  const std::vector<uint8_t> d16 = floats({1, 2, 3, 4});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "{"},
      {"not object", "[1,2]"},
      {"bad dtype", R"({"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,16]}})"},
      {"missing dtype", R"({"a":{"shape":[4],"data_offsets":[0,16]}})"},
      {"negative dim", R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})"},
      {"float dim", R"({"a":{"dtype":"F32","shape":[4.5],"data_offsets":[0,16]}})"},
      {"overflow", R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})"},
      {"past end", R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[0,20]}})"},
      {"span mismatch", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})"},
      {"begin after end", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[16,0]}})"},
      {"one offset", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0]}})"},
      {"overlap", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})"},
      {"bad metadata", R"({"__metadata__":{"x":1}})"},
      {"entry not object", R"({"a":3})"},
      {"huge offset", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[18446744073709551600,18446744073709551616]}})"},
  };
  for (const auto& [what, h] : cases) {
    auto f = parse_bytes(make_file(h, d16));
    EXPECT_FALSE(f.is_ok()) << what;
  }
}

TEST(Safetensors, TruncatedFilesGiveErrors) {
  const std::vector<uint8_t> good =
      make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", floats({1, 2, 3, 4}));
  ASSERT_TRUE(parse_bytes(good).is_ok());
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> t(good.begin(), good.begin() + (ptrdiff_t)n);
    EXPECT_FALSE(parse_bytes(t).is_ok()) << "truncated to " << n;
  }
  std::vector<uint8_t> huge = good;
  huge[7] = 0x7f;  // header length far beyond the file and the cap
  EXPECT_FALSE(parse_bytes(huge).is_ok());
}

TEST(Safetensors, ShardedCheckpoint) {
  namespace fs = std::filesystem;
  const fs::path dir = test::temp_path("st-sharded");
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file((dir / "model-00001-of-00002.safetensors").string(),
             make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", floats({1, 2})));
  write_file((dir / "model-00002-of-00002.safetensors").string(),
             make_file(R"({"y":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", floats({3})));
  {
    std::ofstream idx(dir / "model.safetensors.index.json");
    idx << R"({"metadata":{},"weight_map":{"x":"model-00001-of-00002.safetensors","y":"model-00002-of-00002.safetensors"}})";
  }
  auto c = Checkpoint::open(dir.string());
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ((*c)->n_files(), 2u);
  ASSERT_NE((*c)->find("y"), nullptr);
  EXPECT_EQ(to_f32(*(*c)->find("y")).value()[0], 3.0f);
  EXPECT_EQ((*c)->tensors().size(), 2u);

  // A listed tensor that no shard holds, and a path-escaping shard name.
  {
    std::ofstream idx(dir / "model.safetensors.index.json");
    idx << R"({"weight_map":{"x":"model-00001-of-00002.safetensors","z":"model-00002-of-00002.safetensors"}})";
  }
  EXPECT_FALSE(Checkpoint::open(dir.string()).is_ok());
  {
    std::ofstream idx(dir / "model.safetensors.index.json");
    idx << R"({"weight_map":{"x":"../etc/passwd"}})";
  }
  EXPECT_FALSE(Checkpoint::open(dir.string()).is_ok());
  // Same tensor in two shards.
  write_file((dir / "model-00002-of-00002.safetensors").string(),
             make_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", floats({3})));
  {
    std::ofstream idx(dir / "model.safetensors.index.json");
    idx << R"({"weight_map":{"x":"model-00001-of-00002.safetensors","y":"model-00002-of-00002.safetensors"}})";
  }
  EXPECT_FALSE(Checkpoint::open(dir.string()).is_ok());
  fs::remove_all(dir);
  EXPECT_FALSE(Checkpoint::open(dir.string()).is_ok());
}

TEST(Safetensors, SharedPhi4FlashCheckpointOpens) {
  CHIMERA_REQUIRE_SHARED(shared);
  auto c = Checkpoint::open(shared + "/golden/hf/phi4flash-tiny-a");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const TensorInfo* e = (*c)->find("model.embed_tokens.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, Dtype::BF16);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{200064, 64}));
}

}  // namespace
}  // namespace chimera::format::safetensors
