// Phi-4-mini-flash-reasoning (HF Phi4FlashForCausalLM, "SambaY"), GGUF arch
// "phi4flash" as written by `chimera convert` (docs/PHI4FLASH.md). The layer
// plan is derived from block_count L and mamba_period P:
//   i < L/2+2, i % P == 0  Mamba-1 (layer L/2 also exports its pre-gate y as M)
//   i < L/2,   i % P != 0  differential attention, sliding window W
//   i == L/2+1             differential attention, full; its KV is shared (YOCO)
//   i >= L/2+2, i % P == 0 GMU(x, M)                        (stateless)
//   i >= L/2+2, i % P != 0 cross differential attention on layer L/2+1's KV
// Every block: h += Mixer(LayerNorm(h)); h += fc2(silu(g) ⊙ u), [g|u] = fc1(LN(h));
// then LayerNorm(output_norm) and the tied lm-head. No positional encoding.
// Output-row pruning: the cross decoder (layers >= L/2+2) keeps no state, so
// it runs only on the rows whose logits are wanted (ARCHITECTURES.md §1.7).
// Continuous batching: one layer loop over the segments of a fused
// micro-batch (a lone call is one segment); every projection, GMU and MLP
// runs once over all rows (the Mamba-1 projections too), the Mamba-1 conv + scan
// and the attention cores per sequence.
// CHIMERA_PHI4FLASH_NO_YOCO=1 (read at load; for measuring the saving with
// `chimera bench`) runs it on every row instead and discards the extra rows.
// State: conv+SSM per Mamba layer, a RingKvCache of W rows per sliding-window
// layer (its bytes do not grow with the context), one full KvCache (layer
// L/2+1, shared by the cross layers), nothing for GMU / cross layers.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/ops.h"
#include "format/gguf/tensor_names.h"
#include "layers/diff_attention.h"
#include "layers/gmu.h"
#include "layers/mamba.h"
#include "models/hparams.h"
#include "models/model.h"
#include "models/tensor_table.h"
#include "models/transformer_util.h"

namespace chimera::models {

namespace tn = format::tn;
namespace {

enum class Kind { kMamba, kSelfAttn, kGmu, kCrossAttn };

struct P4Layer {
  Kind kind = Kind::kMamba;
  layers::Vec ln1_w, ln1_b, ln2_w, ln2_b;
  layers::Mamba1Weights mamba;
  layers::DiffAttentionConfig attn_cfg;
  layers::DiffAttentionWeights attn;
  layers::GmuWeights gmu;
  layers::Linear up, down;  // fused [gate | up] (gate first), down
};

// Per-context scratch (Model::new_scratch).
struct P4Scratch final : ModelScratch {
  Workspace ws;
  layers::Mamba1Scratch m1;
  layers::DiffAttentionScratch attn;
  AlignedBuffer<float> mem, tmp, logits;  // mem: layer L/2's pre-gate y (the GMUs' memory)
};

class Phi4FlashModel final : public MicroBatchedModel {
 public:
  std::vector<layers::LayerStateSpec> state_specs() const override {
    std::vector<layers::LayerStateSpec> v;
    for (const P4Layer& L : layers_) {
      if (L.kind == Kind::kMamba)
        v.emplace_back(m1_.state_spec());
      else if (L.kind == Kind::kSelfAttn && L.attn_cfg.window > 0)
        v.emplace_back(L.attn_cfg.ring_spec());
      else if (L.kind == Kind::kSelfAttn)
        v.emplace_back(L.attn_cfg.kv_spec());
      else
        v.emplace_back(layers::NoStateSpec{});
    }
    return v;
  }

