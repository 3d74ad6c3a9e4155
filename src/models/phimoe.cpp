// PhiMoE family (arch "phimoe": Phi-3.5-MoE, Phi-tiny-MoE) loaded from GGUF
// files as llama.cpp writes them, computed with the Hugging Face semantics
// (not llama.cpp's approximation):
//   * every norm is a LayerNorm with bias (eps = attention.layer_norm_rms_epsilon,
//     a misleading key name kept from the HF config field);
//   * attention with q/k/v/o biases, GQA, rotate-half (NEOX) RoPE, causal;
//     an `attention.sliding_window` key, when present, limits each query to the
//     last W keys (HF Mixtral lineage);
//   * MoE FFN routed by sparsemixer as at inference (top-2, no renormalisation,
//     jitter eps 0.01, which the GGUF does not store), via layers/moe;
//   * lm-head with bias after the final LayerNorm.
// LongRoPE: when rope_factors_short / rope_factors_long are present, a call
// whose sequence length (last position + 1) exceeds the original context uses
// the long factors, otherwise the short ones (HF picks by current length);
// cos/sin are multiplied by the attention factor, read from
// rope.scaling.{short,long}_mscale when the file carries them (HF config
// values), else rope.scaling.attn_factor (what llama.cpp's converter writes),
// else 1. Invariant: rows computed before a switch keep the factors they were
// computed with (HF instead re-encodes the prefix once; see docs/EXPERTS.md).
#include <atomic>
#include <cmath>

#include "layers/attention_block.h"
#include "layers/moe.h"
#include "layers/weights.h"
#include "models/hparams.h"
#include "models/model.h"
#include "models/tensor_table.h"
#include "models/transformer_util.h"

namespace chimera::models {
namespace {

struct PhiMoeLayer {
  layers::Vec attn_norm, attn_norm_b, ffn_norm, ffn_norm_b;
  layers::AttentionWeights attn;
  layers::MoeWeights moe;
};

// Per-context scratch (Model::new_scratch).
struct PhiMoeScratch final : ModelScratch {
  Workspace ws;
  layers::AttentionScratch attn;
  std::vector<layers::AttentionConfig> seg_cfg;  // per segment of a micro-batch
  AlignedBuffer<float> logits;
  layers::MoeScratch moe;
};

class PhiMoeModel final : public MicroBatchedModel, public layers::MoeObservable {
 public:
  bool reads_typed_kv() const override { return true; }  // attention via layers::attention_forward
  std::vector<layers::LayerStateSpec> state_specs() const override {
    return std::vector<layers::LayerStateSpec>(layers_.size(), attn_cfg_.kv_spec());
  }

  layers::MoeObservable* moe() override { return this; }
  void set_moe_observer(layers::MoeObserver* obs) override { observer_.store(obs, std::memory_order_release); }
  std::vector<uint64_t> expert_bytes_per_layer() const override {
    std::vector<uint64_t> v;
    for (const PhiMoeLayer& L : layers_) v.push_back(L.moe.expert_bytes());
    return v;
  }

