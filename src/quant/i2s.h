// I2_S: the 2-bit ternary tensor type of microsoft/BitNet (bitnet.cpp's
// llama.cpp fork, ggml type id 36), used by microsoft/bitnet-b1.58-2B-4T-gguf.
// Byte-exact with the x86 layout its quantize_i2_s writes (the published
// files' layout):
//   - the tensor's rows x k codes are cut, in row-major order, into blocks of
//     128 (k must be a multiple of 128, so blocks never straddle rows); block
//     i takes 32 bytes at 32*i, element j of the block (j = 32*g + m, g in
//     0..3, m in 0..31) sits in byte 32*i + m at bits 6-2g..7-2g — group 0 in
//     the top two bits;
//   - code c in {0, 1, 2} means the value (c - 1) * scale (bitnet.cpp writes
//     1 for |w| < 1e-6, 2 for positive, 0 for negative; it never writes 3,
//     which this reference reads as +2 * scale, like the kernels);
//   - after the rows * k / 4 code bytes, one f32 `scale` (the tensor's
//     max |w|) and 28 bytes of padding: the tensor takes rows * k / 4 + 32
//     bytes (bitnet.cpp's ggml_nbytes).
// So a row is k / 4 bytes and every 256 elements (two blocks, 64 bytes) have
// TQ2_0's arrangement of qs (byte 32h + m holds elements 128h + 32g + m) with
// the 2-bit fields in the opposite order. Precision: dequantization
// (c - 1) * scale is exact in f32.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chimera::quant {

constexpr int64_t kQK_I2S = 128;
constexpr size_t kI2sTailBytes = 32;

// Code of element j (0 <= j < k) of a row starting at `row`.
inline int i2s_code(const uint8_t* row, int64_t j) {
  const int64_t blk = j / kQK_I2S, e = j % kQK_I2S;
  return (row[blk * 32 + e % 32] >> (6 - 2 * (e / 32))) & 3;
}
// Sets the code of element j (the byte's other fields are kept).
inline void i2s_set_code(uint8_t* row, int64_t j, int code) {
  const int64_t blk = j / kQK_I2S, e = j % kQK_I2S;
  const int sh = 6 - 2 * (int)(e / 32);
  uint8_t& b = row[blk * 32 + e % 32];
  b = (uint8_t)((b & ~(3 << sh)) | ((code & 3) << sh));
}

// The f32 scale stored after rows * k / 4 code bytes.
float i2s_tensor_scale(const uint8_t* tensor, int64_t rows, int64_t k);

// Row of k codes (k % 128 == 0) -> k floats (c - 1) * scale.
void dequantize_row_i2s(const uint8_t* row, float scale, float* y, int64_t k);

// Whole-tensor quantizer, bitnet.cpp's rule: scale = max |x| over the tensor;
// code 1 where |x| < 1e-6, else 2 for x > 0 and 0 for x < 0 (ternary-valued
// input {-s, 0, s} round-trips exactly). Writes rows * k / 4 + 32 bytes
// (tail zero-padded). k must be a multiple of 128.
void quantize_i2s(const float* x, int64_t rows, int64_t k, uint8_t* out);

}  // namespace chimera::quant
