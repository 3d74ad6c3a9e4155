// BitNet b1.58 family as llama.cpp defines it (arch "bitnet", llm_build_bitnet)
// plus the squared-ReLU variant of Microsoft's BitNet b1.58 2B-4T conversions.
//
// One layer, x the residual stream (all f32; matmuls through the weight-type
// table, so TQ1_0/TQ2_0 weights multiply Q8_K-quantized activations exactly as
// llama.cpp's CPU build does):
//   h = rms_norm(x) * attn_norm
//   q, k, v = h·Wq (* attn_q.scale), h·Wk (* attn_k.scale), h·Wv (* attn_v.scale)
//   RoPE NEOX (rotate halves; llama.cpp's rope type for LLM_ARCH_BITNET — the
//   HF converter does not permute Q/K), causal GQA softmax attention
//   o = rms_norm(attn) * attn_sub_norm, then ·Wo (* attn_output.scale)
//   x += o
//   h = rms_norm(x) * ffn_norm
//   g = act(h·Wgate (* ffn_gate.scale)) ⊙ (h·Wup (* ffn_up.scale))
//   x += (rms_norm(g) * ffn_sub_norm)·Wdown (* ffn_down.scale)
// then output_norm and the lm-head (output.weight or tied token_embd).
// The per-tensor scales are the optional 1-element "<tensor>.scale" F32
// tensors llama.cpp's loader reads (wq_scale, ... ffn_down_scale); multiplying
// after the matmul matches its ggml_mul.
// Activation `act`: arch "bitnet" is SiLU (llama.cpp's graph: LLM_FFN_SILU,
// LLM_FFN_PAR; the architecture has no activation key). The published GGUF
// conversions of BitNet b1.58 2B-4T (microsoft/bitnet-b1.58-2B-4T-gguf, made by
// Microsoft's bitnet.cpp fork of llama.cpp) mark the model by its architecture
// name: "bitnet-b1.58" (LLM_ARCH_BITNET_B158; general.architecture of the
// published ggml-model-i2_s.gguf) or "bitnet-25" (LLM_ARCH_BITNET_25, the same
// fork's other name); both dispatch to build_bitnet_158, which passes
// LLM_FFN_RELU_SQR + LLM_FFN_PAR to its FFN builder: relu(gate)^2 * up, no
// activation key in the file. Both names load here
// with hyper-parameter keys under their own prefix; those files store weights
// as I2_S (ggml type 36), which the type table does not know, so they load only
// after re-quantizing to TQ1_0/TQ2_0.
// One layer loop over the segments of a fused micro-batch (continuous
// batching; a lone call is one segment): norms and every projection over the
// rows of all sequences (activations are quantized per row, so a row's result
// does not depend on its neighbours), RoPE / KV writes / attention per
// segment; the last layer's FFN runs only on rows whose logits are wanted.
// Precision/tolerance: f32 everywhere outside the matmuls; golden cases
// tiny-bitnet / tiny-bitnet-long hold llama.cpp logits to the quantized
// tolerance (0.03 x scale).
#include "core/thread_pool.h"
#include "format/gguf/tensor_names.h"
#include "kernels/ops.h"
#include "layers/attention_block.h"
#include "layers/linear.h"
#include "layers/weights.h"
#include "models/hparams.h"
#include "models/model.h"
#include "models/tensor_table.h"
#include "models/transformer_util.h"

namespace chimera::models {

namespace tn = format::tn;
namespace {

enum class FfnAct { kSilu, kReluSqr };

struct ScaledLinear {
  layers::Linear lin;
  float scale = 1.f;
  bool has_scale = false;
  void apply(const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy, ThreadPool* pool) const {
    lin.apply(x, m, ldx, y, ldy, pool);
    rescale(y, m, ldy);
  }
  // The per-tensor scale on y[m][out] after lin's matmul (apply_same_input).
  void rescale(float* y, int64_t m, int64_t ldy) const {
    if (has_scale)
      for (int64_t i = 0; i < m; ++i) kernels::scale(y + i * ldy, scale, lin.out());
  }
};

Result<ScaledLinear> bind_scaled(const layers::WeightBinder& b, const std::string& name, int64_t in, int64_t out) {
  ScaledLinear s;
  CHIMERA_ASSIGN_OR_RETURN(s.lin, layers::bind_linear(b, name, in, out));
  CHIMERA_ASSIGN_OR_RETURN(layers::Vec sc, b.optional_vector(name + ".scale", 1));
  if (sc.present()) {
    s.has_scale = true;
    s.scale = sc.ptr()[0];
  }
  return s;
}

struct BitnetLayer {
  layers::Vec attn_norm, attn_sub_norm, ffn_norm, ffn_sub_norm;
  ScaledLinear wq, wk, wv, wo, gate, up, down;
};

// Per-context scratch (Model::new_scratch), kMaxUbatch rows each.
struct BitnetScratch final : ModelScratch {
  Workspace ws;
  AlignedBuffer<float> q, k, v, attn, g, u, logits;
  AlignedBuffer<uint8_t> packed_act;  // apply_same_input's packed activations
};

class BitnetModel final : public MicroBatchedModel {
 public:
  BitnetModel(std::string arch, FfnAct act) : arch_(std::move(arch)), act_(act) {}

