// Granite 4.0-H (llama.cpp arch "granitehybrid"): a hybrid of Mamba-2 and
// attention layers with a MoE (+ shared expert) or dense SwiGLU FFN on every
// layer. The layer plan is data read from the metadata: a layer whose
// attention.head_count_kv entry is 0 is a Mamba-2 layer, any other is
// attention; the FFN is MoE when expert_count > 0. Per layer:
//   r = h;  y = Mixer(RMSNorm(h; attn_norm));   h = r + residual_scale · y
//   r = h;  f = MoE(x) + Shared(x) | Dense(x), x = RMSNorm(h; ffn_norm)
//   h = r + residual_scale · f
// then RMSNorm(output_norm), lm-head (tied when output.weight is absent) and
// logits / logit_scale. Embeddings are multiplied by embedding_scale; attention
// uses attention.scale as its softmax scale (1/sqrt(head_dim) when 0) and RoPE
// only when rope.scaling.finetuned is true (llama.cpp's switch; false = NoPE).
// Routing (llama.cpp build_moe_ffn, gating SOFTMAX, norm_w = true): softmax over
// all experts, top-k, weights renormalised to sum 1 — layers/moe.h.
// State: a KV cache per attention layer, conv + SSM state per Mamba-2 layer.
#include <atomic>

#include "layers/attention_block.h"
#include "layers/mamba2.h"
#include "layers/mlp.h"
#include "layers/moe.h"
#include "models/hparams.h"
#include "models/model.h"
#include "models/tensor_table.h"
#include "models/transformer_util.h"

namespace chimera::models {
namespace {

enum class Mixer { kAttention, kMamba2 };
enum class Ffn { kMoe, kDense };

struct LayerPlan {
  Mixer mixer = Mixer::kMamba2;
  Ffn ffn = Ffn::kDense;
  int64_t n_head_kv = 0;  // attention layers
};

struct GraniteLayer {
  LayerPlan plan;
  layers::Vec attn_norm, ffn_norm;
  layers::AttentionConfig attn_cfg;
  layers::AttentionWeights attn;
  layers::Mamba2Weights ssm;
  layers::MoeWeights moe;
  layers::GatedMlp mlp;
};

// Per-context scratch (Model::new_scratch).
struct GraniteScratch final : ModelScratch {
  Workspace ws;
  layers::Mamba2Scratch ssm;
  layers::MoeScratch moe;
  layers::MlpScratch mlp;
  layers::AttentionScratch attn;
  AlignedBuffer<float> logits;
};

class GraniteHybridModel final : public MicroBatchedModel, public layers::MoeObservable {
 public:
  bool reads_typed_kv() const override { return true; }  // attention via layers::attention_forward
  std::vector<layers::LayerStateSpec> state_specs() const override {
    std::vector<layers::LayerStateSpec> v;
    for (const GraniteLayer& L : layers_) {
      if (L.plan.mixer == Mixer::kAttention)
        v.emplace_back(L.attn_cfg.kv_spec());
      else
        v.emplace_back(m2_.state_spec());
    }
    return v;
  }

  layers::MoeObservable* moe() override { return this; }
  void set_moe_observer(layers::MoeObserver* obs) override { observer_.store(obs, std::memory_order_release); }
  std::vector<uint64_t> expert_bytes_per_layer() const override {
    std::vector<uint64_t> v;
    for (const GraniteLayer& L : layers_) v.push_back(L.plan.ffn == Ffn::kMoe ? L.moe.expert_bytes() : 0);
    return v;
  }

  Result<layers::DeclaredShapes> plan(const format::GgufFile& g) {
    HParams hp(g, "granitehybrid");
    CHIMERA_ASSIGN_OR_RETURN(n_embd_, hp.count("embedding_length", 1 << 20));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, hp.count("block_count", 4096));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, hp.count("feed_forward_length", 1 << 22));
    eps_ = hp.real_or("attention.layer_norm_rms_epsilon", 1e-5f);
    info_.n_ctx_train = hp.count_or("context_length", 4096);
    info_.n_layer = n_layer;
    info_.n_embd = n_embd_;
    embedding_scale_ = hp.real_or("embedding_scale", 0.f);
    residual_scale_ = hp.real_or("residual_scale", 0.f);
    logit_scale_ = hp.real_or("logit_scale", 0.f);

