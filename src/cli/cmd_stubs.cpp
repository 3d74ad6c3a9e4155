// Temporary registrations for sub-commands that are not implemented yet.
#include "cli/commands.h"

namespace chimera::cli {
void add_run_command(CLI::App&) {}
void add_logits_command(CLI::App&) {}
void add_tokenize_commands(CLI::App&) {}
void add_convert_command(CLI::App&) {}
void add_chat_command(CLI::App&) {}
void add_info_command(CLI::App&) {}
}  // namespace chimera::cli
