// Which instruction-set levels the kernel tests exercised on this machine.
// The kernel, golden and repack tests loop over available_isas(); a level this
// CPU lacks runs in no test here. Emulation cannot close that gap on Debian 12:
// QEMU 7.2's user-mode TCG decodes no EVEX (AVX-512) instruction (checked:
// `qemu-x86_64 -cpu max` on a zmm FMA dies with SIGILL) and Intel SDE is not
// packaged. So this test names the unexercised levels and reports SKIPPED —
// the one skip in this folder that means "not covered here" — instead of
// letting a green run suggest they were tested.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/dispatch.h"

namespace chimera::kernels {
namespace {

std::vector<Isa> compiled_isas() {
#if defined(__x86_64__) || defined(_M_X64)
  return {Isa::kScalar, Isa::kAvx2, Isa::kAvx2Vnni, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAmx};
#elif defined(__aarch64__)
  return {Isa::kScalar, Isa::kNeon};
#else
  return {Isa::kScalar};
#endif
}

TEST(IsaCoverage, EveryCompiledLevelIsExercisedOnThisCpu) {
  const std::vector<Isa> avail = available_isas();
  std::string ran, missing;
  for (Isa isa : compiled_isas()) {
    bool here = false;
    for (Isa a : avail) here |= a == isa;
    std::string& list = here ? ran : missing;
    list += std::string(list.empty() ? "" : ", ") + isa_name(isa);
  }
  std::printf("[ isa ] kernel tests exercised: %s; not exercised: %s\n", ran.c_str(),
              missing.empty() ? "none" : missing.c_str());
  ASSERT_FALSE(ran.empty());
  if (!missing.empty()) {
    GTEST_SKIP() << "ISA levels NOT exercised on this CPU: " << missing
                 << " (their kernels ran in no test here; no emulator in Debian 12 runs AVX-512 — "
                    "run the suite on a machine that has them)";
  }
}

}  // namespace
}  // namespace chimera::kernels
