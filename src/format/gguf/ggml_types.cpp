// ggml type table (ids and block sizes follow ggml.h; removed ids 4, 5, 31-33,
// 37-38 are unknown here). Id 36 is I2_S as microsoft/BitNet's llama.cpp fork
// numbers it (upstream ggml briefly used 36 for IQ4_NL_4_4, since removed):
// 2 bits per element in blocks of 128 (32 bytes; a row is ne0 / 4 bytes)
// plus a 32-byte per-tensor tail holding the f32 scale. Row sizes are
// overflow-checked (0 = invalid).
#include "format/gguf/ggml_types.h"

#include <cctype>
#include <cstdint>

namespace chimera::format {
namespace {
struct Entry {
  uint32_t id;
  GgmlTypeInfo info;
};
constexpr Entry kTypes[] = {
    {0, {"F32", 1, 4}},        {1, {"F16", 1, 2}},        {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},     {6, {"Q5_0", 32, 22}},     {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},     {9, {"Q8_1", 32, 36}},     {10, {"Q2_K", 256, 84}},
    {11, {"Q3_K", 256, 110}},  {12, {"Q4_K", 256, 144}},  {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},  {15, {"Q8_K", 256, 292}},  {16, {"IQ2_XXS", 256, 66}},
    {17, {"IQ2_XS", 256, 74}}, {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},
    {20, {"IQ4_NL", 32, 18}},  {21, {"IQ3_S", 256, 110}}, {22, {"IQ2_S", 256, 82}},
    {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},       {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},       {27, {"I64", 1, 8}},       {28, {"F64", 1, 8}},
    {29, {"IQ1_M", 256, 56}},  {30, {"BF16", 1, 2}},      {34, {"TQ1_0", 256, 54}},
    {35, {"TQ2_0", 256, 66}},  {36, {"I2_S", 128, 32}},   {39, {"MXFP4", 32, 17}},
};
}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type) {
  for (const auto& e : kTypes)
    if (e.id == type) return e.info;
  return std::nullopt;
}

std::string ggml_type_name(GgmlType t) {
  auto i = ggml_type_info((uint32_t)t);
  return i ? i->name : "type#" + std::to_string((uint32_t)t);
}

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (const auto& e : kTypes) {
    std::string_view n = e.info.name;
    if (n.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < n.size() && eq; ++i)
      eq = std::toupper((unsigned char)name[i]) == (unsigned char)n[i];
    if (eq) return (GgmlType)e.id;
  }
  return std::nullopt;
}

size_t ggml_row_size(GgmlType t, int64_t ne0) {
  auto i = ggml_type_info((uint32_t)t);
  if (!i || ne0 < 0 || ne0 % i->block_size != 0) return 0;
  const uint64_t blocks = (uint64_t)(ne0 / i->block_size);
  if (blocks > SIZE_MAX / i->type_size) return 0;  // overflow: treat as invalid
  return (size_t)blocks * i->type_size;
}

size_t ggml_tensor_tail_bytes(GgmlType t) { return t == GgmlType::I2_S ? 32 : 0; }

size_t ggml_tensor_size(GgmlType t, int64_t ne0, int64_t rows) {
  const size_t row = ggml_row_size(t, ne0);
  if (row == 0 || rows < 0 || (uint64_t)rows > (SIZE_MAX - ggml_tensor_tail_bytes(t)) / row) return 0;
  return row * (size_t)rows + ggml_tensor_tail_bytes(t);
}

}  // namespace chimera::format