    // Layer plan: head_count_kv per layer (0 = Mamba-2), FFN kind from expert_count.
    CHIMERA_ASSIGN_OR_RETURN(auto n_head, g.get_per_layer_int(hp.key("attention.head_count"), (size_t)n_layer, {}));
    CHIMERA_ASSIGN_OR_RETURN(auto n_head_kv,
                             g.get_per_layer_int(hp.key("attention.head_count_kv"), (size_t)n_layer, std::nullopt));
    const int64_t n_expert = hp.count_or("expert_count", 0);
    const bool use_rope = hp.flag_or("rope.scaling.finetuned", true);
    bool any_ssm = false;
    layers_.resize((size_t)n_layer);
    for (int64_t i = 0; i < n_layer; ++i) {
      LayerPlan& p = layers_[(size_t)i].plan;
      p.n_head_kv = n_head_kv[(size_t)i];
      if (p.n_head_kv < 0) return invalid_argument("negative attention.head_count_kv at layer " + std::to_string(i));
      p.mixer = p.n_head_kv == 0 ? Mixer::kMamba2 : Mixer::kAttention;
      p.ffn = n_expert > 0 ? Ffn::kMoe : Ffn::kDense;
      any_ssm |= p.mixer == Mixer::kMamba2;
    }

    if (any_ssm) {
      m2_.n_embd = n_embd_;
      CHIMERA_ASSIGN_OR_RETURN(m2_.d_inner, hp.count("ssm.inner_size", 1 << 20));
      CHIMERA_ASSIGN_OR_RETURN(m2_.d_state, hp.count("ssm.state_size", 1 << 16));
      CHIMERA_ASSIGN_OR_RETURN(m2_.d_conv, hp.count("ssm.conv_kernel", 1024));
      CHIMERA_ASSIGN_OR_RETURN(m2_.n_head, hp.count("ssm.time_step_rank", 1 << 20));
      CHIMERA_ASSIGN_OR_RETURN(m2_.n_group, hp.count("ssm.group_count", 1 << 16));
      m2_.eps = eps_;
      CHIMERA_RETURN_IF_ERROR(m2_.validate());
    }
    if (n_expert > 0) {
      moe_cfg_.n_embd = n_embd_;
      moe_cfg_.n_ff = n_ff;
      moe_cfg_.n_ff_shexp = hp.count_or("expert_shared_feed_forward_length", 0);
      moe_cfg_.routing.kind = layers::MoeRouting::kSoftmaxTopK;
      moe_cfg_.routing.n_expert = n_expert;
      CHIMERA_ASSIGN_OR_RETURN(moe_cfg_.routing.k, hp.count("expert_used_count", n_expert));
      moe_cfg_.routing.renormalize = true;
    }

    // Attention geometry per attention layer: one head size for every
    // attention layer (one key_length key), read or derived at the first.
    HeadDims heads;
    for (int64_t i = 0; i < n_layer; ++i) {
      GraniteLayer& L = layers_[(size_t)i];
      if (L.plan.mixer != Mixer::kAttention) continue;
      layers::AttentionConfig& c = L.attn_cfg;
      c.n_embd = n_embd_;
      c.n_head = n_head[(size_t)i];
      c.n_head_kv = L.plan.n_head_kv;
      if (c.n_head < 1 || c.n_head % c.n_head_kv != 0)
        return invalid_argument("layer " + std::to_string(i) + ": attention.head_count (" + std::to_string(c.n_head) +
                                ") must be a positive multiple of head_count_kv (" + std::to_string(c.n_head_kv) +
                                ")");
      if (heads.k == 0) {
        CHIMERA_ASSIGN_OR_RETURN(heads, read_head_dims(hp, n_embd_, c.n_head, c.n_head_kv, i));
      }
      c.head_dim = heads.k;
      c.head_dim_v = heads.v;
      c.use_rope = use_rope;
      if (use_rope) {
        CHIMERA_ASSIGN_OR_RETURN(const int64_t n_rot, read_rope_dims(hp, c.head_dim));
        CHIMERA_ASSIGN_OR_RETURN(c.rope, read_rope(hp, kernels::RopeMode::kNorm, n_rot, info_.n_ctx_train));
      }
      c.scale = hp.real_or("attention.scale", 0.f);
    }

