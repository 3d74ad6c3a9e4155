// Generic mixture-of-experts feed-forward block, shared by every MoE family
// (PhiMoE, Granite 4.0-H, ...):
//
//   s = router · x                     (ffn_gate_inp, [n_embd -> n_expert], optional bias)
//   (e_j, w_j)_{j<k} = route(s)        (a routing strategy: softmax top-k with or
//                                       without renormalisation, or sparsemixer)
//   y = Σ_j w_j · E_{e_j}(x)  [+ S(x)] E(x) = down(silu(gate·x) ⊙ up·x) on the
//                                       3-D ffn_{gate,up,down}_exps tensors; S is
//                                       the optional shared expert ffn_*_shexp
//
// Execution: all T tokens are routed first; then, for every expert that was
// chosen at least once, the rows that chose it are gathered and run as one
// GEMM per projection (kernels::matmul on a WeightView slice of the 3-D
// tensor). By default consecutive experts are collected into chunks of up to
// MoeScratch::fused_max_rows gathered rows; each chunk runs the gate and up
// projections of all its experts as ONE parallel job over their rows, then
// all down projections as a second one (kernels::grouped_matmul): 2 pool jobs
// per chunk instead of 3 per expert, and every thread busy across expert
// boundaries. Decode is one chunk; a 512-token prefill a few. Both paths give
// identical bits.
// Each (token, slot) result lands in its own row; the per-token combination
// runs afterwards in slot order j = 0..k-1 (then the shared expert), so the
// output does not depend on thread count, batch size or how tokens were
// grouped (matmul is row-independent).
//
// Routing is plain data in, data out (route_tokens / the per-strategy
// functions below) so it can be unit-tested against hand-computed results.
// Ties in the router logits go to the lowest expert index.
//
// Observation: an optional MoeObserver receives, per call and layer, the
// chosen experts and weights of every token; a null observer costs nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
#include "layers/linear.h"
#include "layers/mlp.h"
#include "layers/weights.h"

