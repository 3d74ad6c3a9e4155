// Temporary registrations for sub-commands that are not implemented yet.
#include "cli/commands.h"

namespace chimera::cli {
void add_tokenize_commands(CLI::App&) {}
void add_convert_command(CLI::App&) {}
}  // namespace chimera::cli
