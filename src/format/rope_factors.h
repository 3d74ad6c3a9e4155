// RoPE frequency factors that converters store as tensors, shared by the
// Hugging Face importer and `synth`.
#pragma once

#include <cstdint>
#include <vector>

namespace chimera::format {

// Llama 3 RoPE scaling (config rope_scaling.rope_type "llama3") as llama.cpp's
// converter writes rope_freqs.weight: one factor per rotated pair (head_dim/2),
// 1 for short wavelengths, `factor` for long ones, smoothly blended between.
std::vector<float> llama3_rope_factors(int64_t head_dim, double theta, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_context);

}  // namespace chimera::format
