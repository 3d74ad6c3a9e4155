// Helpers shared by sub-commands: option groups, model loading, id lists.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/context.h"
#include "models/model.h"
#include "quant/quantize_model.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"

namespace chimera::cli {

// Parses "1,2,3" or "1 2 3" into ids.
Result<std::vector<int32_t>> parse_id_list(const std::string& s);
Result<std::string> read_text_file(const std::string& path);

// --threads and --isa, applied before loading.
struct ComputeOptions {
  int threads = 0;  // 0 = all cores
  std::string isa;  // "" = best
  bool no_repack_cache = false;  // --no-repack-cache (also CHIMERA_REPACK_CACHE=0)
  // --cache-type-k / --cache-type-v: f32, f16, q8_0 or "" = the model's
  // default (chosen_kv_types; checked against the next model loaded).
  std::string cache_type_k, cache_type_v;
  void add_to(CLI::App* app);
  Status apply() const;
};

// --cache-type-k / --cache-type-v into k and v (ComputeOptions::add_to, bench).
void add_kv_type_options(CLI::App* app, std::string* k, std::string* v);

struct SamplingOptions {
  runtime::SamplingParams p;
  void add_to(CLI::App* app);
};

// Loads a model, printing a one-line summary to stderr unless quiet. Refuses
// (kUnsupported naming the flags) a model that does not accept the KV cache
// types --cache-type-k/-v chose.
Result<std::unique_ptr<models::Model>> load_model_verbose(const std::string& path, bool quiet);
// The values of --cache-type-k/-v (add_kv_type_options: "", "f32", "f16" or
// "q8_0") as KV cache types; an empty one is dflt's.
layers::KvCacheTypes kv_types_from_flags(const std::string& k, const std::string& v, layers::KvCacheTypes dflt);
// The KV cache types --cache-type-k/-v chose (ComputeOptions::apply) for m;
// a type not given is m's default (Model::default_kv_types: f16, or f32 where
// the family reads f32 caches only).
layers::KvCacheTypes chosen_kv_types(const models::Model& m);
// A context on m with those KV types (the same error as load_model_verbose
// when m does not accept them): what a command runs its forwards on.
Result<models::Context> new_context(const models::Model& m);

// Largest accepted -c (tokens); larger values are refused, not clamped.
inline constexpr int64_t kMaxCtx = (int64_t)1 << 24;
// "-c,--ctx-size": 0 (the command's default) .. kMaxCtx; negative or larger
// values are refused by the parser with a clear error.
CLI::Option* add_ctx_option(CLI::App* app, int64_t* n_ctx, const std::string& help);

// Context size: requested (> 0), else 4096.
int64_t resolve_ctx(const models::Model& m, int64_t requested);

// quant::quantize_model on the global pool, one progress line per tensor on
// stderr unless quiet (`quantize`, and `convert --type Q...`).
Result<quant::QuantizeStats> quantize_file(const std::string& in, const std::string& out, const quant::QuantMix& mix,
                                           bool quiet);

}  // namespace chimera::cli
