// Measurement for docs/DIFFUSION.md (moved out of the test suite): token
// agreement of each diffusion acceleration with the exact run, model rows
// evaluated and wall time, over a fixed set of prompts on tiny-llada.
//   build/bench/chimera_diffusion_agreement [SHARED_DIR]   (default $CHIMERA_SHARED, else ../shared)
// DLM_GEN (128), DLM_BLOCK (32) and DLM_TAU (0.9) set the run.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "core/timer.h"
#include "models/model.h"
#include "runtime/diffusion.h"
#include "runtime/generator.h"

namespace {

using namespace chimera;

std::vector<int32_t> prompt_of(const std::string& json_path) {
  std::ifstream f(json_path);
  return nlohmann::json::parse(f)["prompt_tokens"].get<std::vector<int32_t>>();
}

double env_or(const char* name, double def) {
  const char* e = std::getenv(name);
  return e && *e ? std::atof(e) : def;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shared = argc > 1 ? argv[1] : "";
  if (shared.empty() && std::getenv("CHIMERA_SHARED")) shared = std::getenv("CHIMERA_SHARED");
  if (shared.empty()) shared = "../shared";
  auto loaded = models::load_model(shared + "/golden/models/tiny-llada.gguf");
  if (!loaded.is_ok()) {
    std::fprintf(stderr, "error: %s\n", loaded.status().message().c_str());
    return 1;
  }
  models::Model& model = **loaded;
  std::vector<std::vector<int32_t>> prompts = {prompt_of(shared + "/golden/tiny-llada.json"),
                                               prompt_of(shared + "/golden/tiny-llada-long.json")};
  for (int k = 0; k < 6; ++k) {  // fixed pseudo-random prompts of 8..28 tokens
    std::mt19937_64 r((uint64_t)k + 100);
    std::vector<int32_t> p = {1};
    for (int i = 0; i < 8 + 4 * k; ++i) p.push_back((int32_t)(r() % 3000) + 100);
    prompts.push_back(p);
  }
  const auto gen = (int64_t)env_or("DLM_GEN", 128), block = (int64_t)env_or("DLM_BLOCK", 32);
  const double tau = env_or("DLM_TAU", 0.9);
  struct Mode {
    const char* name;
    bool prefix, dual;
    int64_t refresh;
    double threshold;
  };
  const std::vector<Mode> modes = {{"exact", false, false, 0, 0},       {"prefix cache", true, false, 0, 0},
                                   {"dual cache", false, true, 0, 0},   {"dual cache, refresh 8", false, true, 8, 0},
                                   {"threshold", false, false, 0, tau}, {"prefix + threshold", true, false, 0, tau},
                                   {"dual + threshold", false, true, 0, tau}};
  ThreadPool pool(2);
  std::vector<std::vector<int32_t>> exact(prompts.size());
  double t_exact = 0;
  int64_t rows_exact = 0;
  std::printf("gen %lld, block %lld, steps = gen, tau %.3g, %zu prompts\n", (long long)gen, (long long)block, tau,
              prompts.size());
  std::printf("| mode | token agreement | steps | model rows | rows speed-up | wall s | speed-up |\n|---|---|---|---|---|---|---|\n");
  for (const Mode& m : modes) {
    runtime::GenerateOptions o;
    o.stop_at_eog = false;
    o.sampling.temperature = 0;
    o.n_predict = gen;
    o.diffusion.steps = gen;
    o.diffusion.block_length = block;
    o.diffusion.prefix_cache = m.prefix;
    o.diffusion.dual_cache = m.dual;
    o.diffusion.cache_refresh = m.refresh;
    o.diffusion.threshold = m.threshold;
    int64_t agree = 0, total = 0, rows = 0, steps = 0;
    const double t0 = now_seconds();
    for (size_t i = 0; i < prompts.size(); ++i) {
      runtime::DiffusionGenerator g(model, 256, &pool);
      std::vector<int32_t> out;
      auto r = g.generate(prompts[i], o, [&](int32_t t) {
        out.push_back(t);
        return true;
      });
      if (!r.is_ok()) {
        std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
        return 1;
      }
      rows += g.last_run().rows;
      steps += g.last_run().steps;
      if (&m == &modes[0]) exact[i] = out;
      for (size_t k = 0; k < out.size() && k < exact[i].size(); ++k) agree += out[k] == exact[i][k];
      total += (int64_t)out.size();
    }
    const double dt = now_seconds() - t0;
    if (&m == &modes[0]) t_exact = dt, rows_exact = rows;
    std::printf("| %s | %.1f%% | %lld | %lld | %.2fx | %.2f | %.2fx |\n", m.name, 100.0 * agree / total,
                (long long)steps, (long long)rows, (double)rows_exact / rows, dt, t_exact / dt);
  }
  return 0;
}
