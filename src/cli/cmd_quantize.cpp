// `chimera quantize IN.gguf OUT.gguf TYPE [--threads N]`: rewrites a GGUF model
// with its weights in a llama.cpp quantization mix (Q8_0, Q4_K_M, ...; the rules
// live in quant/quantize_model.h so `synth` shares them). One progress line per
// tensor goes to stderr (index, name, shape, type before -> after, size before ->
// after, "fallback" when the row length forced another type); the summary goes to
// stdout. Unknown TYPE, unreadable input and unwritable output exit 1 with
// "error: ...", and never leave a partial OUT behind. TQ1_0 / TQ2_0 ternarize every
// weight matrix with absmean scaling (BitNet b1.58) and warn that quality needs
// ternary-trained weights.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/thread_pool.h"
#include "models/tensor_table.h"
#include "quant/quantize_model.h"

namespace chimera::cli {
namespace {

struct QuantizeCliOptions {
  std::string in, out, type;
  int threads = 0;
};

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1048576.0);
  else std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  return buf;
}

}  // namespace

Result<quant::QuantizeStats> quantize_file(const std::string& in, const std::string& out, const quant::QuantMix& mix,
                                           bool quiet) {
  quant::QuantizeOptions qo;
  qo.pool = &global_thread_pool();
  qo.warn = [](const std::string& m) { std::fprintf(stderr, "warning: %s\n", m.c_str()); };
  // Roles from the architecture's tensor table; unknown archs go by name.
  qo.role_of = [](std::string_view arch, std::string_view name) {
    const models::TensorTable* t = models::find_tensor_table(arch);
    return t ? models::tensor_role(*t, name) : quant::TensorRole::kUnknown;
  };
  if (!quiet)
    qo.on_tensor = [](size_t i, size_t n, const std::string& name, format::GgmlType from, format::GgmlType to,
                      uint64_t bin, uint64_t bout, bool fallback) {
      std::fprintf(stderr, "[%4zu/%4zu] %-32s %6s -> %-6s %10s -> %-10s%s\n", i + 1, n, name.c_str(),
                   format::ggml_type_name(from).c_str(), format::ggml_type_name(to).c_str(), human_bytes(bin).c_str(),
                   human_bytes(bout).c_str(), fallback ? "  (fallback: row length)" : "");
    };
  return quant::quantize_model(in, out, mix, qo);
}

namespace {

int run_quantize(const QuantizeCliOptions& o) {
  const quant::QuantMix* mix = quant::find_quant_mix(o.type);
  if (!mix) return report_error("unknown quantization type '" + o.type + "' (known: " + quant::quant_mix_names() + ")");
  if (o.threads > 0) set_global_thread_count(o.threads);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = quantize_file(o.in, o.out, *mix, false);
  if (!r) return report_error(r.status());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("quantized %s -> %s as %s: %zu tensors (%zu converted, %zu fallbacks), %s -> %s (%.2fx), %.2f s\n",
              o.in.c_str(), o.out.c_str(), std::string(mix->name).c_str(), r->n_tensors, r->n_quantized,
              r->n_fallback, human_bytes(r->bytes_in).c_str(), human_bytes(r->bytes_out).c_str(),
              r->bytes_out ? (double)r->bytes_in / (double)r->bytes_out : 0.0, secs);
  return 0;
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto o = std::make_shared<QuantizeCliOptions>();
  CLI::App* sub = app.add_subcommand("quantize", "Quantize a GGUF model (llama.cpp types and mixes)");
  sub->add_option("input", o->in, "Input GGUF (F32/F16/BF16; quantized inputs are requantized)")->required();
  sub->add_option("output", o->out, "Output GGUF")->required();
  sub->add_option("type", o->type, "Type: " + quant::quant_mix_names())->required();
  sub->add_option("--threads", o->threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  sub->callback([o] { set_exit_code(run_quantize(*o)); });
}

}  // namespace chimera::cli