namespace chimera::layers {

// ---------------------------------------------------------------- routing

enum class MoeRouting {
  kSoftmaxTopK,   // p = softmax(s) over all experts; top-k of p; optional renormalisation to Σw = 1
  kSparseMixer,   // PhiMoE inference-time sparsemixer (top-2 only, no renormalisation)
};

struct RoutingParams {
  MoeRouting kind = MoeRouting::kSoftmaxTopK;
  int64_t n_expert = 0;
  int64_t k = 0;               // experts per token (sparsemixer: must be 2)
  bool renormalize = false;    // softmax top-k only: w /= Σ_j w_j
  float jitter_eps = 0.01f;    // sparsemixer: relative-gap threshold is 2·eps
  float weight_scale = 1.f;    // multiplies every final weight (1 = none)
};

// Routes one token: logits[n_expert] -> experts[k], weights[k] (slot order:
// best first). Strategy functions, one per MoeRouting value:
void route_softmax_topk(const float* logits, const RoutingParams& p, int32_t* experts, float* weights);
// Sparsemixer at inference (HF PhiMoE, training=False):
//   i1 = argmax s; keep_j = (s[i1]-s_j)/max(|s_j|, s[i1]) <= 2eps; w1 = softmax(kept s)[i1]
//   s' = s with s'[i1] = -inf; i2 = argmax s'; keep'_j = (s'[i2]-s_j)/max(|s_j|, s'[i2]) <= 2eps
//   (s_j the ORIGINAL logit, i1 never kept); w2 = softmax(kept' s')[i2].
void route_sparsemixer(const float* logits, const RoutingParams& p, int32_t* experts, float* weights);
// Dispatches on p.kind.
void route_token(const float* logits, const RoutingParams& p, int32_t* experts, float* weights);
// Validates a RoutingParams (k in range, sparsemixer k == 2, eps >= 0).
Status check_routing(const RoutingParams& p);

// ---------------------------------------------------------------- observer

// Receives the routing decisions of every MoE block call. `experts` and
// `weights` are [n_tokens][k] (slot order). Called from the thread that runs
// the forward pass, once per block call, after routing and before the experts
// run. Implementations must not retain the pointers. The observer is
// attached to the model, so every context running on it calls it, possibly
// from several threads at once: implementations must be thread-safe.
class MoeObserver {
 public:
  virtual ~MoeObserver() = default;
  virtual void on_routing(int64_t layer, int64_t n_tokens, int64_t k, int64_t n_expert, const int32_t* experts,
                          const float* weights) = 0;
};

// Mixin for models with MoE blocks: models::Model::moe() hands it out, and the
// CLI sets (or clears, with nullptr) the observer through it. Families keep
// the pointer in a std::atomic read once per forward micro-batch, so setting
// it while contexts run is not a data race (a running call keeps the observer
// it read; clear it only once no call can still be using the old one).
class MoeObservable {
 public:
  virtual ~MoeObservable() = default;
  virtual void set_moe_observer(MoeObserver* obs) = 0;
  // Per MoE layer index: bytes of one routed expert (gate + up + down slices),
  // for placement planning. Layers without MoE report 0.
  virtual std::vector<uint64_t> expert_bytes_per_layer() const = 0;
};

// ---------------------------------------------------------------- weights

// A 3-D expert tensor, ggml shape [cols, rows, n_expert]: expert e is the
// rows x cols matrix at data + e * expert_bytes.
struct ExpertTensor {
  kernels::WeightView base;  // rows/cols/row_bytes of one expert; data = expert 0
  int64_t n_expert = 0;
  size_t expert_bytes = 0;
  // Expert e's rows (base.packed, when set, is the whole tensor's packed copy).
  kernels::WeightView expert(int64_t e) const {
    kernels::WeightView all = base;
    all.rows = base.rows * n_expert;
    return all.rows_slice(e * base.rows, base.rows);
  }
};

// Binds a 3-D tensor [cols, rows, n_expert] with shape and type checks.
// With packs, the tensor is repacked for its kernel (kernels/repack.h).
Result<ExpertTensor> bind_expert_tensor(const format::GgufFile& g, const std::string& name, int64_t cols,
                                        int64_t rows, int64_t n_expert, kernels::PackedWeights* packs = nullptr);

struct MoeConfig {
  int64_t n_embd = 0;
  int64_t n_ff = 0;        // per-expert hidden size
  int64_t n_ff_shexp = 0;  // shared-expert hidden size (0: no shared expert)
  RoutingParams routing;
};

struct MoeWeights {
  Linear router;                        // <prefix>.ffn_gate_inp [n_embd -> n_expert]
  ExpertTensor gate, up, down;          // <prefix>.ffn_{gate,up,down}_exps
  GatedMlp shexp;                       // <prefix>.ffn_{gate,up,down}_shexp (when n_ff_shexp > 0)
  bool has_shexp() const { return shexp.up.present(); }
  uint64_t expert_bytes() const { return gate.expert_bytes + up.expert_bytes + down.expert_bytes; }
};

// Binds the router, the three expert tensors and (if c.n_ff_shexp > 0) the
// shared expert under `prefix` (a layer's tn::layer_prefix, format/gguf/
// tensor_names.h). Validates c.routing.
Result<MoeWeights> bind_moe(const WeightBinder& b, const format::GgufFile& g, const std::string& prefix,
                            const MoeConfig& c);

// Scratch for calls of up to max_tokens rows (reserve once at load; the
// forward pass does not allocate).
struct MoeScratch {
  AlignedBuffer<float> logits;   // [T][n_expert]
  AlignedBuffer<int32_t> experts;  // [T][k]
  AlignedBuffer<float> weights;  // [T][k]
  AlignedBuffer<int32_t> rows;   // gathered (token*k + slot) ids, grouped by expert
  AlignedBuffer<float> xg;       // gathered inputs [T*k][n_embd]
  AlignedBuffer<int32_t> pos;    // (token*k + slot) -> its row in the gathered order
  AlignedBuffer<float> g, u;     // [T*k][n_ff]
  AlignedBuffer<float> y;        // expert outputs in gathered order [T*k][n_embd]
  AlignedBuffer<float> ys;       // shared-expert output [T][n_embd]
  MlpScratch shexp;
  AlignedBuffer<uint8_t> packed;  // activation packing of the grouped path
  int64_t max_tokens = 0;
  // Gathered rows per grouped chunk (decode: one chunk; prefill: about
  // T*k / fused_max_rows chunks of two pool jobs each); 0 disables the grouped
  // path (tests compare the two paths). Set before reserve().
  int64_t fused_max_rows = 1024;
  int64_t packed_rows = 0;  // min(fused_max_rows, reserved T*k), set by reserve()
  int64_t grouped_rows() const { return packed_rows; }
  void reserve(const MoeConfig& c, int64_t max_tokens);
};

// out[T][n_embd] = MoE(h[T][n_embd]); T <= reserved max_tokens. out may alias
// h. `layer` is passed to the observer (may be null).
void moe_forward(const MoeConfig& c, const MoeWeights& w, const float* h, int64_t T, MoeScratch& s, float* out,
                 ThreadPool* pool, int64_t layer = 0, MoeObserver* observer = nullptr);

}  // namespace chimera::layers
