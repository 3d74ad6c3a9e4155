// Scalar reference conversions for IQ4_XS (layout and algorithm summary in
// iq4xs_blocks.h) and the IQ4_NL quantizer. Both follow the steps of ggml's
// quantize_row_iq4_nl_impl with ntry = 7 and no importance weights — IQ4_XS
// for a 256 super-block of 32-element sub-blocks, IQ4_NL for one 32-element
// block — with f32 arithmetic in the same order.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/iq4xs_blocks.h"
#include "quant/legacy_blocks.h"

namespace chimera::quant {
namespace {

constexpr int kSub = 32;        // elements per sub-block
constexpr int kNSub = 256 / kSub;
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even (ggml's nearest_int, |f| <= 4194303).
int nearest_int(float f) {
  const float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Index of the codebook value nearest to x (ties to the lower index), by
// bisection over the sorted codebook.
int best_index(float x) {
  const int8_t* v = kIq4nlValues;
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < v[mid]) hi = mid;
    else lo = mid;
  }
  return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// Best scale of one sub-block (0 for an all-zero one): least squares on the
// codebook grid for the starting scale and 15 trial inverse scales around it.
float sub_block_scale(const float* x) {
  float amax = 0, max = 0;
  for (int j = 0; j < kSub; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.f;
  const int ntry = 7;
  auto fit = [&](float id, float* sumqx, float* sumq2) {
    *sumqx = 0, *sumq2 = 0;
    for (int j = 0; j < kSub; ++j) {
      const float q = kIq4nlValues[best_index(id * x[j])];
      const float w = x[j] * x[j];
      *sumqx += w * q * x[j];
      *sumq2 += w * q * q;
    }
  };
  float sumqx, sumq2;
  float d = -max / kIq4nlValues[0];
  fit(1 / d, &sumqx, &sumq2);
  d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int itry = -ntry; itry <= ntry; ++itry) {
    fit((itry + kIq4nlValues[0]) / max, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

void quantize_block(const float* x, block_iq4_xs* y) {
  float scales[kNSub];
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < kNSub; ++ib) {
    scales[ib] = sub_block_scale(x + ib * kSub);
    const float ad = std::fabs(scales[ib]);
    if (ad > amax_scale) {
      amax_scale = ad;
      max_scale = scales[ib];
    }
  }
  std::memset(y, 0, sizeof(*y));
  const float d = -max_scale / 32;
  y->d = f32_to_f16(d);
  const float id = d != 0.f ? 1 / d : 0.f;
  uint8_t L[256];
  for (int ib = 0; ib < kNSub; ++ib) {
    int l = nearest_int(id * scales[ib]);
    l = l < -32 ? -32 : (l > 31 ? 31 : l);
    // ggml uses the unrounded d here (not the stored f16), as we do.
    const float dl = d * l;
    const float idl = dl != 0.f ? 1 / dl : 0.f;
    for (int j = 0; j < kSub; ++j) L[ib * kSub + j] = (uint8_t)best_index(idl * x[ib * kSub + j]);
    l += 32;
    y->scales_l[ib / 2] |= (uint8_t)((l & 0xF) << (4 * (ib % 2)));
    y->scales_h |= (uint16_t)((l >> 4) << (2 * ib));
  }
  for (int ib = 0; ib < kNSub; ++ib)
    for (int j = 0; j < 16; ++j) y->qs[16 * ib + j] = (uint8_t)(L[kSub * ib + j] | (L[kSub * ib + 16 + j] << 4));
}

}  // namespace

void dequantize_row_iq4_xs(const block_iq4_xs* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / 256; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* qs = x[i].qs;
    for (int ib = 0; ib < kNSub; ++ib, y += 32, qs += 16) {
      const float dl = d * (float)(iq4_xs_scale(x[i], ib) - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kIq4nlValues[qs[j] & 0xF];
        y[j + 16] = dl * kIq4nlValues[qs[j] >> 4];
      }
    }
  }
}

void quantize_row_iq4_xs_ref(const float* x, block_iq4_xs* y, int64_t k) {
  for (int64_t i = 0; i < k / 256; ++i) quantize_block(x + i * 256, y + i);
}

// One block is its own super-block: the fitted scale is stored as is and the
// codes are searched again against it (an all-zero block: d = 0, every code
// the one nearest 0).
void quantize_row_iq4_nl_ref(const float* x, block_iq4_nl* y, int64_t k) {
  for (int64_t i = 0; i < k / kSub; ++i, x += kSub) {
    const float d = sub_block_scale(x);
    y[i].d = f32_to_f16(d);
    const float id = d != 0.f ? 1 / d : 0.f;
    for (int j = 0; j < 16; ++j)
      y[i].qs[j] = (uint8_t)(best_index(id * x[j]) | (best_index(id * x[j + 16]) << 4));
  }
}

}  // namespace chimera::quant
