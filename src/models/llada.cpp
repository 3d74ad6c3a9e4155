// Masked diffusion LMs as llama.cpp's GGUF files define them: arch "llada"
// (LLaDA-8B: the Llama block, RMSNorm, RoPE on adjacent pairs — NORM, as for
// llama — SwiGLU, MHA, no biases, logits unshifted) and arch "dream" (Dream-7B,
// the Qwen2 block: RMSNorm, NEOX RoPE, GQA, q/k/v biases, logits shifted by one).
// The two share every line of code; their differences are data (DiffusionFamily).
// Attention is non-causal (`<arch>.attention.causal`, default false): every
// position sees every position, so a pass over the canvas is one forward with
// all rows per layer — never split into micro-batches, because a later row's
// K/V must exist before any row attends.
// Invariants: Context::forward on a fresh state is the exact full pass (the
// golden protocol); diffusion_forward (runtime/diffusion_model.h) runs a slice
// of positions against the K/V other calls left in the cache, which is what
// the Fast-dLLM prefix / dual caches need. A context's scratch grows to the
// largest slice it runs.
#include <cmath>
#include <vector>
#include <span>

#include "layers/attention_block.h"
#include "layers/mlp.h"
#include "layers/weights.h"
#include "models/context.h"
#include "models/hparams.h"
#include "models/model.h"
#include "models/tensor_table.h"
#include "models/transformer_util.h"
#include "runtime/diffusion_model.h"

namespace chimera::models {
namespace {

struct DiffusionFamily {
  const char* arch;
  kernels::RopeMode rope;
  bool default_shift;  // diffusion.shift_logits when the key is absent
  float default_eps;
};

constexpr DiffusionFamily kLlada{"llada", kernels::RopeMode::kNorm, false, 1e-5f};
constexpr DiffusionFamily kDream{"dream", kernels::RopeMode::kNeox, true, 1e-6f};

struct DlmLayer {
  layers::Vec attn_norm, ffn_norm;
  layers::AttentionWeights attn;
  layers::GatedMlp mlp;
};

// Per-context scratch (Model::new_scratch); grows to the largest slice run.
struct DlmScratch final : ModelScratch {
  int64_t capacity = 0;  // rows reserved
  Workspace ws;
  layers::AttentionScratch attn;
  layers::MlpScratch mlp;
  AlignedBuffer<float> logits;  // run_slices: the lm-head rows before they are scattered
};

class DiffusionLm final : public Model, public DiffusionModel {
 public:
  bool reads_typed_kv() const override { return true; }  // attention via layers::attention_forward
  std::vector<layers::LayerStateSpec> state_specs() const override {
    return std::vector<layers::LayerStateSpec>(layers_.size(), attn_cfg_.kv_spec());
  }
  const DiffusionSpec& spec() const override { return spec_; }
  const DiffusionModel* diffusion() const override { return this; }

  Result<layers::DeclaredShapes> plan(const format::GgufFile& g, const DiffusionFamily& fam) {
    HParams hp(g, fam.arch);
    CHIMERA_ASSIGN_OR_RETURN(n_embd_, hp.count("embedding_length", 1 << 20));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, hp.count("block_count", 4096));
    CHIMERA_ASSIGN_OR_RETURN(n_ff_, hp.count("feed_forward_length", 1 << 22));
    CHIMERA_ASSIGN_OR_RETURN(const AttentionGeometry geo, read_attention_geometry(hp, n_embd_));
    const int64_t n_head = geo.n_head, n_head_kv = geo.n_head_kv, head_dim = geo.head_dim, head_dim_v = geo.head_dim_v;
    eps_ = hp.real_or("attention.layer_norm_rms_epsilon", fam.default_eps);
    info_.n_ctx_train = hp.count_or("context_length", 4096);
    info_.n_layer = n_layer;
    info_.n_embd = n_embd_;
    info_.is_diffusion = true;

