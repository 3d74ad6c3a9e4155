// The diffusion options of the CLI (masked diffusion LMs: LLaDA, Dream),
// registered by one helper on every sub-command that generates — `run`,
// `chat`, `bench` and `serve` (as server defaults) — so the flags, their help
// text and their validation are the same everywhere. Autoregressive models
// ignore them.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/status.h"
#include "runtime/diffusion_options.h"

namespace chimera::cli {

struct DiffusionCliOptions {
  runtime::DiffusionOptions d;
  std::string remasking = "low_confidence";

  // --steps --block-length --remasking --cfg --visual --prefix-cache
  // --dual-cache --cache-refresh --threshold, in an option group "Diffusion".
  void add_to(CLI::App* app);
  // The options with --remasking parsed, value ranges checked (a clear error
  // naming the flag otherwise).
  Result<runtime::DiffusionOptions> resolve() const;
};

}  // namespace chimera::cli
