// Gated memory unit and the memory-producing Mamba-1 forward (see gmu.h).
#include "layers/gmu.h"

#include <cstring>

#include "kernels/ops.h"
#include "kernels/ssm.h"

namespace chimera::layers {

Result<GmuWeights> bind_gmu(const WeightBinder& b, const std::string& prefix, int64_t n_embd, int64_t d_inner) {
  GmuWeights w;
  CHIMERA_ASSIGN_OR_RETURN(w.in, bind_linear(b, prefix + ".gmu_in", n_embd, d_inner));
  CHIMERA_ASSIGN_OR_RETURN(w.out, bind_linear(b, prefix + ".gmu_out", d_inner, n_embd));
  return w;
}

void gmu_forward(const GmuWeights& w, const float* h, const float* memory, int64_t T, int64_t n_embd,
                 int64_t d_inner, float* tmp, float* out, ThreadPool* pool) {
  w.in.apply(h, T, n_embd, tmp, d_inner, pool);
  for (int64_t t = 0; t < T; ++t) kernels::silu_mul(tmp + t * d_inner, memory + t * d_inner, tmp + t * d_inner, d_inner);
  w.out.apply(tmp, T, d_inner, out, n_embd, pool);
}

void mamba1_memory_forward(const Mamba1Config& c, const Mamba1Weights& w, const float* h, int64_t T,
                           RecurrentState& st, Mamba1Scratch& s, float* memory, float* out, ThreadPool* pool) {
  const int64_t D = c.d_inner, N = c.d_state, R = c.dt_rank, K = c.d_conv, ldb = R + 2 * N;
  float* xz = s.xz.data();
  float* xc = s.xc.data();
  float* xdb = s.xdb.data();
  w.in.apply(h, T, c.n_embd, xz, 2 * D, pool);
  float* conv_state = st.conv();
  parallel_range(pool, D, 16, [&](int64_t c0, int64_t c1) {
    kernels::conv1d_causal(xz, 2 * D, T, w.conv.w.ptr(), w.conv.b.ptr(), D, K, conv_state, xc, D, true, c0, c1);
  });
  w.x_proj.apply(xc, T, D, xdb, ldb, pool);
  w.dt_proj.apply(xdb, T, ldb, s.dt.data(), D, pool);
  kernels::Scan1Args a;
  a.T = T, a.D = D, a.N = N;
  a.x = xc, a.ldx = D, a.dt = s.dt.data(), a.lddt = D, a.dt_bias = w.dt_bias.ptr(), a.A = w.A.ptr();
  a.B = xdb + R, a.C = xdb + R + N, a.ldbc = ldb, a.d_skip = w.D.ptr();
  a.state = st.ssm(), a.y = s.y.data(), a.ldy = D;
  parallel_range(pool, D, 8, [&](int64_t d0, int64_t d1) { kernels::ssm_scan1(a, d0, d1); });
  std::memcpy(memory, s.y.data(), sizeof(float) * (size_t)(T * D));
  for (int64_t t = 0; t < T; ++t) kernels::silu_mul(xz + t * 2 * D + D, s.y.data() + t * D, s.y.data() + t * D, D);
  w.out.apply(s.y.data(), T, D, out, c.n_embd, pool);
}

}  // namespace chimera::layers
