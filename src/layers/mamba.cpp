// Mamba-1 mixer and the shared SSM weight helpers (see mamba.h).
#include "layers/mamba.h"

#include <cstring>

#include "core/fp16.h"
#include "format/gguf/tensor_names.h"
#include "kernels/ops.h"
#include "kernels/ssm.h"

namespace chimera::layers {

namespace tn = format::tn;

Result<Vec> bind_f32_tensor(const format::GgufFile& g, const std::string& name, std::initializer_list<int64_t> ne) {
  const format::GgufTensorInfo* t = g.find_tensor(name);
  if (!t) return not_found("missing tensor '" + name + "'");
  std::string want = "[";
  int64_t n = 1;
  size_t i = 0;
  bool ok = true;
  for (int64_t d : ne) {
    want += (i ? ", " : "") + std::to_string(d);
    if (t->dim(i) != d) ok = false;
    n *= d;
    ++i;
  }
  want += "]";
  for (; i < 4; ++i)
    if (t->dim(i) != 1) ok = false;
  if (!ok || (int64_t)t->n_elements != n)
    return invalid_argument("tensor '" + name + "' has shape " + t->shape_string() + ", expected " + want);
  Vec v;
  v.data.resize((size_t)n);
  float* out = v.data.data();
  switch (t->type) {
    case format::GgmlType::F32: std::memcpy(out, t->data, (size_t)n * sizeof(float)); break;
    case format::GgmlType::F16: {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(t->data);
      for (int64_t k = 0; k < n; ++k) out[k] = f16_to_f32(p[k]);
      break;
    }
    case format::GgmlType::BF16: {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(t->data);
      for (int64_t k = 0; k < n; ++k) out[k] = bf16_to_f32(p[k]);
      break;
    }
    default:
      return unsupported("tensor '" + name + "' has type " + format::ggml_type_name(t->type) +
                         "; SSM parameter tensors must be F32, F16 or BF16");
  }
  return v;
}

Result<Conv1dWeights> bind_conv1d(const format::GgufFile& g, const std::string& p, int64_t C, int64_t K,
                                  bool bias_optional) {
  Conv1dWeights cw;
  CHIMERA_ASSIGN_OR_RETURN(Vec raw, bind_f32_tensor(g, tn::in(p, tn::kSsmConv1d), {K, C}));
  cw.w.data.resize((size_t)(K * C));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t k = 0; k < K; ++k) cw.w.data[(size_t)(k * C + c)] = raw.data[(size_t)(c * K + k)];
  const std::string bn = tn::in(p, tn::kSsmConv1dBias);
  if (!bias_optional || g.find_tensor(bn)) {
    CHIMERA_ASSIGN_OR_RETURN(cw.b, bind_f32_tensor(g, bn, {C}));
  }
  return cw;
}

Result<Mamba1Weights> bind_mamba1(const WeightBinder& b, const format::GgufFile& g, const std::string& p,
                                  const Mamba1Config& c) {
  if (c.n_embd < 1 || c.d_inner < 1 || c.d_state < 1 || c.d_conv < 1 || c.dt_rank < 1)
    return invalid_argument(p + ": invalid Mamba sizes");
  Mamba1Weights w;
  CHIMERA_ASSIGN_OR_RETURN(w.in, bind_linear(b, tn::linear(p, tn::kSsmIn), c.n_embd, 2 * c.d_inner));
  CHIMERA_ASSIGN_OR_RETURN(w.conv, bind_conv1d(g, p, c.d_inner, c.d_conv, false));
  CHIMERA_ASSIGN_OR_RETURN(w.x_proj.w, b.matrix(tn::in(p, tn::kSsmX), c.d_inner, c.dt_rank + 2 * c.d_state));
  CHIMERA_ASSIGN_OR_RETURN(w.dt_proj.w, b.matrix(tn::in(p, tn::kSsmDt), c.dt_rank, c.d_inner));
  CHIMERA_ASSIGN_OR_RETURN(w.dt_bias, bind_f32_tensor(g, tn::in(p, tn::kSsmDtBias), {c.d_inner}));
  CHIMERA_ASSIGN_OR_RETURN(w.A, bind_f32_tensor(g, tn::in(p, tn::kSsmA), {c.d_state, c.d_inner}));
  CHIMERA_ASSIGN_OR_RETURN(w.D, bind_f32_tensor(g, tn::in(p, tn::kSsmD), {c.d_inner}));
  CHIMERA_ASSIGN_OR_RETURN(w.out, bind_linear(b, tn::linear(p, tn::kSsmOut), c.d_inner, c.n_embd));
  return w;
}

