// Absmean ternarization (BitNet b1.58) of an f32 weight tensor into TQ2_0 or
// TQ1_0 blocks — the conversion `chimera quantize IN OUT tq2_0|tq1_0` applies
// to each 2-D weight matrix.
//
// Semantics (as BitNet b1.58 training and llama.cpp's convert_hf_to_gguf
// BitnetModel.weight_quant do it): s = max(mean over the whole tensor of |w|,
// 1e-5); code = clamp(round(w / s), -1, 1) (round half to even, like torch);
// the ternary tensor code * s is then stored with the TQ reference quantizer
// (per block d = f16(max |code * s|) = f16(s), or 0 for an all-zero block), so
// every stored weight is exactly code * f16(s). Input that is already
// ternary (every non-zero |w| equal to one a) keeps s = a, so ternarizing is
// idempotent: a BitNet weight stored as code * a is not rescaled.
// Layout: rows of n_cols values (n_cols a multiple of 256) -> rows of
// n_cols/256 blocks, row-major, ggml order. Precision: the mean is accumulated
// in f64; the only rounding of a ternarized weight is f16(s) (relative 2^-11).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "format/gguf/ggml_types.h"

namespace chimera::quant {

// Writes n_rows * n_cols / 256 blocks of `type` (TQ1_0 or TQ2_0) to out, which
// must hold out_bytes >= that many block bytes; *scale_out (optional) gets s.
// Errors: other types, n_cols not a multiple of 256, a too-small buffer,
// non-finite input.
Status ternarize_tensor(format::GgmlType type, const float* w, int64_t n_rows, int64_t n_cols, void* out,
                        size_t out_bytes, float* scale_out = nullptr);

}  // namespace chimera::quant