    attn_cfg_.n_embd = n_embd_;
    attn_cfg_.n_head = n_head;
    attn_cfg_.n_head_kv = n_head_kv;
    attn_cfg_.head_dim = head_dim;
    attn_cfg_.head_dim_v = head_dim_v;
    attn_cfg_.causal = hp.flag_or("attention.causal", false);
    CHIMERA_ASSIGN_OR_RETURN(const int64_t n_rot, read_rope_dims(hp, head_dim));
    CHIMERA_ASSIGN_OR_RETURN(attn_cfg_.rope, read_rope(hp, fam.rope, n_rot, info_.n_ctx_train));
    attn_cfg_.scale = hp.real_or("attention.scale", 0.f);

    // Names and shapes: the tensor table (llada_tensors.cpp), checked against the file first.
    TableParams tp(n_layer);
    CHIMERA_ASSIGN_OR_RETURN(const int64_t n_vocab, embedding_rows(g));
    tp.set("n_embd", n_embd_), tp.set("n_vocab", n_vocab), tp.set("n_ff", n_ff_);
    tp.set("n_head", n_head), tp.set("n_head_kv", n_head_kv), tp.set("head_dim", head_dim);
    tp.set("head_dim_v", head_dim_v);
    const auto mask = g.get_int("tokenizer.ggml.mask_token_id");
    if (!mask) return invalid_argument("tokenizer.ggml.mask_token_id is missing (a diffusion LM needs its mask token)");
    if (*mask < 0 || *mask >= n_vocab)
      return invalid_argument("tokenizer.ggml.mask_token_id " + std::to_string(*mask) + " is outside the vocabulary");
    spec_.mask_id = (int32_t)*mask;
    spec_.shift_logits = g.get_bool("diffusion.shift_logits").value_or(fam.default_shift);
    info_.derived = hp.notes();
    return declare_tensors(fam.arch, tp, g);
  }

