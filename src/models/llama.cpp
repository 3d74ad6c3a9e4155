// Llama family (arch "llama"): RMSNorm, RoPE (adjacent pairs — llama.cpp's
// converter permutes Q/K so the GGUF uses LLAMA_ROPE_TYPE_NORM), GQA attention
// with a KV cache, SwiGLU FFN, tied or separate output. Optional q/k/v/o biases
// and rope_freqs (Llama 3 frequency factors) are honoured when present.
#include <cmath>

#include "layers/attention_block.h"
#include "layers/mlp.h"
#include "layers/weights.h"
#include "models/hparams.h"
#include "models/model.h"
#include "models/tensor_table.h"
#include "models/transformer_util.h"

namespace chimera::models {
namespace {

struct LlamaLayer {
  layers::Vec attn_norm, ffn_norm;
  layers::AttentionWeights attn;
  layers::GatedMlp mlp;
};

// Per-context scratch (Model::new_scratch).
struct LlamaScratch final : ModelScratch {
  Workspace ws;
  layers::MlpScratch mlp;
  layers::AttentionScratch attn;
  AlignedBuffer<float> logits;
};

class LlamaModel final : public MicroBatchedModel {
 public:
  bool reads_typed_kv() const override { return true; }  // attention via layers::attention_forward
  std::vector<layers::LayerStateSpec> state_specs() const override {
    return std::vector<layers::LayerStateSpec>(layers_.size(), attn_cfg_.kv_spec());
  }

  Result<layers::DeclaredShapes> plan(const format::GgufFile& g) {
    HParams hp(g, "llama");
    CHIMERA_ASSIGN_OR_RETURN(n_embd_, hp.count("embedding_length", 1 << 20));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, hp.count("block_count", 4096));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, hp.count("feed_forward_length", 1 << 22));
    CHIMERA_ASSIGN_OR_RETURN(const AttentionGeometry geo, read_attention_geometry(hp, n_embd_));
    const int64_t n_head = geo.n_head, n_head_kv = geo.n_head_kv, head_dim = geo.head_dim, head_dim_v = geo.head_dim_v;
    eps_ = hp.real_or("attention.layer_norm_rms_epsilon", 1e-5f);
    info_.n_ctx_train = hp.count_or("context_length", 2048);
    info_.n_layer = n_layer;
    info_.n_embd = n_embd_;

    attn_cfg_.n_embd = n_embd_;
    attn_cfg_.n_head = n_head;
    attn_cfg_.n_head_kv = n_head_kv;
    attn_cfg_.head_dim = head_dim;
    attn_cfg_.head_dim_v = head_dim_v;
    CHIMERA_ASSIGN_OR_RETURN(const int64_t n_rot, read_rope_dims(hp, head_dim));
    CHIMERA_ASSIGN_OR_RETURN(attn_cfg_.rope, read_rope(hp, kernels::RopeMode::kNorm, n_rot, info_.n_ctx_train));
    attn_cfg_.scale = hp.real_or("attention.scale", 0.f);

    // Names and shapes: the tensor table (llama_tensors.cpp), checked against the file first.
    TableParams tp(n_layer);
    CHIMERA_ASSIGN_OR_RETURN(const int64_t n_vocab, embedding_rows(g));
    tp.set("n_embd", n_embd_), tp.set("n_vocab", n_vocab), tp.set("n_ff", n_ff), tp.set("n_rot", n_rot);
    tp.set("n_head", n_head), tp.set("n_head_kv", n_head_kv), tp.set("head_dim", head_dim);
    tp.set("head_dim_v", head_dim_v);
    n_ff_ = n_ff;
    info_.derived = hp.notes();
    return declare_tensors("llama", tp, g);
  }

  Status bind(const format::GgufFile& g, const layers::DeclaredShapes& declared) {
    layers::WeightBinder b(g, &packed_, &declared);
    CHIMERA_RETURN_IF_ERROR(bind_embeddings(b, g, n_embd_, &embd_));
    info_.n_vocab = embd_.output.rows;
    CHIMERA_ASSIGN_OR_RETURN(rope_freqs_, b.optional_vector(tn::kRopeFreqs));
    attn_cfg_.rope.freq_factors = rope_freqs_.ptr();

    layers_.resize((size_t)info_.n_layer);
    for (int64_t i = 0; i < info_.n_layer; ++i) {
      const std::string p = tn::layer_prefix(i);
      LlamaLayer& L = layers_[(size_t)i];
      CHIMERA_ASSIGN_OR_RETURN(L.attn_norm, b.vector(tn::at(tn::kAttnNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.ffn_norm, b.vector(tn::at(tn::kFfnNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.attn, layers::bind_attention(b, p, attn_cfg_));
      CHIMERA_ASSIGN_OR_RETURN(L.mlp, layers::bind_gated_mlp(b, p, n_embd_, n_ff_));
    }
    info_.weight_bytes = g.tensor_bytes();
    return Status::ok();
  }

  std::unique_ptr<ModelScratch> new_scratch() const override {
    auto s = std::make_unique<LlamaScratch>();
    s->ws.n_embd = n_embd_;
    s->attn.reserve(attn_cfg_, kMaxUbatch);
    s->mlp.reserve(n_ff_, kMaxUbatch);
    return s;
  }

 private:
  // The one forward (a lone sequence is one segment): norms, projections and
  // the MLP over the rows of all segments; RoPE, KV writes and the attention
  // kernel per segment at its own state and positions. The last layer's MLP
  // runs only on the rows whose logits are wanted.
  void ubatch_segments(ModelScratch& scratch, std::span<const Segment> segs, int64_t rows,
                       ThreadPool* pool) const override {
    LlamaScratch& s = static_cast<LlamaScratch&>(scratch);
    s.ws.reserve(rows);
    float* x = s.ws.x.data();
    float* h = s.ws.h.data();
    embed_segments(embd_.tok, segs, x);
    std::vector<OutputRow> out = output_rows(segs, embd_.output.rows);
    const std::vector<layers::AttentionSpan> spans = attention_spans(segs);
    int64_t n = rows;  // rows still needed (all but the last layer's MLP run on every row)
    for (size_t l = 0; l < layers_.size(); ++l) {
      const LlamaLayer& L = layers_[l];
      for (int64_t t = 0; t < rows; ++t)
        kernels::rms_norm(x + t * n_embd_, L.attn_norm.ptr(), h + t * n_embd_, n_embd_, eps_);
      layers::attention_forward(attn_cfg_, L.attn, h, rows, spans, l, s.attn, h, pool);
      kernels::add(x, h, rows * n_embd_);
      if (l + 1 == layers_.size() && (n = keep_output_rows(x, out, n_embd_)) == 0) break;
      for (int64_t t = 0; t < n; ++t)
        kernels::rms_norm(x + t * n_embd_, L.ffn_norm.ptr(), h + t * n_embd_, n_embd_, eps_);
      layers::gated_mlp_forward(L.mlp, h, n, n_embd_, s.mlp, h, pool);
      kernels::add(x, h, n * n_embd_);
    }
    advance_segments(segs);
    write_logits_rows(embd_, x, out, n_embd_, eps_, s.ws, s.logits, pool);
  }

  int64_t n_embd_ = 0, n_ff_ = 0;
  float eps_ = 1e-5f;
  layers::AttentionConfig attn_cfg_;
  Embeddings embd_;
  layers::Vec rope_freqs_;
  std::vector<LlamaLayer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> load_llama(const format::GgufFile& gguf) {
  return init_model(std::make_unique<LlamaModel>(), gguf);
}

}  // namespace chimera::models
