// Mamba-2 mixer implementation (see mamba2.h).
#include "layers/mamba2.h"

#include "format/gguf/tensor_names.h"
#include "kernels/ssm.h"

namespace chimera::layers {

namespace tn = format::tn;

Status Mamba2Config::validate() const {
  if (n_embd < 1 || d_inner < 1 || d_state < 1 || d_conv < 1 || n_head < 1 || n_group < 1)
    return invalid_argument("invalid Mamba-2 sizes");
  if (d_inner % n_head != 0)
    return invalid_argument("ssm.inner_size (" + std::to_string(d_inner) + ") must be a multiple of ssm.time_step_rank (" +
                            std::to_string(n_head) + ")");
  if (n_head % n_group != 0 || d_inner % n_group != 0)
    return invalid_argument("ssm.group_count (" + std::to_string(n_group) + ") must divide the head count (" +
                            std::to_string(n_head) + ") and ssm.inner_size");
  return Status::ok();
}

Result<Mamba2Weights> bind_mamba2(const WeightBinder& b, const format::GgufFile& g, const std::string& p,
                                  const Mamba2Config& c, bool conv_bias_optional) {
  CHIMERA_RETURN_IF_ERROR(c.validate());
  Mamba2Weights w;
  const int64_t H = c.n_head;
  CHIMERA_ASSIGN_OR_RETURN(w.in, bind_linear(b, tn::linear(p, tn::kSsmIn), c.n_embd, c.d_in_proj()));
  CHIMERA_ASSIGN_OR_RETURN(w.conv, bind_conv1d(g, p, c.conv_dim(), c.d_conv, conv_bias_optional));
  CHIMERA_ASSIGN_OR_RETURN(w.dt_bias, bind_f32_tensor(g, tn::in(p, tn::kSsmDtBias), {H}));
  CHIMERA_ASSIGN_OR_RETURN(w.A, bind_f32_tensor(g, tn::in(p, tn::kSsmA), {1, H}));
  CHIMERA_ASSIGN_OR_RETURN(w.D, bind_f32_tensor(g, tn::in(p, tn::kSsmD), {1, H}));
  CHIMERA_ASSIGN_OR_RETURN(w.norm, bind_f32_tensor(g, tn::in(p, tn::kSsmNorm), {c.d_inner / c.n_group, c.n_group}));
  CHIMERA_ASSIGN_OR_RETURN(w.out, bind_linear(b, tn::linear(p, tn::kSsmOut), c.d_inner, c.n_embd));
  return w;
}

void Mamba2Scratch::reserve(const Mamba2Config& c, int64_t T) {
  zxbcdt.resize((size_t)(T * c.d_in_proj()));
  xbc.resize((size_t)(T * c.conv_dim()));
  y.resize((size_t)(T * c.d_inner));
}

void mamba2_forward_segments(const Mamba2Config& c, const Mamba2Weights& w, const float* h, int64_t rows,
                             std::span<const MixerSegment> segs, Mamba2Scratch& s, float* out, ThreadPool* pool) {
  const int64_t DI = c.d_inner, N = c.d_state, G = c.n_group, H = c.n_head, P = c.head_dim();
  const int64_t CD = c.conv_dim(), LD = c.d_in_proj();
  float* zx = s.zxbcdt.data();
  float* xbc = s.xbc.data();
  float* y = s.y.data();
  // Projection of every row: [z | xBC | dt].
  w.in.apply(h, rows, c.n_embd, zx, LD, pool);
  // Per sequence: causal conv on its own conv state (one pool job for all).
  parallel_range(pool, CD, 16, [&](int64_t c0, int64_t c1) {
    for (const MixerSegment& sg : segs)
      kernels::conv1d_causal(zx + sg.row * LD + DI, LD, sg.T, w.conv.w.ptr(), w.conv.b.ptr(), CD, c.d_conv,
                             sg.state->conv(), xbc + sg.row * CD, CD, true, c0, c1);
  });
  // Per sequence: scan on its own SSM state, SSD or sequential by its own T.
  parallel_range(pool, H, 1, [&](int64_t h0, int64_t h1) {
    for (const MixerSegment& sg : segs) {
      const float* xs = xbc + sg.row * CD;
      kernels::Scan2Args a;
      a.T = sg.T, a.H = H, a.P = P, a.N = N, a.G = G;
      a.x = xs, a.ldx = CD, a.dt = zx + sg.row * LD + DI + CD, a.lddt = LD, a.dt_bias = w.dt_bias.ptr();
      a.A = w.A.ptr(), a.B = xs + DI, a.C = xs + DI + G * N, a.ldbc = CD, a.d_skip = w.D.ptr();
      a.state = sg.state->ssm(), a.y = y + sg.row * DI, a.ldy = DI;
      if (sg.T >= c.ssd_min_tokens)
        kernels::ssd_chunked(a, c.ssd_chunk, h0, h1);
      else
        kernels::ssm_scan2(a, h0, h1);
    }
  });
  // Gate, grouped norm and output projection of every row.
  parallel_range(pool, rows, 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      kernels::gated_group_rms_norm(y + t * DI, zx + t * LD, w.norm.ptr(), DI, DI / G, c.eps);
  });
  w.out.apply(y, rows, DI, out, c.n_embd, pool);
}

void mamba2_forward(const Mamba2Config& c, const Mamba2Weights& w, const float* h, int64_t T, RecurrentState& st,
                    Mamba2Scratch& s, float* out, ThreadPool* pool) {
  const MixerSegment seg{0, T, &st};
  mamba2_forward_segments(c, w, h, T, {&seg, 1}, s, out, pool);
}

}  // namespace chimera::layers
