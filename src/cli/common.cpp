// Shared CLI helpers.
#include "cli/common.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "kernels/dispatch.h"
#include "kernels/repack_cache.h"

namespace chimera::cli {

Result<std::vector<int32_t>> parse_id_list(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ',' || s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
    if (i >= s.size()) break;
    size_t j = i;
    if (s[j] == '-' || s[j] == '+') ++j;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    const std::string tok = s.substr(i, j - i);
    if (j == i || tok == "-" || tok == "+" || (j < s.size() && s[j] != ',' && s[j] != ' ' && s[j] != '\t' && s[j] != '\n'))
      return invalid_argument("invalid token id list '" + s + "' (expected integers separated by commas)");
    long long v = 0;
    try {
      v = std::stoll(tok);
    } catch (...) {
      return invalid_argument("token id '" + tok + "' is out of range");
    }
    if (v < 0 || v > INT32_MAX) return invalid_argument("token id '" + tok + "' is out of range");
    ids.push_back((int32_t)v);
    i = j;
  }
  return ids;
}

Result<std::string> read_text_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return invalid_argument("'" + path + "' is a directory, not a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot read '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return io_error("cannot read '" + path + "'");
  return ss.str();
}

CLI::Option* add_ctx_option(CLI::App* app, int64_t* n_ctx, const std::string& help) {
  return app->add_option("-c,--ctx-size", *n_ctx, help)->check(CLI::Range((int64_t)0, kMaxCtx));
}

