// Llama 3 RoPE factors; see rope_factors.h.
#include "format/rope_factors.h"

#include <cmath>
#include <numbers>

namespace chimera::format {

std::vector<float> llama3_rope_factors(int64_t head_dim, double theta, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_context) {
  const double low_freq_wavelen = original_context / low_freq_factor;
  const double high_freq_wavelen = original_context / high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(theta, (double)i / (double)head_dim);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    if (wavelen < high_freq_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      out.push_back((float)factor);
    } else {
      const double smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      out.push_back((float)(1.0 / ((1.0 - smooth) / factor + smooth)));
    }
  }
  return out;
}

}  // namespace chimera::format
