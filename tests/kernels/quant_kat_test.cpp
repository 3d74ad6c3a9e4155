// Quantizer known-answer vectors: chimera's weight quantizers must write the
// very bytes llama-quantize writes (no imatrix), and chimera's decoders must
// read llama.cpp's bytes to the very floats ggml's do. The vectors in
// tests/data/quant_kat.txt were produced by llama.cpp itself
// (scripts/llamacpp_refs/quant_kat.cpp) from the rows of quant_kat_input.h:
// per type, the quantized bytes and an FNV-1a digest of ggml's dequantization.
// The file lists every type `chimera quantize` can write plus the Q8_K
// activation quantizer; a missing type is a failure.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "format/gguf/ggml_types.h"
#include "quant/kquant_blocks.h"
#include "quant/quantize_model.h"
#include "quant_kat_input.h"

namespace chimera::test {
namespace {

struct Vector {
  size_t n_bytes = 0;
  uint64_t digest = 0;
  std::vector<uint8_t> bytes;
};

// Name -> vector; the INPUT line's digest is stored under "INPUT".
std::map<std::string, Vector> read_vectors() {
  std::map<std::string, Vector> out;
  std::ifstream f(std::string(CHIMERA_SOURCE_DIR) + "/tests/data/quant_kat.txt");
  EXPECT_TRUE(f.good()) << "tests/data/quant_kat.txt missing";
  std::string line, name;
  Vector cur;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("INPUT ", 0) == 0) {
      std::istringstream ss(line.substr(6));
      std::string k1, k2, k3, hex;
      int64_t rows = 0, per_row = 0;
      ss >> k1 >> rows >> k2 >> per_row >> k3 >> hex;
      EXPECT_EQ(rows, kat::kRows);
      EXPECT_EQ(per_row, kat::kPerRow);
      out["INPUT"].digest = std::stoull(hex, nullptr, 16);
    } else if (line.rfind("TYPE ", 0) == 0) {
      std::istringstream ss(line.substr(5));
      std::string k1, k2, hex;
      ss >> name >> k1 >> cur.n_bytes >> k2 >> hex;
      cur.digest = std::stoull(hex, nullptr, 16);
      cur.bytes.clear();
    } else if (line == "END") {
      out[name] = cur;
    } else {
      for (size_t i = 0; i + 1 < line.size(); i += 2)
        cur.bytes.push_back((uint8_t)std::stoul(line.substr(i, 2), nullptr, 16));
    }
  }
  return out;
}

const std::map<std::string, Vector>& vectors() {
  static const auto v = read_vectors();
  return v;
}

// "first difference at byte B (block K of row R); N bytes differ".
std::string describe_mismatch(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, size_t row_bytes,
                              size_t block_bytes) {
  size_t first = SIZE_MAX, n = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i]) {
      if (first == SIZE_MAX) first = i;
      ++n;
    }
  if (n == 0) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf, "first difference at byte %zu (row %zu, block %zu): 0x%02x, llama.cpp 0x%02x; %zu of %zu bytes differ",
                first, first / row_bytes, (first % row_bytes) / block_bytes, got[first], want[first], n, want.size());
  return buf;
}

class QuantKat : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantKat, BytesAndDecodingEqualLlamaCpp) {
  const std::string name = GetParam();
  auto it = vectors().find(name);
  ASSERT_NE(it, vectors().end()) << name << " has no known-answer vector";
  const Vector& v = it->second;
  ASSERT_EQ(v.bytes.size(), v.n_bytes) << name << ": truncated vector";
  const auto x = kat::kat_input();
  const int64_t rows = kat::kRows, per_row = kat::kPerRow;

  std::vector<uint8_t> got(v.n_bytes);
  std::vector<float> back((size_t)(rows * per_row));
  format::GgmlType type;
  if (name == "Q8_K") {
    type = format::GgmlType::Q8_K;
    ASSERT_EQ(v.n_bytes, (size_t)rows * (per_row / 256) * sizeof(quant::block_q8_K));
    quant::quantize_row_q8_K(x.data(), (quant::block_q8_K*)got.data(), rows * per_row);
  } else {
    auto t = format::ggml_type_from_name(name);
    ASSERT_TRUE(t.has_value()) << name;
    type = *t;
    ASSERT_EQ(v.n_bytes, format::ggml_row_size(type, per_row) * (size_t)rows) << name << ": row size";
    ASSERT_TRUE(quant::encode_rows(type, x.data(), rows, per_row, got.data()).is_ok());
  }
  const size_t row_bytes = v.n_bytes / (size_t)rows;
  const size_t block_bytes = format::ggml_type_info((uint32_t)type)->type_size;
  EXPECT_EQ(describe_mismatch(got, v.bytes, row_bytes, block_bytes), "") << name << " quantizer";

  // Decoding llama.cpp's bytes (not ours) gives ggml's floats, bit for bit.
  for (int64_t r = 0; r < rows; ++r)
    ASSERT_TRUE(quant::decode_row(type, v.bytes.data() + r * row_bytes, per_row, back.data() + r * per_row).is_ok());
  EXPECT_EQ(kat::fnv1a(back.data(), back.size() * sizeof(float)), v.digest) << name << " decoder";
}

INSTANTIATE_TEST_SUITE_P(Types, QuantKat,
                         ::testing::Values("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
                                           "Q6_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "Q8_K"),
                         [](const auto& info) { return std::string(info.param); });

// The input rows are what the vectors were made from (a changed generator
// would make every comparison above meaningless).
TEST(QuantKatInput, IsTheRecordedInput) {
  const auto x = kat::kat_input();
  auto it = vectors().find("INPUT");
  ASSERT_NE(it, vectors().end()) << "no INPUT line";
  EXPECT_EQ(kat::fnv1a(x.data(), x.size() * sizeof(float)), it->second.digest);
}

}  // namespace
}  // namespace chimera::test
