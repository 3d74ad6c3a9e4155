// Options of masked-diffusion generation (LLaDA / Dream), carried inside
// runtime::GenerateOptions so `run`, `chat`, `serve` and `bench` pass them
// through unchanged; autoregressive generators ignore them. Zero means "the
// default" where noted; DiffusionGenerator validates the combination against
// n_predict and reports a clear error (e.g. a block length that does not divide
// the generation length).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace chimera::runtime {

enum class Remasking {
  kLowConfidence,  // confidence = softmax(logits)[x̂] (LLaDA default)
  kRandom,         // confidence = U(0,1)
  kMargin,         // top-1 minus top-2 probability (Dream topk_margin)
  kEntropy,        // Σ p log p, the negative entropy (Dream entropy)
};

// "low_confidence" | "random" | "margin" | "entropy"; false when unknown.
bool parse_remasking(const std::string& s, Remasking* out);
const char* remasking_name(Remasking r);

struct DiffusionOptions {
  int64_t steps = 0;          // denoising steps over the whole generation (0: one per token)
  int64_t block_length = 0;   // semi-autoregressive block size (0: one block = whole generation)
  Remasking remasking = Remasking::kLowConfidence;
  double cfg_scale = 0;       // classifier-free guidance w (0: off): u + (w + 1)(c − u)
  bool visual = false;        // redraw the canvas on stderr after every step (ANSI)
  // Fast-dLLM accelerations (all approximate; off = the exact reference).
  bool prefix_cache = false;  // committed blocks' K/V reused within a block
  bool dual_cache = false;    // prefix + suffix K/V reused; only the current block recomputed
  int64_t cache_refresh = 0;  // with a cache: full pass every k steps inside a block (0: at block start only)
  double threshold = 0;       // > 0: commit every masked token with confidence > τ (at least one per step)
  int64_t default_gen_length = 128;  // generation length when n_predict < 0 (chat)
};

// The value ranges alone (steps, block length, cache refresh >= 0; cfg >= 0;
// threshold in [0, 1)); the error names the CLI flag.
Status check_diffusion_options(const DiffusionOptions& d);

// How `gen` generated tokens are decoded: blocks of `block` tokens, `steps`
// in total, `steps_per_block` each (defaults resolved: block = gen, steps =
// gen). An error when the block length does not divide gen or steps are not
// a multiple of the number of blocks. gen must be > 0.
struct DiffusionSchedule {
  int64_t gen = 0, block = 0, n_blocks = 0, steps = 0, steps_per_block = 0;
};
Result<DiffusionSchedule> diffusion_schedule(const DiffusionOptions& d, int64_t gen);

// Generation length for "until end of text" (n_predict < 0): the default
// canvas length clipped to `room` free context positions and rounded down to
// a multiple of the block length; 0 when no block fits.
int64_t diffusion_default_length(const DiffusionOptions& d, int64_t room);

}  // namespace chimera::runtime
