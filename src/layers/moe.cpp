// MoE block implementation: routing strategies, expert tensor binding, and the
// gather -> per-expert GEMM -> fixed-order combine forward pass. Invariant: an
// output row depends only on its own token's input (never on which other
// tokens shared its experts), which is what makes batch/step/chunk and any
// thread count agree bit for bit.
#include "layers/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "format/gguf/tensor_names.h"
#include "kernels/ops.h"

namespace chimera::layers {

namespace tn = format::tn;
namespace {

// Index of the largest value among those not excluded; lowest index on ties.
// Returns -1 when every value is excluded or NaN.
int32_t argmax_excluding(const float* s, int64_t n, int32_t excluded) {
  int32_t best = -1;
  for (int64_t j = 0; j < n; ++j) {
    if ((int32_t)j == excluded || std::isnan(s[j])) continue;
    if (best < 0 || s[j] > s[best]) best = (int32_t)j;
  }
  return best;
}

// Sparsemixer weight of expert `top` with maximum m = s[top]: softmax over the
// experts that pass the relative-gap test, evaluated at `top`. Arithmetic of
// the test is float32, as in the reference (torch fp32 ops, threshold cast to
// float32); `excluded` never takes part (it is -inf in the masked scores).
float sparsemixer_weight(const float* s, int64_t n, int32_t top, int32_t excluded, float two_eps) {
  const float m = s[top];
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    if ((int32_t)j == excluded) continue;
    const float factor = std::max(std::fabs(s[j]), m);
    const float r = (m - s[j]) / factor;
    if (r > two_eps) continue;  // masked (NaN compares false: kept, as in torch)
    sum += std::exp((double)s[j] - (double)m);
  }
  // The top expert always passes its own test (r = 0), so sum >= 1.
  return (float)(1.0 / sum);
}

}  // namespace

void route_softmax_topk(const float* logits, const RoutingParams& p, int32_t* experts, float* weights) {
  const int64_t n = p.n_expert;
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, logits[j]);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp((double)logits[j] - (double)m);
  // Selection on the logits is the same as on the probabilities (softmax is
  // monotonic) and keeps exact ties resolvable: lowest index first.
  for (int64_t slot = 0; slot < p.k; ++slot) {
    int32_t best = -1;
    for (int64_t j = 0; j < n; ++j) {
      bool taken = false;
      for (int64_t q = 0; q < slot; ++q) taken |= experts[q] == (int32_t)j;
      if (taken || std::isnan(logits[j])) continue;
      if (best < 0 || logits[j] > logits[best]) best = (int32_t)j;
    }
    if (best < 0) best = 0;  // all NaN: deterministic fallback
    experts[slot] = best;
    weights[slot] = (float)(std::exp((double)logits[best] - (double)m) / sum);
  }
  if (p.renormalize) {
    double wsum = 0.0;
    for (int64_t slot = 0; slot < p.k; ++slot) wsum += weights[slot];
    if (wsum > 0)
      for (int64_t slot = 0; slot < p.k; ++slot) weights[slot] = (float)(weights[slot] / wsum);
  }
  if (p.weight_scale != 1.f)
    for (int64_t slot = 0; slot < p.k; ++slot) weights[slot] *= p.weight_scale;
}

void route_sparsemixer(const float* logits, const RoutingParams& p, int32_t* experts, float* weights) {
  const int64_t n = p.n_expert;
  const float two_eps = 2.f * p.jitter_eps;
  int32_t i1 = argmax_excluding(logits, n, -1);
  if (i1 < 0) i1 = 0;
  int32_t i2 = argmax_excluding(logits, n, i1);
  if (i2 < 0) i2 = i1 == 0 ? 1 : 0;
  experts[0] = i1;
  experts[1] = i2;
  weights[0] = sparsemixer_weight(logits, n, i1, -1, two_eps) * p.weight_scale;
  weights[1] = sparsemixer_weight(logits, n, i2, i1, two_eps) * p.weight_scale;
}

void route_token(const float* logits, const RoutingParams& p, int32_t* experts, float* weights) {
  using Fn = void (*)(const float*, const RoutingParams&, int32_t*, float*);
  static constexpr Fn kTable[] = {route_softmax_topk, route_sparsemixer};  // indexed by MoeRouting
  kTable[(int)p.kind](logits, p, experts, weights);
}