  Result<layers::DeclaredShapes> plan(const format::GgufFile& g) {
    HParams hp(g, "phi4flash");
    CHIMERA_ASSIGN_OR_RETURN(n_embd_, hp.count("embedding_length", 1 << 20));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, hp.count("block_count", 4096));
    CHIMERA_ASSIGN_OR_RETURN(n_ff_, hp.count("feed_forward_length", 1 << 22));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, hp.count("attention.head_count", 1 << 16));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_head_kv, hp.count("attention.head_count_kv", 1 << 16));
    CHIMERA_ASSIGN_OR_RETURN(int64_t window, hp.count("attention.sliding_window", 1 << 30));
    CHIMERA_ASSIGN_OR_RETURN(int64_t period, hp.count("mamba_period", 1 << 16));
    eps_ = hp.real_or("attention.layer_norm_epsilon", 1e-5f);
    const int64_t head_dim = hp.count_or("attention.key_length", n_embd_ / n_head);
    if (n_head % 2 || n_head_kv % 2 || n_head % n_head_kv || head_dim < 1)
      return invalid_argument("phi4flash: head counts must be even and head_count a multiple of head_count_kv");
    if (n_layer % 2 || n_layer < 4 || period < 2 || (n_layer / 2) % period)
      return invalid_argument("phi4flash: block_count must be even (>= 4) and block_count/2 a multiple of mamba_period (>= 2)");
    m1_.n_embd = n_embd_;
    CHIMERA_ASSIGN_OR_RETURN(m1_.d_inner, hp.count("ssm.inner_size", 1 << 20));
    CHIMERA_ASSIGN_OR_RETURN(m1_.d_state, hp.count("ssm.state_size", 1 << 16));
    CHIMERA_ASSIGN_OR_RETURN(m1_.d_conv, hp.count("ssm.conv_kernel", 1024));
    CHIMERA_ASSIGN_OR_RETURN(m1_.dt_rank, hp.count("ssm.time_step_rank", 1 << 20));
    info_.n_ctx_train = hp.count_or("context_length", 4096);
    info_.n_layer = n_layer;
    info_.n_embd = n_embd_;
    half_ = n_layer / 2;
    mem_layer_ = half_;
    kv_layer_ = half_ + 1;

