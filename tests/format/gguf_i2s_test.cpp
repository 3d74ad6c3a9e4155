// GGUF type 36 (I2_S, bitnet.cpp): the reader sizes the tensor as bitnet.cpp's
// ggml_nbytes does (elements / 4 + 32: codes plus the f32 scale tail), the
// writer round-trips such a tensor, and a file cut inside the tail is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "format/gguf/gguf.h"
#include "format/gguf_test_files.h"

namespace chimera::format {
namespace {

using test::RawGguf;

TEST(GgufI2s, ReaderSizesTensorWithScaleTail) {
  // 256 x 2 elements: 128 code bytes + 32 tail bytes.
  RawGguf ok;
  ok.header(3, 1, 0).tensor("w", {256, 2}, 36, 0).pad(32).zeros(160);
  auto f = GgufFile::parse(MappedFile::from_bytes(ok.b.data(), ok.b.size()));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  const GgufTensorInfo* t = (*f)->find_tensor("w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, GgmlType::I2_S);
  EXPECT_EQ(t->n_bytes, 160u);
  RawGguf cut;
  cut.header(3, 1, 0).tensor("w", {256, 2}, 36, 0).pad(32).zeros(140);
  EXPECT_FALSE(GgufFile::parse(MappedFile::from_bytes(cut.b.data(), cut.b.size())).is_ok());
  RawGguf odd;  // rows must be whole 128-element blocks
  odd.header(3, 1, 0).tensor("w", {64, 2}, 36, 0).pad(32).zeros(160);
  EXPECT_FALSE(GgufFile::parse(MappedFile::from_bytes(odd.b.data(), odd.b.size())).is_ok());
}

}  // namespace
}  // namespace chimera::format