  std::vector<layers::LayerStateSpec> state_specs() const override {
    return std::vector<layers::LayerStateSpec>(layers_.size(), attn_cfg_.kv_spec());
  }
  bool reads_typed_kv() const override { return true; }  // attention via layers::attention_core

  Result<layers::DeclaredShapes> plan(const format::GgufFile& g) {
    HParams hp(g, arch_);
    CHIMERA_ASSIGN_OR_RETURN(n_embd_, hp.count("embedding_length", 1 << 20));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, hp.count("block_count", 4096));
    CHIMERA_ASSIGN_OR_RETURN(n_ff_, hp.count("feed_forward_length", 1 << 22));
    CHIMERA_ASSIGN_OR_RETURN(n_head_, hp.count("attention.head_count", 1 << 14));
    n_head_kv_ = hp.count_or("attention.head_count_kv", n_head_);
    if (n_head_kv_ < 1 || n_head_ % n_head_kv_ != 0) return invalid_argument("head_count must be a multiple of head_count_kv");
    CHIMERA_ASSIGN_OR_RETURN(const HeadDims heads, read_head_dims(hp, n_embd_, n_head_, n_head_kv_, 0));
    head_dim_ = heads.k;
    if (heads.v != heads.k) return invalid_argument("unsupported attention head sizes (value_length != key_length)");
    eps_ = hp.real_or("attention.layer_norm_rms_epsilon", 1e-5f);
    info_.n_ctx_train = hp.count_or("context_length", 2048);
    info_.n_layer = n_layer;
    info_.n_embd = n_embd_;
    CHIMERA_ASSIGN_OR_RETURN(const int64_t n_rot, read_rope_dims(hp, head_dim_));
    attn_cfg_.n_embd = n_embd_;
    attn_cfg_.n_head = n_head_;
    attn_cfg_.n_head_kv = n_head_kv_;
    attn_cfg_.head_dim = attn_cfg_.head_dim_v = head_dim_;
    CHIMERA_ASSIGN_OR_RETURN(attn_cfg_.rope, read_rope(hp, kernels::RopeMode::kNeox, n_rot, info_.n_ctx_train));

    // Names and shapes: the tensor table (bitnet_tensors.cpp), checked against the file first.
    TableParams tp(n_layer);
    CHIMERA_ASSIGN_OR_RETURN(const int64_t n_vocab, embedding_rows(g));
    tp.set("n_embd", n_embd_), tp.set("n_vocab", n_vocab), tp.set("n_ff", n_ff_);
    tp.set("n_head", n_head_), tp.set("n_head_kv", n_head_kv_), tp.set("head_dim", head_dim_);
    info_.derived = hp.notes();
    return declare_tensors(arch_, tp, g);
  }

