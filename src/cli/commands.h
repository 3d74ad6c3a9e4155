// The `chimera` command and its sub-commands. Each sub-command lives in its own
// cmd_*.cpp and registers itself through an add_*_command function listed in
// commands.cpp. User errors print "error: ..." on stderr and exit 1.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "core/status.h"

namespace chimera::cli {

int run_main(int argc, char** argv);

// Sets the process exit code from a sub-command callback.
void set_exit_code(int code);
// Prints "error: <message>" to stderr and sets exit code 1.
int report_error(const Status& st);
int report_error(const std::string& message);

void add_info_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_tokenize_commands(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_serve_command(CLI::App& app);
// `bench serve`, nested under `bench`; runs bench_callback when `bench` is used without it.
void add_bench_serve_command(CLI::App* bench, std::function<void()> bench_callback);
void add_experts_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);

}  // namespace chimera::cli
