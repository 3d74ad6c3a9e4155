// Sampler tests: parameters with every stage off (temperature as given), so a
// test turns on only the stages it names.
#pragma once

#include <cstdint>

#include "runtime/sampler.h"

namespace chimera::runtime::test {

inline SamplingParams stages_off(float temperature, uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.presence_penalty = 0.0f;
  p.frequency_penalty = 0.0f;
  p.penalty_last_n = 64;
  p.seed = seed;
  return p;
}

}  // namespace chimera::runtime::test
