// Tensor element types as numbered by ggml/GGUF, with their block geometry.
// A "block" is the smallest unit a row is split into: block_size elements
// stored in type_size bytes. Row byte size = ne0 / block_size * type_size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace chimera::format {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35,
  I2_S = 36,  // microsoft/BitNet's llama.cpp fork (bitnet.cpp); quant/i2s.h
  MXFP4 = 39,
};

struct GgmlTypeInfo {
  const char* name;   // as llama.cpp spells it ("F16", "Q4_K", ...)
  int64_t block_size; // elements per block
  size_t type_size;   // bytes per block
};

// Geometry of a known type, or nullopt for an unknown/removed type id.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type);
std::string ggml_type_name(GgmlType t);
// Parses "f16", "Q8_0", ... (case-insensitive).
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// Bytes of a row of ne0 elements; 0 if ne0 is negative, not a multiple of the
// block size, or the size overflows size_t.
size_t ggml_row_size(GgmlType t, int64_t ne0);

// Bytes a type stores once per tensor after all its rows (I2_S: the f32
// tensor scale plus padding, 32 bytes, as bitnet.cpp's ggml_nbytes counts
// them); 0 for every ggml type.
size_t ggml_tensor_tail_bytes(GgmlType t);
// Bytes of a whole rows x ne0 tensor (rows * row size + tail); 0 if invalid.
size_t ggml_tensor_size(GgmlType t, int64_t ne0, int64_t rows);

}  // namespace chimera::format