Status check_routing(const RoutingParams& p) {
  if (p.n_expert < 1 || p.n_expert > (1 << 20))
    return invalid_argument("expert_count " + std::to_string(p.n_expert) + " is out of range");
  if (p.k < 1 || p.k > p.n_expert)
    return invalid_argument("expert_used_count " + std::to_string(p.k) + " must be in [1, expert_count = " +
                            std::to_string(p.n_expert) + "]");
  if (p.kind == MoeRouting::kSparseMixer && p.k != 2)
    return invalid_argument("sparsemixer routing selects exactly 2 experts (expert_used_count = " +
                            std::to_string(p.k) + ")");
  if (p.kind != MoeRouting::kSoftmaxTopK && p.kind != MoeRouting::kSparseMixer)
    return invalid_argument("unknown MoE routing strategy");
  if (!(p.jitter_eps >= 0.f) || !std::isfinite(p.weight_scale)) return invalid_argument("invalid routing parameters");
  return Status::ok();
}

Result<ExpertTensor> bind_expert_tensor(const format::GgufFile& g, const std::string& name, int64_t cols,
                                        int64_t rows, int64_t n_expert, kernels::PackedWeights* packs) {
  const format::GgufTensorInfo* t = g.find_tensor(name);
  if (!t) return not_found("missing tensor '" + name + "'");
  if (t->dim(0) != cols || t->dim(1) != rows || t->dim(2) != n_expert || t->dim(3) != 1)
    return invalid_argument("tensor '" + name + "' has shape " + t->shape_string() + ", expected [" +
                            std::to_string(cols) + ", " + std::to_string(rows) + ", " + std::to_string(n_expert) +
                            "]");
  CHIMERA_RETURN_IF_ERROR(kernels::check_matmul_type(t->type).with_context("tensor '" + name + "'"));
  ExpertTensor e;
  e.base.type = t->type;
  e.base.data = t->data;
  e.base.rows = rows;
  e.base.cols = cols;
  e.base.row_bytes = format::ggml_row_size(t->type, cols);
  e.n_expert = n_expert;
  e.expert_bytes = e.base.row_bytes * (size_t)rows;
  if (e.expert_bytes * (size_t)n_expert > t->n_bytes)
    return invalid_argument("tensor '" + name + "' is smaller than its shape requires");
  if (packs) {
    // Pack all experts as one matrix; expert(e) slices the copy.
    kernels::WeightView all = e.base;
    all.rows = rows * n_expert;
    if (packs->pack(all)) {
      e.base = all;
      e.base.rows = rows;
    }
  }
  return e;
}

Result<MoeWeights> bind_moe(const WeightBinder& b, const format::GgufFile& g, const std::string& p,
                            const MoeConfig& c) {
  CHIMERA_RETURN_IF_ERROR(check_routing(c.routing).with_context(p));
  if (c.n_embd < 1 || c.n_ff < 1 || c.n_ff_shexp < 0) return invalid_argument(p + ": invalid MoE sizes");
  const int64_t E = c.routing.n_expert;
  MoeWeights w;
  CHIMERA_ASSIGN_OR_RETURN(w.router, bind_linear(b, tn::linear(p, tn::kFfnGateInp), c.n_embd, E));
  CHIMERA_ASSIGN_OR_RETURN(w.gate, bind_expert_tensor(g, tn::in(p, tn::kFfnGateExps), c.n_embd, c.n_ff, E, b.packs()));
  CHIMERA_ASSIGN_OR_RETURN(w.up, bind_expert_tensor(g, tn::in(p, tn::kFfnUpExps), c.n_embd, c.n_ff, E, b.packs()));
  CHIMERA_ASSIGN_OR_RETURN(w.down, bind_expert_tensor(g, tn::in(p, tn::kFfnDownExps), c.n_ff, c.n_embd, E, b.packs()));
  if (c.n_ff_shexp > 0) {
    CHIMERA_ASSIGN_OR_RETURN(w.shexp.gate, bind_linear(b, tn::linear(p, tn::kFfnGateShexp), c.n_embd, c.n_ff_shexp));
    CHIMERA_ASSIGN_OR_RETURN(w.shexp.up, bind_linear(b, tn::linear(p, tn::kFfnUpShexp), c.n_embd, c.n_ff_shexp));
    CHIMERA_ASSIGN_OR_RETURN(w.shexp.down, bind_linear(b, tn::linear(p, tn::kFfnDownShexp), c.n_ff_shexp, c.n_embd));
  }
  return w;
}