void ComputeOptions::add_to(CLI::App* app) {
  app->add_option("--threads", threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  app->add_option("--isa", isa, "Restrict kernels to an instruction set: scalar, avx2, avx2vnni, avx512, avx512vnni, amx, neon");
  app->add_flag("--no-repack-cache", no_repack_cache,
                "Do not read or write MODEL.gguf.ISA.chimera-cache (the repacked weight layouts kept next to the model)");
  add_kv_type_options(app, &cache_type_k, &cache_type_v);
}

void add_kv_type_options(CLI::App* app, std::string* k, std::string* v) {
  for (auto [flag, dst, what] : {std::tuple{"--cache-type-k", k, "keys"}, std::tuple{"--cache-type-v", v, "values"}}) {
    app->add_option(flag, *dst,
                    std::string("KV cache storage type of the ") + what + ": f32, f16 or q8_0 (default: " +
                        kernels::kv_type_name(layers::kDefaultKvCacheTypes.k) +
                        ", as llama.cpp: half of f32's bytes; f32 for families whose attention reads f32 caches "
                        "only; q8_0 takes 34 bytes per 32 values)")
        ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  }
}

namespace {
// What ComputeOptions::apply() chose for the next load_model_verbose.
struct KvChoice {
  std::string k, v;
} g_kv_choice;

Status check_kv_choice(const models::Model& m) {
  const Status s = m.check_kv_types(chosen_kv_types(m));
  if (!s.is_ok()) return unsupported("--cache-type-k/--cache-type-v: " + s.message());
  return s;
}
}  // namespace

layers::KvCacheTypes kv_types_from_flags(const std::string& k, const std::string& v, layers::KvCacheTypes dflt) {
  auto parse = [](const std::string& s, kernels::KvType d) {
    return s.empty() ? d
           : s == "f16" ? kernels::KvType::kF16
           : s == "q8_0" ? kernels::KvType::kQ8_0
                         : kernels::KvType::kF32;
  };
  return {parse(k, dflt.k), parse(v, dflt.v)};
}

layers::KvCacheTypes chosen_kv_types(const models::Model& m) {
  return kv_types_from_flags(g_kv_choice.k, g_kv_choice.v, m.default_kv_types());
}

Result<models::Context> new_context(const models::Model& m) {
  models::Context ctx = m.new_context();
  CHIMERA_RETURN_IF_ERROR(check_kv_choice(m));
  CHIMERA_RETURN_IF_ERROR(ctx.set_kv_types(chosen_kv_types(m)));
  return ctx;
}

Status ComputeOptions::apply() const {
  set_global_thread_count(threads > 0 ? threads : default_thread_count());
  g_kv_choice = {cache_type_k, cache_type_v};
  const char* env = std::getenv("CHIMERA_REPACK_CACHE");
  kernels::set_repack_cache_enabled(!no_repack_cache && !(env && std::string(env) == "0"));
  if (!isa.empty()) {
    kernels::Isa want;
    if (!kernels::parse_isa(isa, &want)) return invalid_argument("unknown instruction set '" + isa + "'");
    bool ok = false;
    for (auto a : kernels::available_isas()) ok |= a == want;
    if (!ok) return unsupported(std::string("this CPU cannot run ") + kernels::isa_name(want) + " kernels");
    kernels::set_active_isa(want);
  }
  return Status::ok();
}

void SamplingOptions::add_to(CLI::App* app) {
  // Out-of-range values are refused by the parser (like the server's request limits).
  app->add_option("--temp", p.temperature, "Temperature (0 = greedy)")->capture_default_str()->check(CLI::Range(0.0, 100.0));
  app->add_option("--top-k", p.top_k, "Top-k (0 = off)")->capture_default_str()->check(CLI::Range(0, 1 << 30));
  app->add_option("--top-p", p.top_p, "Top-p (1 = off)")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  app->add_option("--min-p", p.min_p, "Min-p (0 = off)")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  app->add_option("--repeat-penalty", p.repeat_penalty, "Repetition penalty (1 = off)")
      ->capture_default_str()
      ->check(CLI::Range(1e-6, 100.0));
  app->add_option("--presence-penalty", p.presence_penalty, "Presence penalty")
      ->capture_default_str()
      ->check(CLI::Range(-100.0, 100.0));
  app->add_option("--frequency-penalty", p.frequency_penalty, "Frequency penalty")
      ->capture_default_str()
      ->check(CLI::Range(-100.0, 100.0));
  app->add_option("--repeat-last-n", p.penalty_last_n, "Penalty window (-1 = all)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 30));
  // The parser would wrap "-1" and saturate values past 2^64 silently.
  const CLI::Validator u64(
      [](std::string& v) -> std::string {
        if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string::npos ||
            (v.size() == 20 && v > "18446744073709551615"))
          return "must be an integer between 0 and 18446744073709551615 (got " + v + ")";
        return "";
      },
      "UINT64");
  app->add_option("--seed", p.seed, "Random seed")->capture_default_str()->check(u64);
}

Result<std::unique_ptr<models::Model>> load_model_verbose(const std::string& path, bool quiet) {
  Stopwatch sw;
  CHIMERA_ASSIGN_OR_RETURN(auto m, models::load_model(path));
  CHIMERA_RETURN_IF_ERROR(check_kv_choice(*m));
  if (!quiet) {
    const auto& i = m->info();
    std::fprintf(stderr, "chimera: loaded %s (%s, %lld layers, %lld vocab, %.1f MiB) in %.2f s; %d threads, %s kernels\n",
                 i.name.c_str(), i.arch.c_str(), (long long)i.n_layer, (long long)i.n_vocab,
                 (double)i.weight_bytes / (1024.0 * 1024.0), sw.elapsed(), global_thread_pool().size(),
                 kernels::isa_name(kernels::active_isa()));
    for (const std::string& d : i.derived) std::fprintf(stderr, "chimera: derived: %s\n", d.c_str());
    if (m->repacked_bytes() > 0 || m->relocated_bytes() > 0)
      std::fprintf(stderr,
                   "chimera: repacked %.1f MiB of weights into kernel layouts, copied %.1f MiB to huge pages at load "
                   "(CHIMERA_REPACK=0 turns both off)\n",
                   (double)m->repacked_bytes() / (1024.0 * 1024.0), (double)m->relocated_bytes() / (1024.0 * 1024.0));
    if (!m->repack_cache_status().empty())
      std::fprintf(stderr, "chimera: repack cache: %s\n", m->repack_cache_status().c_str());
    if (m->kv_default_falls_back())
      std::fprintf(stderr, "chimera: note: KV cache f32 (%s attention reads f32 caches only; the default elsewhere is %s)\n",
                   i.arch.c_str(), kernels::kv_type_name(layers::kDefaultKvCacheTypes.k));
  }
  return m;
}

int64_t resolve_ctx(const models::Model& m, int64_t requested) {
  // Like llama.cpp: 4096 unless asked (the training context is not a hard limit
  // for RoPE models; small models often record a smaller one).
  (void)m;
  return requested > 0 ? requested : 4096;
}

}  // namespace chimera::cli
