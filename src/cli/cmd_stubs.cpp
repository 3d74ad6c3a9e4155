// Temporary registrations for sub-commands that are not implemented yet.
#include "cli/commands.h"

namespace chimera::cli {
}  // namespace chimera::cli
