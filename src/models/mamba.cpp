// Pure state-space families, llama.cpp archs "mamba" (Mamba-1 mixer) and
// "mamba2" (Mamba-2 mixer): token embedding, then per layer
// h += Mixer(RMSNorm(h; attn_norm)), final RMSNorm and lm-head (output.weight,
// or the tied embedding). Like llama.cpp, the two archs are one family whose
// layer plan differs only in the mixer kind; sizes come from the `<arch>.ssm.*`
// metadata (conv_kernel, inner_size, state_size, time_step_rank, group_count;
// for mamba2 time_step_rank is the head count). Every layer keeps a recurrent
// state (conv + SSM, float32) and no KV cache, so the context length is only a
// bookkeeping limit.
#include <variant>

#include "layers/mamba2.h"
#include "models/hparams.h"
#include "models/model.h"
#include "models/tensor_table.h"
#include "models/transformer_util.h"

namespace chimera::models {
namespace {

enum class MixerKind { kMamba1, kMamba2 };

struct MambaLayer {
  layers::Vec norm;
  layers::Mamba1Weights m1;
  layers::Mamba2Weights m2;
};

// Per-context scratch (Model::new_scratch).
struct MambaScratch final : ModelScratch {
  Workspace ws;
  layers::Mamba1Scratch s1;
  layers::Mamba2Scratch s2;
  AlignedBuffer<float> logits;
};

class MambaModel final : public MicroBatchedModel {
 public:
  explicit MambaModel(MixerKind kind) : kind_(kind) {}

  std::vector<layers::LayerStateSpec> state_specs() const override {
    const layers::RecurrentSpec spec = kind_ == MixerKind::kMamba1 ? m1_.state_spec() : m2_.state_spec();
    return std::vector<layers::LayerStateSpec>(layers_.size(), spec);
  }

  Result<layers::DeclaredShapes> plan(const format::GgufFile& g, const std::string& arch) {
    HParams hp(g, arch);
    CHIMERA_ASSIGN_OR_RETURN(n_embd_, hp.count("embedding_length", 1 << 20));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, hp.count("block_count", 4096));
    CHIMERA_ASSIGN_OR_RETURN(int64_t d_conv, hp.count("ssm.conv_kernel", 1024));
    CHIMERA_ASSIGN_OR_RETURN(int64_t d_inner, hp.count("ssm.inner_size", 1 << 20));
    CHIMERA_ASSIGN_OR_RETURN(int64_t d_state, hp.count("ssm.state_size", 1 << 16));
    CHIMERA_ASSIGN_OR_RETURN(int64_t dt_rank, hp.count("ssm.time_step_rank", 1 << 20));
    eps_ = hp.real_or("attention.layer_norm_rms_epsilon", 1e-5f);
    info_.n_ctx_train = hp.count_or("context_length", 1 << 20);
    info_.n_layer = n_layer;
    info_.n_embd = n_embd_;
    if (kind_ == MixerKind::kMamba1) {
      m1_ = {n_embd_, d_inner, d_state, d_conv, dt_rank, hp.flag_or("ssm.dt_b_c_rms", false), eps_};
    } else {
      m2_.n_embd = n_embd_;
      m2_.d_inner = d_inner;
      m2_.d_state = d_state;
      m2_.d_conv = d_conv;
      m2_.n_head = dt_rank;
      CHIMERA_ASSIGN_OR_RETURN(m2_.n_group, hp.count("ssm.group_count", 1 << 16));
      m2_.eps = eps_;
      CHIMERA_RETURN_IF_ERROR(m2_.validate());
    }

    // Names and shapes: the tensor table (mamba_tensors.cpp), checked against the file first.
    TableParams tp(n_layer);
    CHIMERA_ASSIGN_OR_RETURN(const int64_t n_vocab, embedding_rows(g));
    tp.set("n_embd", n_embd_), tp.set("n_vocab", n_vocab), tp.set("d_inner", d_inner), tp.set("d_state", d_state);
    tp.set("d_conv", d_conv), tp.set("dt_rank", dt_rank), tp.set("ssm_n_head", dt_rank);
    tp.set("n_group", kind_ == MixerKind::kMamba2 ? m2_.n_group : 1);
    return declare_tensors(arch, tp, g);
  }