  Status bind(const format::GgufFile& g, const layers::DeclaredShapes& declared, const DiffusionFamily& /*fam*/) {
    layers::WeightBinder b(g, &packed_, &declared);
    CHIMERA_RETURN_IF_ERROR(bind_embeddings(b, g, n_embd_, &embd_));
    info_.n_vocab = embd_.output.rows;
    layers_.resize((size_t)info_.n_layer);
    for (int64_t i = 0; i < info_.n_layer; ++i) {
      const std::string p = tn::layer_prefix(i);
      DlmLayer& L = layers_[(size_t)i];
      CHIMERA_ASSIGN_OR_RETURN(L.attn_norm, b.vector(tn::at(tn::kAttnNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.ffn_norm, b.vector(tn::at(tn::kFfnNorm, i)));
      CHIMERA_ASSIGN_OR_RETURN(L.attn, layers::bind_attention(b, p, attn_cfg_));
      CHIMERA_ASSIGN_OR_RETURN(L.mlp, layers::bind_gated_mlp(b, p, n_embd_, n_ff_));
    }
    info_.weight_bytes = g.tensor_bytes();
    return Status::ok();
  }

  std::unique_ptr<ModelScratch> new_scratch() const override {
    auto s = std::make_unique<DlmScratch>();
    s->ws.n_embd = n_embd_;
    return s;
  }

  // See runtime/diffusion_model.h. Arguments already validated.
  void run_slice(ModelScratch& scratch, layers::SequenceState& st, const int32_t* tokens, int64_t pos0, int64_t T,
                 int64_t n_kv, int64_t out_row0, int64_t n_out, float* logits, ThreadPool* pool) const override {
    DlmScratch& s = static_cast<DlmScratch&>(scratch);
    reserve(s, T);
    embed_tokens(embd_.tok, tokens, T, s.ws.x.data());
    const layers::AttentionSpan span{&st, 0, T, pos0, n_kv};  // the one sequence, keys [0, n_kv)
    float* x = run_layers(s, T, {&span, 1}, pool);
    if (n_out > 0 && logits)
      write_logits(embd_, x + out_row0 * n_embd_, n_out, n_embd_, eps_, logits, s.ws, pool);
  }

  // Every slice in one forward: the rows of all slices through each weight
  // together, attention per slice on its own state; each wanted row's logits
  // through one lm-head GEMM, scattered to its slice's buffer.
  void run_slices(ModelScratch& scratch, std::span<const DiffusionSlice> slices, ThreadPool* pool) const override {
    DlmScratch& s = static_cast<DlmScratch&>(scratch);
    std::vector<layers::AttentionSpan> spans;
    spans.reserve(slices.size());
    int64_t rows = 0;
    for (const DiffusionSlice& sl : slices) {
      spans.push_back({sl.state, rows, sl.T, sl.pos0, sl.n_kv});
      rows += sl.T;
    }
    if (rows == 0) return;
    reserve(s, rows);
    for (size_t i = 0; i < slices.size(); ++i)
      embed_tokens(embd_.tok, slices[i].tokens, slices[i].T, s.ws.x.data() + spans[i].row * n_embd_);
    float* x = run_layers(s, rows, spans, pool);
    std::vector<OutputRow> picks;
    for (size_t i = 0; i < slices.size(); ++i)
      if (slices[i].logits)
        for (size_t r = 0; r < slices[i].out_rows.size(); ++r)
          picks.push_back({spans[i].row + slices[i].out_rows[r], slices[i].logits + (int64_t)r * info_.n_vocab});
    write_logits_rows(embd_, x, picks, n_embd_, eps_, s.ws, s.logits, pool);
  }

 protected:
  void forward_impl(ModelScratch& scratch, layers::SequenceState& st, const int32_t* tokens, int64_t n,
                    Logits which, float* logits, ThreadPool* pool) const override {
    const int64_t pos0 = st.n_past();
    const int64_t row0 = which == Logits::kAll ? 0 : n - 1;
    const int64_t n_out = which == Logits::kNone ? 0 : which == Logits::kAll ? n : 1;
    run_slice(scratch, st, tokens, pos0, n, pos0 + n, row0, n_out, logits, pool);
    st.advance(n);
  }

 private:
  // Runs every layer over the `rows` embedded rows in s.ws.x (K/V of each
  // span written to its state, its keys [0, n_kv) attended); returns the
  // final hidden rows.
  float* run_layers(DlmScratch& s, int64_t rows, std::span<const layers::AttentionSpan> spans,
                    ThreadPool* pool) const {
    float* x = s.ws.x.data();
    float* h = s.ws.h.data();
    for (size_t l = 0; l < layers_.size(); ++l) {
      const DlmLayer& L = layers_[l];
      for (int64_t t = 0; t < rows; ++t)
        kernels::rms_norm(x + t * n_embd_, L.attn_norm.ptr(), h + t * n_embd_, n_embd_, eps_);
      layers::attention_forward(attn_cfg_, L.attn, h, rows, spans, l, s.attn, h, pool);
      kernels::add(x, h, rows * n_embd_);
      for (int64_t t = 0; t < rows; ++t)
        kernels::rms_norm(x + t * n_embd_, L.ffn_norm.ptr(), h + t * n_embd_, n_embd_, eps_);
      layers::gated_mlp_forward(L.mlp, h, rows, n_embd_, s.mlp, h, pool);
      kernels::add(x, h, rows * n_embd_);
    }
    return x;
  }

  void reserve(DlmScratch& s, int64_t T) const {
    if (T <= s.capacity) return;
    s.capacity = T;
    s.ws.reserve(T);
    s.attn.reserve(attn_cfg_, T);
    s.mlp.reserve(n_ff_, T);
  }

  int64_t n_embd_ = 0, n_ff_ = 0;
  float eps_ = 1e-5f;
  layers::AttentionConfig attn_cfg_;
  Embeddings embd_;
  std::vector<DlmLayer> layers_;
  DiffusionSpec spec_;
};

Result<std::unique_ptr<Model>> load_family(const format::GgufFile& gguf, const DiffusionFamily& fam) {
  return init_model(std::make_unique<DiffusionLm>(), gguf, fam);
}

}  // namespace

Result<std::unique_ptr<Model>> load_llada(const format::GgufFile& gguf) { return load_family(gguf, kLlada); }
Result<std::unique_ptr<Model>> load_dream(const format::GgufFile& gguf) { return load_family(gguf, kDream); }

Result<DiffusionSpec> diffusion_spec(const Model& m) {
  const DiffusionModel* d = m.diffusion();
  if (!d) return invalid_argument("model '" + m.info().arch + "' is not a masked diffusion LM");
  return d->spec();
}

namespace {
// The checks shared by both entry points; the model as the family class.
Result<const DiffusionModel*> check_slice(const Model& m, layers::SequenceState& st, const int32_t* tokens,
                                          int64_t pos0, int64_t T, int64_t n_kv) {
  const DiffusionModel* d = m.diffusion();
  if (!d) return invalid_argument("model '" + m.info().arch + "' is not a masked diffusion LM");
  if (T <= 0 || pos0 < 0) return invalid_argument("diffusion_forward: empty slice or negative position");
  if (n_kv < pos0 + T || n_kv > st.n_ctx())
    return out_of_range("diffusion_forward: key range " + std::to_string(n_kv) + " must cover the slice end " +
                        std::to_string(pos0 + T) + " and fit the context " + std::to_string(st.n_ctx()));
  if (st.n_layers() != (size_t)m.info().n_layer) return invalid_argument("diffusion_forward: state of another model");
  for (int64_t i = 0; i < T; ++i)
    if (tokens[i] < 0 || tokens[i] >= m.info().n_vocab)
      return invalid_argument("token id " + std::to_string(tokens[i]) + " is out of range [0, " +
                              std::to_string(m.info().n_vocab) + ")");
  return d;
}
}  // namespace

Status diffusion_forward(Context& ctx, layers::SequenceState& st, const int32_t* tokens, int64_t pos0, int64_t T,
                         int64_t n_kv, int64_t out_row0, int64_t n_out, float* logits, ThreadPool* pool) {
  CHIMERA_ASSIGN_OR_RETURN(const DiffusionModel* d, check_slice(ctx.model(), st, tokens, pos0, T, n_kv));
  if (out_row0 < 0 || n_out < 0 || out_row0 + n_out > T)
    return invalid_argument("diffusion_forward: logits rows outside the slice");
  d->run_slice(ctx.scratch(), st, tokens, pos0, T, n_kv, out_row0, n_out, logits, pool);
  return Status::ok();
}

Status diffusion_forward_rows(Context& ctx, layers::SequenceState& st, const int32_t* tokens, int64_t pos0,
                              int64_t T, int64_t n_kv, std::span<const int64_t> out_rows, float* logits,
                              ThreadPool* pool) {
  const DiffusionSlice slice{&st, tokens, pos0, T, n_kv, out_rows, logits};
  return diffusion_forward_batch(ctx, {&slice, 1}, pool);
}

Status diffusion_forward_batch(Context& ctx, std::span<const DiffusionSlice> slices, ThreadPool* pool) {
  const DiffusionModel* d = nullptr;
  for (size_t i = 0; i < slices.size(); ++i) {
    const DiffusionSlice& sl = slices[i];
    if (!sl.state || !sl.tokens) return invalid_argument("diffusion_forward: a slice without a state or tokens");
    CHIMERA_ASSIGN_OR_RETURN(d, check_slice(ctx.model(), *sl.state, sl.tokens, sl.pos0, sl.T, sl.n_kv));
    const std::span<const int64_t> rows = sl.out_rows;
    for (size_t r = 0; r < rows.size(); ++r)
      if (rows[r] < 0 || rows[r] >= sl.T || (r > 0 && rows[r] <= rows[r - 1]))
        return invalid_argument("diffusion_forward_rows: logits rows must be increasing and inside the slice");
    if (!rows.empty() && !sl.logits) return invalid_argument("diffusion_forward: logits rows without a buffer");
    for (size_t j = 0; j < i; ++j)
      if (slices[j].state == sl.state) return invalid_argument("diffusion_forward_batch: two slices share a state");
  }
  if (!d) return Status::ok();
  d->run_slices(ctx.scratch(), slices, pool);
  return Status::ok();
}

}  // namespace chimera::models
