// Sub-command table and top-level error handling.
#include "cli/commands.h"

#include <cstdio>
#include <exception>

namespace chimera::cli {
namespace {
int g_exit_code = 0;
}

void set_exit_code(int code) { g_exit_code = code; }

int report_error(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s\n", message.c_str());
  g_exit_code = 1;
  return 1;
}

int report_error(const Status& st) { return report_error(st.message()); }

int run_main(int argc, char** argv) {
  CLI::App app{"chimera — CPU inference for hybrid, MoE, diffusion and low-bit language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "chimera 0.1.0");
  add_info_command(app);
  add_run_command(app);
  add_logits_command(app);
  add_tokenize_commands(app);
  add_convert_command(app);
  add_chat_command(app);
  add_bench_command(app);
  add_synth_command(app);
  add_serve_command(app);
  add_experts_command(app);
  add_quantize_command(app);
  add_perplexity_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::fprintf(stderr, "run with --help for usage\n");
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return g_exit_code;
}

}  // namespace chimera::cli