  Status bind(const format::GgufFile& g, const layers::DeclaredShapes& declared, const std::string& /*arch*/) {
    layers::WeightBinder b(g, &packed_, &declared);
    CHIMERA_RETURN_IF_ERROR(bind_embeddings(b, g, n_embd_, &embd_));
    info_.n_vocab = embd_.output.rows;
    layers_.resize((size_t)info_.n_layer);
    for (int64_t i = 0; i < info_.n_layer; ++i) {
      const std::string p = tn::layer_prefix(i);
      MambaLayer& L = layers_[(size_t)i];
      CHIMERA_ASSIGN_OR_RETURN(L.norm, b.vector(tn::at(tn::kAttnNorm, i)));
      if (kind_ == MixerKind::kMamba1) {
        CHIMERA_ASSIGN_OR_RETURN(L.m1, layers::bind_mamba1(b, g, p, m1_));
      } else {
        CHIMERA_ASSIGN_OR_RETURN(L.m2, layers::bind_mamba2(b, g, p, m2_, false));
      }
    }
    info_.weight_bytes = g.tensor_bytes();
    return Status::ok();
  }

  std::unique_ptr<ModelScratch> new_scratch() const override {
    auto s = std::make_unique<MambaScratch>();
    s->ws.n_embd = n_embd_;
    if (kind_ == MixerKind::kMamba1)
      s->s1.reserve(m1_, kMaxUbatch);
    else
      s->s2.reserve(m2_, kMaxUbatch);
    return s;
  }

 private:

  // One or several sequences: norms and the mixers' projections on all rows,
  // conv and scan per segment on that sequence's own state.
  void ubatch_segments(ModelScratch& scratch, std::span<const Segment> segs, int64_t rows,
                       ThreadPool* pool) const override {
    MambaScratch& s = static_cast<MambaScratch&>(scratch);
    s.ws.reserve(rows);
    float* x = s.ws.x.data();
    float* h = s.ws.h.data();
    embed_segments(embd_.tok, segs, x);
    std::vector<layers::MixerSegment> mix(segs.size());
    for (size_t l = 0; l < layers_.size(); ++l) {
      const MambaLayer& L = layers_[l];
      for (int64_t t = 0; t < rows; ++t)
        kernels::rms_norm(x + t * n_embd_, L.norm.ptr(), h + t * n_embd_, n_embd_, eps_);
      for (size_t i = 0; i < segs.size(); ++i) mix[i] = {segs[i].row, segs[i].T, segs[i].state().recurrent(l)};
      if (kind_ == MixerKind::kMamba1)
        layers::mamba1_forward_segments(m1_, L.m1, h, rows, mix, s.s1, h, pool);
      else
        layers::mamba2_forward_segments(m2_, L.m2, h, rows, mix, s.s2, h, pool);
      kernels::add(x, h, rows * n_embd_);
    }
    advance_segments(segs);
    write_logits_segments(embd_, x, segs, n_embd_, eps_, s.ws, s.logits, pool);
  }

  MixerKind kind_;
  int64_t n_embd_ = 0;
  float eps_ = 1e-5f;
  layers::Mamba1Config m1_;
  layers::Mamba2Config m2_;
  Embeddings embd_;
  std::vector<MambaLayer> layers_;
};

Result<std::unique_ptr<Model>> load(const format::GgufFile& gguf, MixerKind kind, const char* arch) {
  return init_model(std::make_unique<MambaModel>(kind), gguf, arch);
}

}  // namespace

Result<std::unique_ptr<Model>> load_mamba(const format::GgufFile& gguf) { return load(gguf, MixerKind::kMamba1, "mamba"); }
Result<std::unique_ptr<Model>> load_mamba2(const format::GgufFile& gguf) {
  return load(gguf, MixerKind::kMamba2, "mamba2");
}

}  // namespace chimera::models
