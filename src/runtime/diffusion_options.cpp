// Validation and block/step schedule of masked-diffusion options (see
// diffusion_options.h). Shared by DiffusionGenerator and the front ends that
// want to reject a bad combination before generating (the server's request
// validation), so both report the same message.
#include "runtime/diffusion_options.h"

#include <algorithm>

namespace chimera::runtime {

Status check_diffusion_options(const DiffusionOptions& d) {
  if (d.steps < 0) return invalid_argument("--steps must be positive (got " + std::to_string(d.steps) + ")");
  if (d.block_length < 0)
    return invalid_argument("--block-length must be positive (got " + std::to_string(d.block_length) + ")");
  if (!(d.cfg_scale >= 0)) return invalid_argument("--cfg must be >= 0");
  if (!(d.threshold >= 0 && d.threshold < 1)) return invalid_argument("--threshold must be in [0, 1)");
  if (d.cache_refresh < 0) return invalid_argument("--cache-refresh must be >= 0");
  if (d.default_gen_length < 1) return invalid_argument("the default diffusion generation length must be >= 1");
  return Status::ok();
}

Result<DiffusionSchedule> diffusion_schedule(const DiffusionOptions& d, int64_t gen) {
  CHIMERA_RETURN_IF_ERROR(check_diffusion_options(d));
  if (gen <= 0) return invalid_argument("the generation length must be positive (got " + std::to_string(gen) + ")");
  DiffusionSchedule s;
  s.gen = gen;
  s.block = d.block_length > 0 ? d.block_length : gen;
  if (gen % s.block != 0)
    return invalid_argument("--block-length " + std::to_string(s.block) + " must divide the generation length -n " +
                            std::to_string(gen));
  s.n_blocks = gen / s.block;
  s.steps = d.steps > 0 ? d.steps : gen;
  if (s.steps % s.n_blocks != 0)
    return invalid_argument("--steps " + std::to_string(s.steps) + " must be a multiple of the number of blocks " +
                            std::to_string(s.n_blocks) + " (-n " + std::to_string(gen) + " / --block-length " +
                            std::to_string(s.block) + ")");
  s.steps_per_block = s.steps / s.n_blocks;
  return s;
}

int64_t diffusion_default_length(const DiffusionOptions& d, int64_t room) {
  int64_t gen = std::min<int64_t>(d.default_gen_length, room);
  if (d.block_length > 0) gen -= gen % d.block_length;
  return std::max<int64_t>(gen, 0);
}

}  // namespace chimera::runtime