void Mamba1Scratch::reserve(const Mamba1Config& c, int64_t T) {
  xz.resize((size_t)(T * 2 * c.d_inner));
  xc.resize((size_t)(T * c.d_inner));
  xdb.resize((size_t)(T * (c.dt_rank + 2 * c.d_state)));
  dt.resize((size_t)(T * c.d_inner));
  y.resize((size_t)(T * c.d_inner));
}

void mamba1_forward_segments(const Mamba1Config& c, const Mamba1Weights& w, const float* h, int64_t rows,
                             std::span<const MixerSegment> segs, Mamba1Scratch& s, float* out, ThreadPool* pool,
                             float* memory) {
  const int64_t D = c.d_inner, N = c.d_state, R = c.dt_rank, K = c.d_conv, ldb = R + 2 * N;
  float* xz = s.xz.data();
  float* xc = s.xc.data();
  float* xdb = s.xdb.data();
  float* dt = s.dt.data();
  float* y = s.y.data();
  // Projection of every row: [x | z].
  w.in.apply(h, rows, c.n_embd, xz, 2 * D, pool);
  // Per sequence: causal conv on its own conv state (one pool job for all).
  parallel_range(pool, D, 16, [&](int64_t c0, int64_t c1) {
    for (const MixerSegment& sg : segs)
      kernels::conv1d_causal(xz + sg.row * 2 * D, 2 * D, sg.T, w.conv.w.ptr(), w.conv.b.ptr(), D, K,
                             sg.state->conv(), xc + sg.row * D, D, true, c0, c1);
  });
  // Projections of every row: [dt_low | B | C], then dt.
  w.x_proj.apply(xc, rows, D, xdb, ldb, pool);
  if (c.dt_b_c_rms) {
    for (int64_t t = 0; t < rows; ++t) {
      float* r = xdb + t * ldb;
      kernels::rms_norm(r, nullptr, r, R, c.eps);
      kernels::rms_norm(r + R, nullptr, r + R, N, c.eps);
      kernels::rms_norm(r + R + N, nullptr, r + R + N, N, c.eps);
    }
  }
  w.dt_proj.apply(xdb, rows, ldb, dt, D, pool);
  // Per sequence: selective scan on its own SSM state.
  parallel_range(pool, D, 8, [&](int64_t d0, int64_t d1) {
    for (const MixerSegment& sg : segs) {
      kernels::Scan1Args a;
      a.T = sg.T, a.D = D, a.N = N;
      a.x = xc + sg.row * D, a.ldx = D, a.dt = dt + sg.row * D, a.lddt = D, a.dt_bias = w.dt_bias.ptr();
      a.A = w.A.ptr(), a.B = xdb + sg.row * ldb + R, a.C = xdb + sg.row * ldb + R + N, a.ldbc = ldb;
      a.d_skip = w.D.ptr(), a.state = sg.state->ssm(), a.y = y + sg.row * D, a.ldy = D;
      kernels::ssm_scan1(a, d0, d1);
    }
  });
  if (memory) std::memcpy(memory, y, sizeof(float) * (size_t)(rows * D));
  // Gate and output projection of every row.
  for (int64_t t = 0; t < rows; ++t) kernels::silu_mul(xz + t * 2 * D + D, y + t * D, y + t * D, D);
  w.out.apply(y, rows, D, out, c.n_embd, pool);
}

void mamba1_forward(const Mamba1Config& c, const Mamba1Weights& w, const float* h, int64_t T, RecurrentState& st,
                    Mamba1Scratch& s, float* out, ThreadPool* pool, float* memory) {
  const MixerSegment seg{0, T, &st};
  mamba1_forward_segments(c, w, h, T, {&seg, 1}, s, out, pool, memory);
}

}  // namespace chimera::layers
