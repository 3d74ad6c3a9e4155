// Run-time CPU feature detection (x86 CPUID/XGETBV, Arm hwcaps) and the AMX
// permission request. Queried once; kernels pick their implementation from it.
#pragma once

#include <string>

namespace chimera {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avxvnni = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  bool neon = false, dotprod = false;
  int logical_cores = 1;
  std::string summary() const;
};

const CpuFeatures& cpu_features();

// Asks the kernel for permission to use AMX tile data (arch_prctl
// ARCH_REQ_XCOMP_PERM). Returns true when AMX can be used. Asked once; with
// CHIMERA_NO_AMX=1 in the environment (read at each call) it returns false
// without asking, as if refused (tests; a workaround for a faulty AMX path).
bool request_amx_permission();

// Number of physical cores to use by default (>= 1).
int default_thread_count();

}  // namespace chimera
