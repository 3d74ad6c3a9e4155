// Registration and resolution of the shared diffusion flags (see
// diffusion_options.h).
#include "cli/diffusion_options.h"

namespace chimera::cli {

void DiffusionCliOptions::add_to(CLI::App* app) {
  const std::string g = "Diffusion (LLaDA, Dream; ignored by other models)";
  app->add_option("--steps", d.steps, "Denoising steps in total (default: one per generated token)")->group(g);
  app->add_option("--block-length", d.block_length, "Semi-autoregressive block length (default: the whole generation)")
      ->group(g);
  app->add_option("--remasking", remasking, "Which masked tokens to commit: low_confidence | random | margin | entropy")
      ->capture_default_str()
      ->group(g);
  app->add_option("--cfg", d.cfg_scale, "Classifier-free guidance scale (0 = off)")->group(g);
  app->add_flag("--visual", d.visual, "Redraw the canvas on stderr as it unmasks")->group(g);
  app->add_flag("--prefix-cache", d.prefix_cache, "Reuse committed blocks' K/V (Fast-dLLM prefix cache; approximate)")
      ->group(g);
  app->add_flag("--dual-cache", d.dual_cache, "Reuse prefix and suffix K/V (Fast-dLLM dual cache; approximate)")->group(g);
  app->add_option("--cache-refresh", d.cache_refresh, "With a cache: a full pass every N steps of a block (0 = block start only)")
      ->group(g);
  app->add_option("--threshold", d.threshold,
                  "Parallel decoding: commit every masked token with confidence > T, at least one per step (0 = off)")
      ->group(g);
}

Result<runtime::DiffusionOptions> DiffusionCliOptions::resolve() const {
  runtime::DiffusionOptions out = d;
  if (!runtime::parse_remasking(remasking, &out.remasking))
    return invalid_argument("--remasking must be low_confidence, random, margin or entropy (got '" + remasking + "')");
  CHIMERA_RETURN_IF_ERROR(runtime::check_diffusion_options(out));
  return out;
}

}  // namespace chimera::cli