  Status bind(const format::GgufFile& g, const layers::DeclaredShapes& declared) {
    layers::WeightBinder b(g, &packed_, &declared);
    CHIMERA_RETURN_IF_ERROR(bind_embeddings(b, g, n_embd_, &embd_));
    info_.n_vocab = embd_.output.rows;
    const int64_t nq = n_head_ * head_dim_, nkv = n_head_kv_ * head_dim_;
    layers_.resize((size_t)info_.n_layer);
    for (int64_t i = 0; i < info_.n_layer; ++i) {
      const std::string p = tn::layer_prefix(i);
      BitnetLayer& L = layers_[(size_t)i];
      CHIMERA_ASSIGN_OR_RETURN(L.attn_norm, b.vector(tn::at(tn::kAttnNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.attn_sub_norm, b.vector(tn::at(tn::kAttnSubNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.ffn_norm, b.vector(tn::at(tn::kFfnNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.ffn_sub_norm, b.vector(tn::at(tn::kFfnSubNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.wq, bind_scaled(b, tn::linear(p, tn::kAttnQ), n_embd_, nq));
      CHIMERA_ASSIGN_OR_RETURN(L.wk, bind_scaled(b, tn::linear(p, tn::kAttnK), n_embd_, nkv));
      CHIMERA_ASSIGN_OR_RETURN(L.wv, bind_scaled(b, tn::linear(p, tn::kAttnV), n_embd_, nkv));
      CHIMERA_ASSIGN_OR_RETURN(L.wo, bind_scaled(b, tn::linear(p, tn::kAttnOutput), nq, n_embd_));
      CHIMERA_ASSIGN_OR_RETURN(L.gate, bind_scaled(b, tn::linear(p, tn::kFfnGate), n_embd_, n_ff_));
      CHIMERA_ASSIGN_OR_RETURN(L.up, bind_scaled(b, tn::linear(p, tn::kFfnUp), n_embd_, n_ff_));
      CHIMERA_ASSIGN_OR_RETURN(L.down, bind_scaled(b, tn::linear(p, tn::kFfnDown), n_ff_, n_embd_));
    }
    info_.weight_bytes = g.tensor_bytes();
    return Status::ok();
  }

  std::unique_ptr<ModelScratch> new_scratch() const override {
    auto s = std::make_unique<BitnetScratch>();
    const int64_t nq = n_head_ * head_dim_, nkv = n_head_kv_ * head_dim_;
    s->ws.n_embd = n_embd_;
    s->q.resize((size_t)(kMaxUbatch * nq));
    s->k.resize((size_t)(kMaxUbatch * nkv));
    s->v.resize((size_t)(kMaxUbatch * nkv));
    s->attn.resize((size_t)(kMaxUbatch * nq));
    s->g.resize((size_t)(kMaxUbatch * n_ff_));
    s->u.resize((size_t)(kMaxUbatch * n_ff_));
    return s;
  }

 private:

  // Attention of every span of a fused micro-batch: q/k/v (each times its
  // per-tensor scale) and the output projection over all rows; RoPE, the K/V
  // writes and the attention kernel per sequence (layers::attention_core);
  // attn_sub_norm before the output projection.
  void attention(BitnetScratch& s, const BitnetLayer& L, const float* h,
                 std::span<const layers::AttentionSpan> spans, int64_t rows, size_t layer, float* out,
                 ThreadPool* pool) const {
    const int64_t nq = n_head_ * head_dim_, nkv = n_head_kv_ * head_dim_;
    float* q = s.q.data();
    float* k = s.k.data();
    float* v = s.v.data();
    float* attn = s.attn.data();
    layers::apply_same_input({{&L.wq.lin, q, nq}, {&L.wk.lin, k, nkv}, {&L.wv.lin, v, nkv}}, h, rows, n_embd_,
                             s.packed_act, pool);
    L.wq.rescale(q, rows, nq);
    L.wk.rescale(k, rows, nkv);
    L.wv.rescale(v, rows, nkv);
    layers::attention_core(attn_cfg_, q, k, v, spans, layer, attn, pool);
    for (int64_t t = 0; t < rows; ++t) kernels::rms_norm(attn + t * nq, L.attn_sub_norm.ptr(), attn + t * nq, nq, eps_);
    L.wo.apply(attn, rows, nq, out, n_embd_, pool);
  }

  void ffn(BitnetScratch& s, const BitnetLayer& L, const float* h, int64_t T, float* out, ThreadPool* pool) const {
    float* gt = s.g.data();
    float* up = s.u.data();
    layers::apply_same_input({{&L.gate.lin, gt, n_ff_}, {&L.up.lin, up, n_ff_}}, h, T, n_embd_, s.packed_act, pool);
    L.gate.rescale(gt, T, n_ff_);
    L.up.rescale(up, T, n_ff_);
    // The activation and the sub-norm, row by row on the pool (element-wise, so
    // the same bits for every split).
    parallel_range(pool, T, 1, [&](int64_t t0, int64_t t1) {
      float* g = gt + t0 * n_ff_;
      const float* u = up + t0 * n_ff_;
      if (act_ == FfnAct::kSilu) kernels::silu_mul(g, u, g, (t1 - t0) * n_ff_);
      else kernels::relu_sqr_mul(g, u, g, (t1 - t0) * n_ff_);
      for (int64_t t = t0; t < t1; ++t) kernels::rms_norm(gt + t * n_ff_, L.ffn_sub_norm.ptr(), gt + t * n_ff_, n_ff_, eps_);
    });
    L.down.apply(gt, T, n_ff_, out, n_embd_, pool);
  }

  // Norms, projections and the FFN over the rows of all segments; attention
  // per segment (see attention()). The last layer's FFN runs only on the rows
  // whose logits are wanted.
  void ubatch_segments(ModelScratch& scratch, std::span<const Segment> segs, int64_t rows,
                       ThreadPool* pool) const override {
    BitnetScratch& s = static_cast<BitnetScratch&>(scratch);
    s.ws.reserve(rows);
    float* x = s.ws.x.data();
    float* h = s.ws.h.data();
    embed_segments(embd_.tok, segs, x);
    const std::vector<layers::AttentionSpan> spans = attention_spans(segs);
    OutputSegments kept;
    for (size_t l = 0; l < layers_.size(); ++l) {
      const BitnetLayer& L = layers_[l];
      for (int64_t t = 0; t < rows; ++t) kernels::rms_norm(x + t * n_embd_, L.attn_norm.ptr(), h + t * n_embd_, n_embd_, eps_);
      attention(s, L, h, spans, rows, l, h, pool);
      kernels::add(x, h, rows * n_embd_);
      int64_t n = rows;
      if (l + 1 == layers_.size()) {
        kept = keep_output_segments(segs, {{x, n_embd_}});
        if ((n = kept.rows) == 0) break;
      }
      for (int64_t t = 0; t < n; ++t) kernels::rms_norm(x + t * n_embd_, L.ffn_norm.ptr(), h + t * n_embd_, n_embd_, eps_);
      ffn(s, L, h, n, h, pool);
      kernels::add(x, h, n * n_embd_);
    }
    advance_segments(segs);
    write_logits_segments(embd_, x, kept.segs, n_embd_, eps_, s.ws, s.logits, pool);
  }

  std::string arch_;
  FfnAct act_;
  int64_t n_embd_ = 0, n_ff_ = 0, n_head_ = 0, n_head_kv_ = 0, head_dim_ = 0;
  float eps_ = 1e-5f;
  layers::AttentionConfig attn_cfg_;  // causal, scale 1/sqrt(head_dim), NEOX RoPE
  Embeddings embd_;
  std::vector<BitnetLayer> layers_;
};

Result<std::unique_ptr<Model>> load_as(const format::GgufFile& gguf, const char* arch, FfnAct act) {
  return init_model(std::make_unique<BitnetModel>(arch, act), gguf);
}

}  // namespace

Result<std::unique_ptr<Model>> load_bitnet_llama2c(const format::GgufFile& gguf);  // models/bitnet_llama2c.cpp

// Arch "bitnet". Metadata switches (chimera's own keys, absent in llama.cpp's
// files): bitnet.bitlinear = "absmax-int8" selects the llama2.c BitLinear
// semantics (models/bitnet_llama2c.cpp; written by `convert --from
// bitnet-llama2c`); bitnet.ffn_activation = "relu2" selects the squared-ReLU
// FFN (for 2B-4T weights re-packed under arch "bitnet").
bool bitnet_uses_llama2c_bitlinear(const format::GgufFile& gguf) {
  const auto v = gguf.get_string("bitnet.bitlinear");
  return v && *v == "absmax-int8";
}

Result<std::unique_ptr<Model>> load_bitnet(const format::GgufFile& gguf) {
  if (bitnet_uses_llama2c_bitlinear(gguf)) return load_bitnet_llama2c(gguf);
  const auto act = gguf.get_string("bitnet.ffn_activation");
  return load_as(gguf, "bitnet", act && *act == "relu2" ? FfnAct::kReluSqr : FfnAct::kSilu);
}
// Microsoft's BitNet b1.58 2B-4T conversions (registry entries "bitnet-b1.58"
// and "bitnet-25"; fixture: tests/models/bitnet_arch_test.cpp rewrites
// tiny-bitnet under these names).
Result<std::unique_ptr<Model>> load_bitnet_b158(const format::GgufFile& gguf) {
  return load_as(gguf, "bitnet-b1.58", FfnAct::kReluSqr);
}
Result<std::unique_ptr<Model>> load_bitnet_25(const format::GgufFile& gguf) {
  return load_as(gguf, "bitnet-25", FfnAct::kReluSqr);
}

}  // namespace chimera::models