    // The layer plan, and names and shapes from the tensor table
    // (phi4flash_tensors.cpp) for it, checked against the file first.
    layers_.resize((size_t)n_layer);
    TableParams tp(n_layer);
    for (int64_t i = 0; i < n_layer; ++i) {
      const bool mamba = i % period == 0, cross = i >= half_ + 2;
      const Kind kind = cross ? (mamba ? Kind::kGmu : Kind::kCrossAttn) : (mamba ? Kind::kMamba : Kind::kSelfAttn);
      layers_[(size_t)i].kind = kind;
      if (kind == Kind::kSelfAttn || kind == Kind::kCrossAttn) {
        layers::DiffAttentionConfig& c = layers_[(size_t)i].attn_cfg;
        c.n_embd = n_embd_, c.n_head = n_head, c.n_head_kv = n_head_kv, c.head_dim = head_dim;
        c.window = i < half_ ? window : 0;
        c.cross = kind == Kind::kCrossAttn;
        c.lambda_init = 0.8f - 0.6f * std::exp(-0.3f * (float)i);
      }
      tp.tag(i, kind == Kind::kMamba ? "mamba" : kind == Kind::kGmu ? "gmu" : kind == Kind::kSelfAttn ? "self_attn" : "cross_attn");
      if (kind == Kind::kSelfAttn || kind == Kind::kCrossAttn) tp.tag(i, "diff_attn");
    }
    CHIMERA_ASSIGN_OR_RETURN(const int64_t n_vocab, embedding_rows(g));
    tp.set("n_embd", n_embd_), tp.set("n_vocab", n_vocab), tp.set("n_ff", n_ff_);
    tp.set("n_head", n_head), tp.set("n_head_kv", n_head_kv), tp.set("head_dim", head_dim);
    tp.set("d_inner", m1_.d_inner), tp.set("d_state", m1_.d_state), tp.set("d_conv", m1_.d_conv);
    tp.set("dt_rank", m1_.dt_rank);
    return declare_tensors("phi4flash", tp, g);
  }

  Status bind(const format::GgufFile& g, const layers::DeclaredShapes& declared) {
    layers::WeightBinder b(g, &packed_, &declared);
    CHIMERA_RETURN_IF_ERROR(bind_embeddings(b, g, n_embd_, &embd_));
    info_.n_vocab = embd_.output.rows;
    for (int64_t i = 0; i < info_.n_layer; ++i) {
      const std::string p = tn::layer_prefix(i);
      P4Layer& L = layers_[(size_t)i];
      CHIMERA_ASSIGN_OR_RETURN(L.ln1_w, b.vector(tn::at(tn::kAttnNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.ln1_b, b.vector(tn::at(tn::kAttnNormBias, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.ln2_w, b.vector(tn::at(tn::kFfnNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.ln2_b, b.vector(tn::at(tn::kFfnNormBias, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.up, layers::bind_linear(b, tn::linear(p, tn::kFfnUp), n_embd_, 2 * n_ff_));
      CHIMERA_ASSIGN_OR_RETURN(L.down, layers::bind_linear(b, tn::linear(p, tn::kFfnDown), n_ff_, n_embd_));
      switch (L.kind) {
        case Kind::kMamba: {
          CHIMERA_ASSIGN_OR_RETURN(L.mamba, layers::bind_mamba1(b, g, p, m1_));
          break;
        }
        case Kind::kGmu: {
          CHIMERA_ASSIGN_OR_RETURN(L.gmu, layers::bind_gmu(b, p, n_embd_, m1_.d_inner));
          break;
        }
        case Kind::kSelfAttn:
        case Kind::kCrossAttn: {
          const layers::DiffAttentionConfig& c = L.attn_cfg;
          CHIMERA_ASSIGN_OR_RETURN(L.attn, layers::bind_diff_attention(b, p, c));
          attn_cfg_ = c;
          attn_cfg_.cross = false;
          break;
        }
      }
    }
    const char* no_yoco = std::getenv("CHIMERA_PHI4FLASH_NO_YOCO");
    all_rows_ = no_yoco && *no_yoco && std::string(no_yoco) != "0";
    info_.weight_bytes = g.tensor_bytes();
    info_.decode_bytes_per_token = info_.weight_bytes;
    return Status::ok();
  }

  std::unique_ptr<ModelScratch> new_scratch() const override {
    auto s = std::make_unique<P4Scratch>();
    s->ws.n_embd = n_embd_;
    s->m1.reserve(m1_, kMaxUbatch);
    s->attn.reserve(attn_cfg_, kMaxUbatch);
    s->mem.resize((size_t)(kMaxUbatch * m1_.d_inner));
    s->tmp.resize((size_t)(kMaxUbatch * std::max(2 * n_ff_, m1_.d_inner)));
    return s;
  }

 private:

  // Block l over the rows of every segment: norms, projections (the Mamba-1
  // ones too), GMU and the MLP once over all rows; the Mamba-1 conv + scan (on
  // each sequence's own state) and the attention core (its KV / ring) per
  // segment, pos0[i] the position of segs[i]'s first row.
  void block(P4Scratch& s, size_t l, std::span<const Segment> segs, std::span<const int64_t> pos0, float* x,
             float* h, int64_t rows, ThreadPool* pool) const {
    const P4Layer& L = layers_[l];
    const int64_t d = n_embd_;
    for (int64_t t = 0; t < rows; ++t) kernels::layer_norm(x + t * d, L.ln1_w.ptr(), L.ln1_b.ptr(), h + t * d, d, eps_);
    switch (L.kind) {
      case Kind::kMamba:
      {
        // Projections once over all rows, conv + scan per segment on its own state.
        std::vector<layers::MixerSegment> mix;
        mix.reserve(segs.size());
        for (const Segment& sg : segs) mix.push_back({sg.row, sg.T, sg.state().recurrent(l)});
        float* mem = (int64_t)l == mem_layer_ ? s.mem.data() : nullptr;  // [rows][d_inner]
        layers::mamba1_forward_segments(m1_, L.mamba, h, rows, mix, s.m1, h, pool, mem);
        break;
      }
      case Kind::kSelfAttn:
      case Kind::kCrossAttn: {
        const layers::DiffAttentionConfig& c = L.attn_cfg;
        const int64_t ld = layers::diff_attention_qkv_width(c), nq = c.n_head * c.head_dim;
        float* qkv = s.attn.qkv.data();
        float* o = s.attn.o.data();
        L.attn.qkv.apply(h, rows, d, qkv, ld, pool);
        for (size_t i = 0; i < segs.size(); ++i) {
          const Segment& sg = segs[i];
          layers::SequenceState& st = sg.state();
          const float* qs = qkv + sg.row * ld;
          float* os = o + sg.row * nq;
          if (L.kind == Kind::kCrossAttn)
            layers::diff_attention_core(c, L.attn, qs, sg.T, pos0[i], *st.kv((size_t)kv_layer_), os, pool);
          else if (c.window > 0)
            layers::diff_attention_core(c, L.attn, qs, sg.T, pos0[i], *st.ring(l), os, pool);
          else
            layers::diff_attention_core(c, L.attn, qs, sg.T, pos0[i], *st.kv(l), os, pool);
        }
        L.attn.out.apply(o, rows, nq, h, d, pool);
        break;
      }
      case Kind::kGmu:
        layers::gmu_forward(L.gmu, h, s.mem.data(), rows, d, m1_.d_inner, s.tmp.data(), h, pool);
        break;
    }
    kernels::add(x, h, rows * d);
    for (int64_t t = 0; t < rows; ++t) kernels::layer_norm(x + t * d, L.ln2_w.ptr(), L.ln2_b.ptr(), h + t * d, d, eps_);
    float* gu = s.tmp.data();
    L.up.apply(h, rows, d, gu, 2 * n_ff_, pool);
    for (int64_t t = 0; t < rows; ++t) kernels::silu_mul(gu + t * 2 * n_ff_, gu + t * 2 * n_ff_ + n_ff_, gu + t * 2 * n_ff_, n_ff_);
    L.down.apply(gu, rows, 2 * n_ff_, h, d, pool);
    kernels::add(x, h, rows * d);
  }

  void ubatch_segments(ModelScratch& scratch, std::span<const Segment> segs, int64_t rows,
                       ThreadPool* pool) const override {
    P4Scratch& s = static_cast<P4Scratch&>(scratch);
    s.ws.reserve(rows);
    float* x = s.ws.x.data();
    float* h = s.ws.h.data();
    const int64_t d = n_embd_;
    embed_segments(embd_.tok, segs, x);
    std::vector<int64_t> pos0;
    for (const Segment& sg : segs) pos0.push_back(sg.state().n_past());
    for (int64_t l = 0; l < half_ + 2; ++l) block(s, (size_t)l, segs, pos0, x, h, rows, pool);
    if (all_rows_) {  // measurement mode: every row through the cross decoder
      for (size_t l = (size_t)half_ + 2; l < layers_.size(); ++l) block(s, l, segs, pos0, x, h, rows, pool);
      advance_segments(segs);
      write_logits_segments(embd_, x, segs, d, eps_, s.ws, s.logits, pool, FinalNorm::kLayer);
      return;
    }
    // Cross decoder (stateless) only on the rows that need logits.
    const OutputSegments kept = keep_output_segments(segs, {{x, d}, {s.mem.data(), m1_.d_inner}});
    advance_segments(segs);
    if (kept.rows == 0) return;
    for (size_t l = (size_t)half_ + 2; l < layers_.size(); ++l)
      block(s, l, kept.segs, kept.pos0, x, h, kept.rows, pool);
    write_logits_segments(embd_, x, kept.segs, d, eps_, s.ws, s.logits, pool, FinalNorm::kLayer);
  }

  int64_t n_embd_ = 0, n_ff_ = 0, half_ = 0, mem_layer_ = 0, kv_layer_ = 0;
  float eps_ = 1e-5f;
  bool all_rows_ = false;  // CHIMERA_PHI4FLASH_NO_YOCO
  layers::Mamba1Config m1_;
  layers::DiffAttentionConfig attn_cfg_;
  Embeddings embd_;
  std::vector<P4Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> load_phi4flash(const format::GgufFile& gguf) {
  return init_model(std::make_unique<Phi4FlashModel>(), gguf);
}

}  // namespace chimera::models