void MoeScratch::reserve(const MoeConfig& c, int64_t T) {
  const int64_t E = c.routing.n_expert, k = c.routing.k;
  max_tokens = T;
  logits.resize((size_t)(T * E));
  experts.resize((size_t)(T * k));
  weights.resize((size_t)(T * k));
  rows.resize((size_t)(T * k));
  pos.resize((size_t)(T * k));
  xg.resize((size_t)(T * k * c.n_embd));
  g.resize((size_t)(T * k * c.n_ff));
  u.resize((size_t)(T * k * c.n_ff));
  y.resize((size_t)(T * k * c.n_embd));
  if (c.n_ff_shexp > 0) {
    ys.resize((size_t)(T * c.n_embd));
    shexp.reserve(c.n_ff_shexp, T);
  }
  // Packed activations are at most 4 bytes per value plus 64 bytes of row
  // padding; gate/up may pack every gathered row twice (different kernels).
  // A chunk holds at most fr rows in all (routed rows plus the shared
  // expert's T rows).
  const int64_t fr = std::min(fused_max_rows, T * (k + (c.n_ff_shexp > 0 ? 1 : 0)));
  packed_rows = fr;
  const int64_t ff_max = std::max(c.n_ff, c.n_ff_shexp);
  const size_t gate_up = 2 * (size_t)fr * ((size_t)c.n_embd * 4 + 64), down = (size_t)fr * ((size_t)ff_max * 4 + 64);
  packed.resize(fr > 0 ? std::max(gate_up, down) : 0);
}

namespace {

// One gated FFN on m rows: the gate/up/down weights, its input rows x
// (stride ldx) and where its gate, up and output rows go. A routed expert's
// rows are a contiguous range of the gathered buffers; the shared expert
// reads the block input h and writes s.shexp / s.ys.
struct Seg {
  kernels::WeightView gate, up, down;
  const float* x;
  int64_t m, ldx;
  float *g, *u;  // [m][ff]
  int64_t ff;
  float* y;      // [m][n_embd]
};

Seg routed_seg(const MoeConfig& c, const MoeWeights& w, int64_t e, int64_t i, int64_t m, MoeScratch& s) {
  const int64_t d = c.n_embd, ff = c.n_ff;
  return {w.gate.expert(e), w.up.expert(e), w.down.expert(e), s.xg.data() + i * d, m, d,
          s.g.data() + i * ff, s.u.data() + i * ff, ff, s.y.data() + i * d};
}

// One FFN alone, as three plain (internally parallel) matmuls.
void run_single(const MoeConfig& c, const Seg& q, ThreadPool* pool) {
  kernels::matmul(q.gate, q.x, q.m, q.ldx, q.g, q.ff, pool);
  kernels::matmul(q.up, q.x, q.m, q.ldx, q.u, q.ff, pool);
  kernels::silu_mul(q.g, q.u, q.g, q.m * q.ff);
  kernels::matmul(q.down, q.g, q.m, q.ff, q.y, c.n_embd, pool);
}

// Runs n FFNs as two grouped jobs: gate+up of all of them, SiLU·mul, then
// every down projection.
void run_chunk(const MoeConfig& c, const Seg* q, int64_t n, MoeScratch& s, ThreadPool* pool) {
  kernels::GroupedMatmulTask gu[kernels::kGroupedMatmulMaxTasks], dn[kernels::kGroupedMatmulMaxTasks / 2];
  for (int64_t i = 0; i < n; ++i) {
    gu[2 * i] = {q[i].gate, q[i].x, q[i].m, q[i].ldx, q[i].g, q[i].ff};
    gu[2 * i + 1] = {q[i].up, q[i].x, q[i].m, q[i].ldx, q[i].u, q[i].ff};
    dn[i] = {q[i].down, q[i].g, q[i].m, q[i].ff, q[i].y, c.n_embd};
  }
  const size_t cap = s.packed.size();
  if (kernels::grouped_matmul_scratch_bytes(gu, 2 * n) > cap || kernels::grouped_matmul_scratch_bytes(dn, n) > cap) {
    for (int64_t i = 0; i < n; ++i) run_single(c, q[i], pool);
    return;
  }
  kernels::grouped_matmul(gu, 2 * n, s.packed.data(), pool);
  for (int64_t i = 0; i < n; ++i) kernels::silu_mul(q[i].g, q[i].u, q[i].g, q[i].m * q[i].ff);
  kernels::grouped_matmul(dn, n, s.packed.data(), pool);
}

bool shexp_has_bias(const MoeWeights& w) {
  return w.shexp.gate.bias.present() || w.shexp.up.bias.present() || w.shexp.down.bias.present();
}

// Grouped execution: the shared expert (when it has no biases and its T rows
// fit) and then consecutive routed experts are collected into chunks of at
// most s.grouped_rows() rows (and kernels::kGroupedMatmulMaxTasks / 2 FFNs), each chunk
// run as two grouped jobs. Decode fits one chunk; a prefill of T tokens takes
// about T*(k+1) / fused_max_rows chunks instead of one pool job per expert
// projection. An FFN with more rows than a chunk holds runs alone through
// kernels::matmul (enough work for the pool by itself). Every y element is
// computed by the same kernel call either way, so all paths give equal bits.
// Returns false (nothing done) when the grouped path is disabled; sets
// *shexp_done when the shared expert's output is in s.ys.
bool run_experts_grouped(const MoeConfig& c, const MoeWeights& w, const float* h, int64_t T, const int32_t* ex,
                         const int32_t* rows, int64_t R, MoeScratch& s, ThreadPool* pool, bool* shexp_done) {
  const int64_t cap = s.grouped_rows();
  *shexp_done = false;
  if (cap <= 0) return false;
  constexpr int64_t kMaxSeg = kernels::kGroupedMatmulMaxTasks / 2;
  Seg seg[kMaxSeg];
  int64_t n_seg = 0, n_rows = 0;
  auto flush = [&] {
    if (n_seg > 0) run_chunk(c, seg, n_seg, s, pool);
    n_seg = n_rows = 0;
  };
  auto add = [&](const Seg& q) {
    if (q.m > cap) {
      run_single(c, q, pool);
      return;
    }
    if (n_seg == kMaxSeg || n_rows + q.m > cap) flush();
    seg[n_seg++] = q;
    n_rows += q.m;
  };
  if (w.has_shexp() && !shexp_has_bias(w)) {
    const int64_t ffs = c.n_ff_shexp;
    add({w.shexp.gate.w, w.shexp.up.w, w.shexp.down.w, h, T, c.n_embd, s.shexp.g.data(), s.shexp.u.data(), ffs,
         s.ys.data()});
    *shexp_done = true;
  }
  for (int64_t i = 0; i < R;) {
    const int64_t e = ex[rows[i]];
    int64_t j = i;
    while (j < R && ex[rows[j]] == e) ++j;
    add(routed_seg(c, w, e, i, j - i, s));
    i = j;
  }
  flush();
  return true;
}

}  // namespace

