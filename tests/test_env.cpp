// Linked into every test binary (chimera_test_util): the CLI runs the tests
// start never write MODEL.ISA.chimera-cache next to the shared golden models
// (kernels/repack_cache.h). A value already set wins; the repack cache's own
// CLI test unsets it for its subprocesses.
#include <cstdlib>

namespace {
const bool kRepackCacheOff = ::setenv("CHIMERA_REPACK_CACHE", "0", 0) == 0;
}  // namespace