    // Names and shapes: the tensor table (granitehybrid_tensors.cpp) for this
    // layer plan, checked against the file first.
    TableParams tp(n_layer);
    CHIMERA_ASSIGN_OR_RETURN(const int64_t n_vocab, embedding_rows(g));
    tp.set("n_embd", n_embd_), tp.set("n_vocab", n_vocab), tp.set("n_ff", n_ff);
    tp.set("head_dim", heads.k), tp.set("head_dim_v", heads.v);
    tp.set("d_inner", m2_.d_inner), tp.set("d_state", m2_.d_state), tp.set("d_conv", m2_.d_conv);
    tp.set("ssm_n_head", m2_.n_head), tp.set("n_group", m2_.n_group);
    tp.set("n_expert", n_expert), tp.set("n_ff_shexp", moe_cfg_.n_ff_shexp);
    for (int64_t i = 0; i < n_layer; ++i) {
      const GraniteLayer& L = layers_[(size_t)i];
      if (L.plan.mixer == Mixer::kAttention) {
        tp.tag(i, "attn");
        tp.set(i, "n_head", L.attn_cfg.n_head), tp.set(i, "n_head_kv", L.attn_cfg.n_head_kv);
      } else {
        tp.tag(i, "mamba2");
      }
      tp.tag(i, L.plan.ffn == Ffn::kMoe ? "moe" : "dense");
      if (L.plan.ffn == Ffn::kMoe && moe_cfg_.n_ff_shexp > 0) tp.tag(i, "shexp");
    }
    n_ff_ = n_ff;
    info_.derived = hp.notes();
    return declare_tensors("granitehybrid", tp, g);
  }