  Result<layers::DeclaredShapes> plan(const format::GgufFile& g) {
    HParams hp(g, "phimoe");
    CHIMERA_ASSIGN_OR_RETURN(n_embd_, hp.count("embedding_length", 1 << 20));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, hp.count("block_count", 4096));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, hp.count("feed_forward_length", 1 << 22));
    n_ff = hp.count_or("expert_feed_forward_length", n_ff);
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_expert, hp.count("expert_count", 1 << 16));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_used, hp.count("expert_used_count", 1 << 16));
    // Phi-tiny-MoE has an explicit head_dim (q width != n_embd): key_length is honoured.
    CHIMERA_ASSIGN_OR_RETURN(const AttentionGeometry geo, read_attention_geometry(hp, n_embd_));
    const int64_t n_head = geo.n_head, n_head_kv = geo.n_head_kv, head_dim = geo.head_dim, head_dim_v = geo.head_dim_v;
    eps_ = hp.real_or("attention.layer_norm_rms_epsilon", 1e-5f);
    if (!(eps_ > 0.f) || !std::isfinite(eps_)) return invalid_argument("phimoe: invalid layer-norm epsilon");
    info_.n_ctx_train = hp.count_or("context_length", 4096);
    info_.n_layer = n_layer;
    info_.n_embd = n_embd_;

    attn_cfg_.n_embd = n_embd_;
    attn_cfg_.n_head = n_head;
    attn_cfg_.n_head_kv = n_head_kv;
    attn_cfg_.head_dim = head_dim;
    attn_cfg_.head_dim_v = head_dim_v;
    attn_cfg_.window = std::max<int64_t>(0, hp.count_or("attention.sliding_window", 0));
    if (attn_cfg_.window >= info_.n_ctx_train) attn_cfg_.window = 0;  // never binding
    CHIMERA_ASSIGN_OR_RETURN(const int64_t n_rot, read_rope_dims(hp, head_dim));
    CHIMERA_ASSIGN_OR_RETURN(attn_cfg_.rope, read_rope(hp, kernels::RopeMode::kNeox, n_rot, info_.n_ctx_train));

    // Names and shapes: the tensor table (phimoe_tensors.cpp), checked against the file first.
    TableParams tp(n_layer);
    CHIMERA_ASSIGN_OR_RETURN(const int64_t n_vocab, embedding_rows(g));
    tp.set("n_embd", n_embd_), tp.set("n_vocab", n_vocab), tp.set("n_ff", n_ff), tp.set("n_expert", n_expert);
    tp.set("n_head", n_head), tp.set("n_head_kv", n_head_kv), tp.set("head_dim", head_dim);
    tp.set("head_dim_v", head_dim_v), tp.set("n_rot", n_rot);
    moe_cfg_.n_embd = n_embd_;
    moe_cfg_.n_ff = n_ff;
    moe_cfg_.routing.kind = layers::MoeRouting::kSparseMixer;
    moe_cfg_.routing.n_expert = n_expert;
    moe_cfg_.routing.k = n_used;
    moe_cfg_.routing.jitter_eps = 0.01f;  // HF router_jitter_noise default; not stored in GGUF
    CHIMERA_RETURN_IF_ERROR(layers::check_routing(moe_cfg_.routing).with_context("phimoe"));
    info_.derived = hp.notes();
    return declare_tensors("phimoe", tp, g);
  }

  Status bind(const format::GgufFile& g, const layers::DeclaredShapes& declared) {
    HParams hp(g, "phimoe");
    layers::WeightBinder b(g, &packed_, &declared);
    CHIMERA_RETURN_IF_ERROR(bind_embeddings(b, g, n_embd_, &embd_));
    info_.n_vocab = embd_.output.rows;
    if (!embd_.output_norm_b.present()) return not_found("missing tensor 'output_norm.bias' (phimoe LayerNorm)");
    CHIMERA_RETURN_IF_ERROR(bind_longrope(b, hp));

    layers_.resize((size_t)info_.n_layer);
    for (int64_t i = 0; i < info_.n_layer; ++i) {
      const std::string p = tn::layer_prefix(i);
      PhiMoeLayer& L = layers_[(size_t)i];
      CHIMERA_ASSIGN_OR_RETURN(L.attn_norm, b.vector(tn::at(tn::kAttnNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.attn_norm_b, b.vector(tn::at(tn::kAttnNormBias, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.ffn_norm, b.vector(tn::at(tn::kFfnNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.ffn_norm_b, b.vector(tn::at(tn::kFfnNormBias, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.attn, layers::bind_attention(b, p, attn_cfg_));
      CHIMERA_ASSIGN_OR_RETURN(L.moe, layers::bind_moe(b, g, p, moe_cfg_));
    }
    info_.weight_bytes = g.tensor_bytes();  // all weights, as the field documents (decode reads k/E of the experts)
    for (const std::string& n : hp.notes()) info_.derived.push_back(n);
    return Status::ok();
  }

  std::unique_ptr<ModelScratch> new_scratch() const override {
    auto s = std::make_unique<PhiMoeScratch>();
    s->ws.n_embd = n_embd_;
    s->attn.reserve(attn_cfg_, kMaxUbatch);
    s->moe.reserve(moe_cfg_, kMaxUbatch);
    return s;
  }

 private:
  Status bind_longrope(const layers::WeightBinder& b, const HParams& hp) {
    CHIMERA_ASSIGN_OR_RETURN(rope_long_, b.optional_vector(tn::kRopeFactorsLong));
    CHIMERA_ASSIGN_OR_RETURN(rope_short_, b.optional_vector(tn::kRopeFactorsShort));
    if (rope_long_.present() != rope_short_.present())
      return invalid_argument("phimoe LongRoPE needs both rope_factors_long and rope_factors_short");
    if (!rope_long_.present()) return Status::ok();
    for (size_t i = 0; i < rope_long_.data.size(); ++i)
      if (!(rope_long_.data[i] > 0.f) || !(rope_short_.data[i] > 0.f) || !std::isfinite(rope_long_.data[i]) ||
          !std::isfinite(rope_short_.data[i]))
        return invalid_argument("phimoe LongRoPE factors must be positive and finite");
    n_ctx_orig_ = hp.count_or("rope.scaling.original_context_length", info_.n_ctx_train);
    const float attn_factor = hp.real_or("rope.scaling.attn_factor", 1.f);
    mscale_short_ = hp.real_or("rope.scaling.short_mscale", attn_factor);
    mscale_long_ = hp.real_or("rope.scaling.long_mscale", attn_factor);
    if (!(mscale_short_ > 0.f) || !(mscale_long_ > 0.f) || n_ctx_orig_ < 1)
      return invalid_argument("phimoe LongRoPE: invalid attention factor or original context");
    attn_cfg_.rope.freq_scale = 1.f;
    attn_cfg_.rope.ext_factor = 0.f;
    return Status::ok();
  }

  void layer_norm_rows(const float* x, const layers::Vec& w, const layers::Vec& bias, float* y, int64_t T) const {
    for (int64_t t = 0; t < T; ++t)
      kernels::layer_norm(x + t * n_embd_, w.ptr(), bias.ptr(), y + t * n_embd_, n_embd_, eps_);
  }

  // The attention config of a forward call that reaches sequence length
  // `len`: LongRoPE takes the long factors past the original context.
  layers::AttentionConfig call_config(int64_t len) const {
    layers::AttentionConfig cfg = attn_cfg_;
    if (rope_long_.present()) {
      const bool is_long = len > n_ctx_orig_;
      cfg.rope.freq_factors = is_long ? rope_long_.ptr() : rope_short_.ptr();
      cfg.rope.attn_factor = is_long ? mscale_long_ : mscale_short_;
    }
    return cfg;
  }

  // One micro-batch of segments (one per sequence): norms, attention
  // projections and the MoE on all rows; RoPE, KV writes and attention per
  // segment with the factors of its sequence's forward call. The last layer's
  // MoE runs only on rows that need logits (not while expert statistics are
  // collected: they count every routed token).
  void ubatch_segments(ModelScratch& scratch, std::span<const Segment> segs, int64_t rows,
                       ThreadPool* pool) const override {
    PhiMoeScratch& s = static_cast<PhiMoeScratch&>(scratch);
    layers::MoeObserver* const observer = observer_.load(std::memory_order_acquire);
    s.ws.reserve(rows);
    float* x = s.ws.x.data();
    float* h = s.ws.h.data();
    embed_segments(embd_.tok, segs, x);
    s.seg_cfg.clear();
    for (const Segment& sg : segs)  // the call began at n_past - offset and reaches n_past - offset + n
      s.seg_cfg.push_back(call_config(sg.state().n_past() - sg.offset + sg.item->n));
    std::vector<OutputRow> out = output_rows(segs, embd_.output.rows);
    const std::vector<layers::AttentionSpan> spans = attention_spans(segs, s.seg_cfg);
    int64_t n = rows;
    for (size_t l = 0; l < layers_.size(); ++l) {
      const PhiMoeLayer& L = layers_[l];
      layer_norm_rows(x, L.attn_norm, L.attn_norm_b, h, rows);
      layers::attention_forward(attn_cfg_, L.attn, h, rows, spans, l, s.attn, h, pool);
      kernels::add(x, h, rows * n_embd_);
      if (l + 1 == layers_.size() && !observer && (n = keep_output_rows(x, out, n_embd_)) == 0) break;
      layer_norm_rows(x, L.ffn_norm, L.ffn_norm_b, h, n);
      layers::moe_forward(moe_cfg_, L.moe, h, n, s.moe, h, pool, (int64_t)l, observer);
      kernels::add(x, h, n * n_embd_);
    }
    advance_segments(segs);
    write_logits_rows(embd_, x, out, n_embd_, eps_, s.ws, s.logits, pool, FinalNorm::kLayer);
  }

  int64_t n_embd_ = 0;
  float eps_ = 1e-5f;
  layers::AttentionConfig attn_cfg_;
  layers::MoeConfig moe_cfg_;
  Embeddings embd_;
  layers::Vec rope_long_, rope_short_;
  int64_t n_ctx_orig_ = 0;
  float mscale_short_ = 1.f, mscale_long_ = 1.f;
  std::vector<PhiMoeLayer> layers_;
  // Model-wide (expert statistics count the routings of every context); the
  // observer itself is thread-safe (layers/moe.h).
  std::atomic<layers::MoeObserver*> observer_{nullptr};
};

}  // namespace

Result<std::unique_ptr<Model>> load_phimoe(const format::GgufFile& gguf) {
  return init_model(std::make_unique<PhiMoeModel>(), gguf);
}

}  // namespace chimera::models
