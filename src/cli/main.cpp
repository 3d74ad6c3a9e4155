// chimera command-line entry point: dispatches to sub-commands.
#include "cli/commands.h"

int main(int argc, char** argv) { return chimera::cli::run_main(argc, argv); }