  Status bind(const format::GgufFile& g, const layers::DeclaredShapes& declared) {
    layers::WeightBinder b(g, &packed_, &declared);
    CHIMERA_RETURN_IF_ERROR(bind_embeddings(b, g, n_embd_, &embd_));
    info_.n_vocab = embd_.output.rows;
    for (int64_t i = 0; i < info_.n_layer; ++i) {
      const std::string p = tn::layer_prefix(i);
      GraniteLayer& L = layers_[(size_t)i];
      CHIMERA_ASSIGN_OR_RETURN(L.attn_norm, b.vector(tn::at(tn::kAttnNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.ffn_norm, b.vector(tn::at(tn::kFfnNorm, i)));
      if (L.plan.mixer == Mixer::kAttention) {
        CHIMERA_ASSIGN_OR_RETURN(L.attn, layers::bind_attention(b, p, L.attn_cfg));
      } else {
        CHIMERA_ASSIGN_OR_RETURN(L.ssm, layers::bind_mamba2(b, g, p, m2_, true));
      }
      if (L.plan.ffn == Ffn::kMoe) {
        CHIMERA_ASSIGN_OR_RETURN(L.moe, layers::bind_moe(b, g, p, moe_cfg_));
      } else {
        CHIMERA_ASSIGN_OR_RETURN(L.mlp, layers::bind_gated_mlp(b, p, n_embd_, n_ff_));
      }
    }
    info_.weight_bytes = g.tensor_bytes();
    return Status::ok();
  }

  std::unique_ptr<ModelScratch> new_scratch() const override {
    auto s = std::make_unique<GraniteScratch>();
    s->ws.n_embd = n_embd_;
    bool any_ssm = false, any_moe = false, any_dense = false;
    for (const GraniteLayer& L : layers_) {
      if (L.plan.mixer == Mixer::kAttention) s->attn.reserve(L.attn_cfg, kMaxUbatch);
      any_ssm |= L.plan.mixer == Mixer::kMamba2;
      any_moe |= L.plan.ffn == Ffn::kMoe;
      any_dense |= L.plan.ffn == Ffn::kDense;
    }
    if (any_ssm) s->ssm.reserve(m2_, kMaxUbatch);
    if (any_moe) s->moe.reserve(moe_cfg_, kMaxUbatch);
    if (any_dense) s->mlp.reserve(n_ff_, kMaxUbatch);
    return s;
  }

 private:

  // Second half of layer l on `rows` rows: norm, MoE or dense FFN, scaled residual.
  void ffn_block(GraniteScratch& s, layers::MoeObserver* observer, const GraniteLayer& L, size_t l, float* x,
                 float* h, int64_t rows, ThreadPool* pool) const {
    const int64_t d = n_embd_;
    for (int64_t t = 0; t < rows; ++t) kernels::rms_norm(x + t * d, L.ffn_norm.ptr(), h + t * d, d, eps_);
    if (L.plan.ffn == Ffn::kMoe)
      layers::moe_forward(moe_cfg_, L.moe, h, rows, s.moe, h, pool, (int64_t)l, observer);
    else
      layers::gated_mlp_forward(L.mlp, h, rows, d, s.mlp, h, pool);
    residual_add(x, h, rows * d);
  }

  // One or several sequences: norms, attention and Mamba-2 projections and the
  // FFN/MoE on all rows; attention (RoPE, KV writes) and the Mamba-2 conv and
  // scan per segment on that sequence's own state and positions. The last
  // layer's FFN runs only on rows that need logits (not while expert
  // statistics are collected: they count every routed token).
  void ubatch_segments(ModelScratch& scratch, std::span<const Segment> segs, int64_t rows,
                       ThreadPool* pool) const override {
    GraniteScratch& s = static_cast<GraniteScratch&>(scratch);
    layers::MoeObserver* const observer = observer_.load(std::memory_order_acquire);
    s.ws.reserve(rows);
    float* x = s.ws.x.data();
    float* h = s.ws.h.data();
    const int64_t d = n_embd_;
    embed_segments(embd_.tok, segs, x);
    if (embedding_scale_ != 0.f) kernels::scale(x, embedding_scale_, rows * d);
    std::vector<layers::MixerSegment> mix(segs.size());
    std::vector<OutputRow> out = output_rows(segs, embd_.output.rows);
    const std::vector<layers::AttentionSpan> spans = attention_spans(segs);
    int64_t n = rows;
    for (size_t l = 0; l < layers_.size(); ++l) {
      const GraniteLayer& L = layers_[l];
      for (int64_t t = 0; t < rows; ++t) kernels::rms_norm(x + t * d, L.attn_norm.ptr(), h + t * d, d, eps_);
      if (L.plan.mixer == Mixer::kAttention) {
        layers::attention_forward(L.attn_cfg, L.attn, h, rows, spans, l, s.attn, h, pool);
      } else {
        for (size_t i = 0; i < segs.size(); ++i) mix[i] = {segs[i].row, segs[i].T, segs[i].state().recurrent(l)};
        layers::mamba2_forward_segments(m2_, L.ssm, h, rows, mix, s.ssm, h, pool);
      }
      residual_add(x, h, rows * d);
      if (l + 1 == layers_.size() && !observer && (n = keep_output_rows(x, out, d)) == 0) break;
      ffn_block(s, observer, L, l, x, h, n, pool);
    }
    advance_segments(segs);
    write_logits_rows(embd_, x, out, d, eps_, s.ws, s.logits, pool, FinalNorm::kRms,
                      logit_scale_ != 0.f ? 1.0f / logit_scale_ : 0.f);
  }

  // x += residual_scale · y (llama.cpp scales the branch, then adds).
  void residual_add(float* x, float* y, int64_t n) const {
    if (residual_scale_ != 0.f) kernels::scale(y, residual_scale_, n);
    kernels::add(x, y, n);
  }

  int64_t n_embd_ = 0, n_ff_ = 0;
  float eps_ = 1e-5f;
  float embedding_scale_ = 0.f, residual_scale_ = 0.f, logit_scale_ = 0.f;
  layers::Mamba2Config m2_;
  layers::MoeConfig moe_cfg_;
  Embeddings embd_;
  std::vector<GraniteLayer> layers_;
  // Model-wide (expert statistics count the routings of every context); the
  // observer itself is thread-safe (layers/moe.h).
  std::atomic<layers::MoeObserver*> observer_{nullptr};
};

}  // namespace

Result<std::unique_ptr<Model>> load_granitehybrid(const format::GgufFile& gguf) {
  return init_model(std::make_unique<GraniteHybridModel>(), gguf);
}

}  // namespace chimera::models
