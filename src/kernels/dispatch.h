// Instruction-set selection for kernels. The CPU is probed once; the active ISA
// defaults to the best one the CPU runs and can be lowered (tests sweep every
// available ISA; `--isa` on the CLI for diagnosis). Highway-based kernels follow
// the active ISA through hwy's target mask; hand-written intrinsics kernels read
// active_isa() when they pick an implementation.
#pragma once

#include <string>
#include <vector>

namespace chimera::kernels {

enum class Isa {
  kScalar = 0,    // portable C++ (Highway EMU128/SCALAR)
  kAvx2 = 1,      // AVX2 + FMA + F16C
  kAvx512 = 2,    // AVX-512 F/BW/DQ/VL
  kAvx512Vnni = 3,// + VNNI, VBMI2, BF16 (Highway AVX3_DL)
  kNeon = 4,      // Arm NEON
  kAvx2Vnni = 5,  // AVX2 + AVX-VNNI (VEX vpdpbusd / vpdpwssd on 256-bit vectors:
                  // Intel Alder Lake and later client cores, Sapphire Rapids, Zen 5)
  kAmx = 6,       // AVX-512 VNNI + AMX tiles (AMX-TILE, AMX-INT8: Sapphire Rapids and
                  // later Xeons), offered only when the kernel grants the tile state
                  // (request_amx_permission) and CHIMERA_NO_AMX is not 1. Types without
                  // an AMX kernel run their kAvx512Vnni ones (the same packed layouts).
};
// The values are slots, not an order: AVX2-VNNI sits between AVX2 and AVX-512
// (available_isas() lists the levels from the lowest to the best), and a CPU
// may have AVX-512 without AVX-VNNI (Zen 4). kAmx sits above kAvx512Vnni.

const char* isa_name(Isa isa);
// Every ISA this CPU can run, from scalar to the best.
std::vector<Isa> available_isas();
Isa best_isa();
Isa active_isa();
// Restricts kernels to `isa` (must be available). Not thread-safe with running kernels.
void set_active_isa(Isa isa);
// Parses "scalar", "avx2", "avx2vnni", "avx512", "avx512vnni", "amx", "neon".
bool parse_isa(const std::string& name, Isa* out);
// The level whose load-time packed weight layouts (kernels/repack.h) `isa`
// uses, and so whose repack cache file it shares: kAvx512Vnni for kAmx (its
// kernels read the AVX-512 VNNI layouts), `isa` itself otherwise.
Isa layout_isa(Isa isa);

// RAII helper for tests: sets an ISA and restores the previous one.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) : prev_(active_isa()) { set_active_isa(isa); }
  ~ScopedIsa() { set_active_isa(prev_); }

 private:
  Isa prev_;
};

}  // namespace chimera::kernels