void moe_forward(const MoeConfig& c, const MoeWeights& w, const float* h, int64_t T, MoeScratch& s, float* out,
                 ThreadPool* pool, int64_t layer, MoeObserver* observer) {
  const int64_t d = c.n_embd, E = c.routing.n_expert, k = c.routing.k;
  const int64_t R = T * k;  // routed (token, slot) rows

  // 1. Router logits and per-token routing.
  w.router.apply(h, T, d, s.logits.data(), E, pool);
  int32_t* ex = s.experts.data();
  float* wt = s.weights.data();
  for (int64_t t = 0; t < T; ++t) route_token(s.logits.data() + t * E, c.routing, ex + t * k, wt + t * k);
  if (observer) observer->on_routing(layer, T, k, E, ex, wt);

  // 2. Group (token, slot) rows by expert (counting sort: stable, so rows of
  //    one expert stay in token order) and gather their inputs.
  int32_t* rows = s.rows.data();
  int32_t* pos = s.pos.data();
  int64_t n_at = 0;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = 0; r < R; ++r)
      if (ex[r] == e) {
        pos[r] = (int32_t)n_at;
        rows[n_at++] = (int32_t)r;
      }
  float* xg = s.xg.data();
  for (int64_t i = 0; i < R; ++i) std::memcpy(xg + i * d, h + (rows[i] / k) * d, (size_t)d * sizeof(float));

  // 3. Experts in chunks of grouped jobs (run_experts_grouped), or, with the
  //    grouped path disabled, one GEMM per used expert and projection.
  float* y = s.y.data();
  bool shexp_done = false;
  const bool grouped = run_experts_grouped(c, w, h, T, ex, rows, R, s, pool, &shexp_done);
  for (int64_t i = 0; i < R && !grouped;) {
    const int64_t e = ex[rows[i]];
    int64_t j = i;
    while (j < R && ex[rows[j]] == e) ++j;
    run_single(c, routed_seg(c, w, e, i, j - i, s), pool);
    i = j;
  }

  // 4. Shared expert (reads h, so it runs before out, which may alias h, is written).
  //    (Done in the grouped path unless it has biases or too many rows.)
  if (w.has_shexp() && !shexp_done) gated_mlp_forward(w.shexp, h, T, d, s.shexp, s.ys.data(), pool);

  // 5. Combine per token in slot order, then the shared expert.
  for (int64_t t = 0; t < T; ++t) {
    float* o = out + t * d;
    std::memset(o, 0, (size_t)d * sizeof(float));
    for (int64_t slot = 0; slot < k; ++slot) {
      const int64_t r = t * k + slot;
      kernels::axpy(wt[r], y + (int64_t)pos[r] * d, o, d);
    }
    if (w.has_shexp()) kernels::add(o, s.ys.data() + t * d, d);
  }
}

}  // namespace chimera::layers
