// The AMX level (Isa::kAmx): offered only when the CPU has AMX-TILE +
// AMX-INT8 over AVX-512 VNNI and the kernel grants the tile state; a refused
// request (simulated by CHIMERA_NO_AMX=1, which makes request_amx_permission()
// answer "refused" without asking) leaves it out, and the best level is then
// avx512vnni; its types without AMX kernels run their AVX-512 VNNI ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/cpu_features.h"
#include "kernels/dispatch.h"
#include "kernels/type_traits.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;

bool has(const std::vector<Isa>& v, Isa i) { return std::find(v.begin(), v.end(), i) != v.end(); }

// Sets CHIMERA_NO_AMX for the scope, restoring the previous value.
class ScopedNoAmx {
 public:
  ScopedNoAmx() {
    if (const char* e = std::getenv("CHIMERA_NO_AMX")) prev_ = e, had_ = true;
    setenv("CHIMERA_NO_AMX", "1", 1);
  }
  ~ScopedNoAmx() {
    if (had_) {
      setenv("CHIMERA_NO_AMX", prev_.c_str(), 1);
    } else {
      unsetenv("CHIMERA_NO_AMX");
    }
  }

 private:
  std::string prev_;
  bool had_ = false;
};

bool cpu_has_amx_int8() {
  const CpuFeatures& f = cpu_features();
  return f.amx_tile && f.amx_int8 && has(available_isas(), Isa::kAvx512Vnni);
}

TEST(IsaAmx, OfferedExactlyWhenThePermissionIsGranted) {
  if (!cpu_has_amx_int8()) GTEST_SKIP() << "this CPU has no AMX-INT8 (with AVX-512 VNNI): the level is never offered";
  if (const char* e = std::getenv("CHIMERA_NO_AMX"); e && std::string(e) == "1")
    GTEST_SKIP() << "CHIMERA_NO_AMX=1 is set for the test run";
  const bool granted = request_amx_permission();
  EXPECT_EQ(has(available_isas(), Isa::kAmx), granted);
  if (granted) {
    EXPECT_EQ(best_isa(), Isa::kAmx);
  }
}

TEST(IsaAmx, RefusedPermissionLeavesTheLevelOut) {
  if (!cpu_has_amx_int8()) GTEST_SKIP() << "this CPU has no AMX-INT8 (with AVX-512 VNNI): nothing to refuse";
  {
    ScopedNoAmx no_amx;
    EXPECT_FALSE(request_amx_permission());
    const std::vector<Isa> isas = available_isas();
    EXPECT_FALSE(has(isas, Isa::kAmx));
    EXPECT_EQ(isas.back(), Isa::kAvx512Vnni);
    EXPECT_EQ(best_isa(), Isa::kAvx512Vnni);
  }
  // Without the variable the (real) answer decides again.
  EXPECT_EQ(has(available_isas(), Isa::kAmx), request_amx_permission());
}

TEST(IsaAmx, NameParsesAndLayoutsAreTheVnniOnes) {
  Isa i = Isa::kScalar;
  ASSERT_TRUE(parse_isa("amx", &i));
  EXPECT_EQ(i, Isa::kAmx);
  EXPECT_STREQ(isa_name(Isa::kAmx), "amx");
  EXPECT_EQ(layout_isa(Isa::kAmx), Isa::kAvx512Vnni);
  EXPECT_EQ(layout_isa(Isa::kAvx512Vnni), Isa::kAvx512Vnni);
  EXPECT_EQ(layout_isa(Isa::kAvx2), Isa::kAvx2);
#if defined(__x86_64__)
  // Q4_K has an AMX GEMM reading the VNNI x16 layout (same repack, the VNNI
  // kernel's name for the repack cache); the other types are the VNNI kernels.
  const MatmulKernel* amx = matmul_kernel(GgmlType::Q4_K, Isa::kAmx);
  const MatmulKernel* vnni = matmul_kernel(GgmlType::Q4_K, Isa::kAvx512Vnni);
  ASSERT_NE(amx, nullptr);
  EXPECT_STREQ(amx->name, "gemm_q4_K_q8_K_amx");
  EXPECT_STREQ(amx->layout_name, vnni->name);
  EXPECT_EQ(amx->repack, vnni->repack);
  EXPECT_EQ(amx->repack_rows, vnni->repack_rows);
  EXPECT_EQ(amx->pack_act, vnni->pack_act);
  EXPECT_NE(amx->gemm_packed, vnni->gemm_packed);
  for (GgmlType t : {GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q8_0, GgmlType::TQ2_0, GgmlType::F16})
    EXPECT_EQ(matmul_kernel(t, Isa::kAmx), matmul_kernel(t, Isa::kAvx512Vnni)) << format::ggml_type_name(t);
#endif
}

}  // namespace
}  // namespace chimera::kernels
