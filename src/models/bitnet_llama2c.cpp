// Forward pass of the ternary llama2.c-style BitNet checkpoints (GGUF arch
// "bitnet" with bitnet.bitlinear = "absmax-int8", written by `chimera convert
// --from bitnet-llama2c`; format/bitnet_llama2c/bitnet_llama2c.h). Semantics
// ($CHIMERA_SHARED/models/README.md), which differ from llama.cpp's bitnet:
//   bitnorm(v) = v / (sqrt(mean(v^2)) * n)   (no weights, no epsilon)
//   BitLinear(v): a = max|v| / 127, q = round(v / a) as int8 (half away from
//     zero), y[i] = (sum_j code[i][j] * q[j]) * scale * a
//   layer: h = bitnorm(x); q,k,v = BitLinear(h); RoPE adjacent pairs theta
//   10000; causal GQA attention 1/sqrt(head_dim); x += BitLinear_wo(bitnorm(o));
//   h = bitnorm(x); g = silu(BL_w1(h)) * BL_w3(h); x += BL_w2(bitnorm(g));
//   final RMSNorm (stored weights, eps) and logits = x . embedding^T (fp32).
// Layout: at load every ternary matrix (TQ2_0, unit block scales; flattened
// when its rows are not a multiple of 256) is decoded once into int8 codes
// [out][in] (4x the TQ2_0 bytes; these checkpoints are a few MB). Precision:
// the ternary x int8 dot is an exact int32; everything else is f32 in the
// order of the reference implementation that produced the reference
// sequences (BNRV runbit.c, a llama2.c fork; its timing lines end the
// reference text): sums left to right, no FMA, expf/cosf/sinf/powf, every
// token's row computed as that token alone (layer-major over the rows of a
// micro-batch, possibly of several sequences; batch and decode agree bit for
// bit), and in particular
//   bitnorm: r = 1/sqrtf(ss/n); r /= n; out = v * r      (not v / (sqrt*n))
//   quant:   a = (float)(max/127.0); q = round(v * (float)(1.0/a))
//   dequant: y = (float)acc * (scale * a)               (not (acc*scale)*a)
// The order matters because the int8 rounding amplifies 1-ulp differences:
// with v / (sqrt*n) and (acc*scale)*a, bitnet-3M left the reference at
// sequence index 108 (logit gap 0.002).
// Tolerance: the reference greedy sequences must match token for token
// (tests/models/bitnet_llama2c_test.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "format/gguf/tensor_names.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/type_traits.h"
#include "layers/weights.h"
#include "models/hparams.h"
#include "models/model.h"
#include "models/transformer_util.h"

namespace chimera::models {

namespace tn = format::tn;
namespace {

struct CodeMatrix {
  int64_t out = 0, in = 0;
  float scale = 1.f;
  std::vector<int8_t> codes;
};

// The checks of bind_codes that read only the file's header: the tensor
// base + ".weight" exists, holds in x out codes of a supported type.
Result<const format::GgufTensorInfo*> check_codes(const format::GgufFile& g, const std::string& base, int64_t in,
                                                  int64_t out) {
  const format::GgufTensorInfo* t = g.find_tensor(base + ".weight");
  if (!t) return invalid_argument("missing tensor " + base + ".weight");
  if ((int64_t)t->n_elements != in * out)
    return invalid_argument(base + ".weight: " + t->shape_string() + " does not hold " + std::to_string(out) + "x" +
                            std::to_string(in) + " elements");
  const kernels::WeightTypeTraits* tr = kernels::weight_type_traits(t->type);
  if (!tr || (t->type != format::GgmlType::TQ2_0 && t->type != format::GgmlType::TQ1_0 &&
              t->type != format::GgmlType::F32))
    return unsupported(base + ".weight: absmax-int8 BitLinear needs TQ2_0, TQ1_0 or F32 codes");
  return t;
}

Result<CodeMatrix> bind_codes(const format::GgufFile& g, const std::string& base, int64_t in, int64_t out) {
  CHIMERA_ASSIGN_OR_RETURN(const format::GgufTensorInfo* t, check_codes(g, base, in, out));
  const kernels::WeightTypeTraits* tr = kernels::weight_type_traits(t->type);
  CodeMatrix m;
  m.out = out;
  m.in = in;
  std::vector<float> f((size_t)(in * out));
  tr->row_to_f32(t->data, f.data(), in * out);
  m.codes.resize(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != -1.f && f[i] != 0.f && f[i] != 1.f)
      return invalid_argument(base + ".weight: values must be ternary codes -1/0/1 (unit block scales)");
    m.codes[i] = (int8_t)f[i];
  }
  const format::GgufTensorInfo* s = g.find_tensor(base + ".scale");
  if (s) {
    if (s->type != format::GgmlType::F32 || s->n_elements != 1) return invalid_argument(base + ".scale must be F32 [1]");
    std::memcpy(&m.scale, s->data, 4);
  }
  return m;
}

// y[r][m.out] = BitLinear of rows r < n already quantized: q[r][m.in] (int8),
// a[r]. Each weight row is read once for all n rows; the int32 dot is exact
// in any order and every output is one range's, so threads do not change it.
void bitlinear(const CodeMatrix& m, const int8_t* q, const float* a, int64_t n, float* y, ThreadPool* pool) {
  auto rows = [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const int8_t* c = m.codes.data() + i * m.in;
      for (int64_t r = 0; r < n; ++r) {
        const int8_t* qr = q + r * m.in;
        int32_t s = 0;
        for (int64_t j = 0; j < m.in; ++j) s += (int32_t)c[j] * (int32_t)qr[j];
        y[r * m.out + i] = (float)s * (m.scale * a[r]);  // reference: one combined scale, not (s*scale)*a
      }
    }
  };
  // Threads only for prefill-sized work (~1 ms): for a few decode rows of
  // these small matrices a pool wake-up costs more than it saves.
  if (pool && pool->size() > 1 && n * m.out * m.in >= (int64_t)1 << 22)
    pool->parallel_for(m.out, rows, 16);
  else
    rows(0, m.out, 0);
}

// bitnorm then absmax int8 quantization of v[n] into q; returns a.
float bitnorm_quant(const float* v, int64_t n, float* tmp, int8_t* q) {
  float ss = 0.f;
  for (int64_t j = 0; j < n; ++j) ss += v[j] * v[j];
  ss /= (float)n;
  float scale = 1.0f / std::sqrt(ss);  // reciprocal first, then / n, then one multiply per element
  scale /= (float)n;
  float amax = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    tmp[j] = v[j] * scale;
    amax = std::fmax(amax, std::fabs(tmp[j]));
  }
  const float a = (float)((double)amax / 127.0);
  if (!(a > 0.f)) {
    for (int64_t j = 0; j < n; ++j) q[j] = 0;
    return 0.f;
  }
  const float inv = (float)(1.0 / (double)a);  // reference: multiply by the f32 reciprocal of a
  for (int64_t j = 0; j < n; ++j) q[j] = (int8_t)std::round(tmp[j] * inv);
  return a;
}

struct L2cLayer {
  CodeMatrix wq, wk, wv, wo, w1, w2, w3;
};

// Per-context scratch (Model::new_scratch) for kMaxUbatch rows (tmp: one
// row; att_scores grows to the longest context attended).
struct L2cScratch final : ModelScratch {
  std::vector<float> x, q, k, v, att, g, u, hb, a, tmp, att_scores;
  std::vector<int8_t> qa;
};

class BitnetLlama2cModel final : public MicroBatchedModel {
 public:
  std::vector<layers::LayerStateSpec> state_specs() const override {
    return std::vector<layers::LayerStateSpec>(layers_.size(), layers::KvSpec{kv_dim_, kv_dim_});
  }

  // No tensor table (the TQ2_0 codes of a matrix whose width is not a multiple
  // of 256 are stored as [256, n/256]): the plan checks each matrix's name,
  // element count and type (check_codes) and returns no declared shapes.
  Result<layers::DeclaredShapes> plan(const format::GgufFile& g) {
    HParams hp(g, "bitnet");
    CHIMERA_ASSIGN_OR_RETURN(dim_, hp.count("embedding_length", 1 << 20));
    CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, hp.count("block_count", 4096));
    CHIMERA_ASSIGN_OR_RETURN(hid_, hp.count("feed_forward_length", 1 << 22));
    CHIMERA_ASSIGN_OR_RETURN(n_head_, hp.count("attention.head_count", 1 << 14));
    n_head_kv_ = hp.count_or("attention.head_count_kv", n_head_);
    if (n_head_kv_ < 1 || n_head_ % n_head_kv_ != 0 || dim_ % n_head_ != 0)
      return invalid_argument("inconsistent attention head counts");
    head_dim_ = dim_ / n_head_;
    kv_dim_ = head_dim_ * n_head_kv_;
    eps_ = hp.real_or("attention.layer_norm_rms_epsilon", 1e-5f);
    info_.n_ctx_train = hp.count_or("context_length", 512);
    info_.n_layer = n_layer;
    info_.n_embd = dim_;
    CHIMERA_ASSIGN_OR_RETURN(rope_, read_rope(hp, kernels::RopeMode::kNorm, head_dim_, info_.n_ctx_train));
    for (const char* name : {tn::kTokenEmbd, tn::kOutputNorm})
      if (!g.find_tensor(name)) return invalid_argument(std::string("missing ") + name);
    for (int64_t i = 0; i < n_layer; ++i) {
      const std::string p = tn::layer_prefix(i);
      for (const auto& [suffix, in, out] : matrices())
        CHIMERA_RETURN_IF_ERROR(check_codes(g, p + suffix, in, out).status());
    }
    return layers::DeclaredShapes{};
  }

  Status bind(const format::GgufFile& g, const layers::DeclaredShapes& /*declared: none*/) {
    layers::WeightBinder b(g, &packed_);
    CHIMERA_RETURN_IF_ERROR(bind_embeddings(b, g, dim_, &embd_));
    info_.n_vocab = embd_.output.rows;
    layers_.resize((size_t)info_.n_layer);
    for (int64_t i = 0; i < info_.n_layer; ++i) {
      const std::string p = tn::layer_prefix(i);
      L2cLayer& L = layers_[(size_t)i];
      CHIMERA_ASSIGN_OR_RETURN(L.wq, bind_codes(g, tn::linear(p, tn::kAttnQ), dim_, dim_));
      CHIMERA_ASSIGN_OR_RETURN(L.wk, bind_codes(g, tn::linear(p, tn::kAttnK), dim_, kv_dim_));
      CHIMERA_ASSIGN_OR_RETURN(L.wv, bind_codes(g, tn::linear(p, tn::kAttnV), dim_, kv_dim_));
      CHIMERA_ASSIGN_OR_RETURN(L.wo, bind_codes(g, tn::linear(p, tn::kAttnOutput), dim_, dim_));
      CHIMERA_ASSIGN_OR_RETURN(L.w1, bind_codes(g, tn::linear(p, tn::kFfnGate), dim_, hid_));
      CHIMERA_ASSIGN_OR_RETURN(L.w2, bind_codes(g, tn::linear(p, tn::kFfnDown), hid_, dim_));
      CHIMERA_ASSIGN_OR_RETURN(L.w3, bind_codes(g, tn::linear(p, tn::kFfnUp), dim_, hid_));
    }
    info_.weight_bytes = g.tensor_bytes();
    if (!embd_.output_norm.present()) return invalid_argument("missing output_norm.weight");
    cls_.resize((size_t)(info_.n_vocab * dim_));
    for (int64_t v = 0; v < info_.n_vocab; ++v) kernels::weight_row_to_f32(embd_.output, v, cls_.data() + v * dim_);
    return Status::ok();
  }

  // The seven BitLinear matrices of a layer: name suffix, in, out.
  std::vector<std::tuple<const char*, int64_t, int64_t>> matrices() const {
    return {{".attn_q", dim_, dim_},   {".attn_k", dim_, kv_dim_},  {".attn_v", dim_, kv_dim_}, {".attn_output", dim_, dim_},
            {".ffn_gate", dim_, hid_}, {".ffn_down", hid_, dim_},   {".ffn_up", dim_, hid_}};
  }

  std::unique_ptr<ModelScratch> new_scratch() const override {
    auto s = std::make_unique<L2cScratch>();
    const int64_t wmax = std::max(dim_, hid_);
    const auto rows = [](int64_t width) { return (size_t)(kMaxUbatch * width); };
    s->tmp.resize((size_t)wmax);
    s->qa.resize(rows(wmax));
    s->a.resize(rows(1));
    s->x.resize(rows(dim_));
    s->q.resize(rows(dim_));
    s->k.resize(rows(kv_dim_));
    s->v.resize(rows(kv_dim_));
    s->att.resize(rows(dim_));
    s->hb.resize(rows(dim_));
    s->g.resize(rows(hid_));
    s->u.resize(rows(hid_));
    return s;
  }

 private:

  // RoPE of one row (llama2.c order: pair index = position within the head,
  // freq = 1 / 10000^(2j / head_size), cosf/sinf of pos * freq in f32).
  void rope_row(float* v, int64_t n, int64_t pos) const {
    for (int64_t i = 0; i < n; i += 2) {
      const int64_t hd = i % head_dim_;
      const float freq = 1.0f / std::pow(rope_.freq_base, (float)hd / (float)head_dim_);
      const float val = (float)pos * freq;
      const float fcr = std::cos(val), fci = std::sin(val);
      const float v0 = v[i], v1 = v[i + 1];
      v[i] = v0 * fcr - v1 * fci;
      v[i + 1] = v0 * fci + v1 * fcr;
    }
  }

  // Causal attention of one query row at position pos over the cache, f32 in
  // llama2.c's order (dot, / sqrt(head_dim), softmax with max, weighted sum).
  void attend(L2cScratch& s, const layers::KvCache& kv, const float* q, int64_t pos, float* out) const {
    const int64_t kv_mul = n_head_ / n_head_kv_;
    const float inv = std::sqrt((float)head_dim_);
    for (int64_t h = 0; h < n_head_; ++h) {
      const float* qh = q + h * head_dim_;
      float* att = s.att_scores.data();
      for (int64_t t = 0; t <= pos; ++t) {
        const float* k = kv.k_row(t) + (h / kv_mul) * head_dim_;
        float score = 0.f;
        for (int64_t i = 0; i < head_dim_; ++i) score += qh[i] * k[i];
        att[t] = score / inv;
      }
      float mx = att[0];
      for (int64_t t = 1; t <= pos; ++t) mx = std::fmax(mx, att[t]);
      float sum = 0.f;
      for (int64_t t = 0; t <= pos; ++t) {
        att[t] = std::exp(att[t] - mx);
        sum += att[t];
      }
      for (int64_t t = 0; t <= pos; ++t) att[t] /= sum;
      float* o = out + h * head_dim_;
      for (int64_t i = 0; i < head_dim_; ++i) o[i] = 0.f;
      for (int64_t t = 0; t <= pos; ++t) {
        const float* v = kv.v_row(t) + (h / kv_mul) * head_dim_;
        const float a = att[t];
        for (int64_t i = 0; i < head_dim_; ++i) o[i] += a * v[i];
      }
    }
  }

  // bitnorm + int8 quantization of rows r < n of v[r][width] into s.qa / s.a.
  static void quant_rows(L2cScratch& s, const float* v, int64_t n, int64_t width) {
    for (int64_t r = 0; r < n; ++r)
      s.a[(size_t)r] = bitnorm_quant(v + r * width, width, s.tmp.data(), s.qa.data() + r * width);
  }

  // Layer by layer over the rows of all segments: each row is computed
  // exactly as the reference computes that token alone (its own bitnorm and
  // int8 scale, the same f32 order), so neither its neighbours nor the
  // chunking change it. The BitLinears read each weight row once for all
  // rows; RoPE, K/V writes and attention run per segment at its positions.
  // The last layer's FFN runs only on the rows whose logits are wanted.
  void ubatch_segments(ModelScratch& scratch, std::span<const Segment> segs, int64_t rows,
                       ThreadPool* pool) const override {
    L2cScratch& s = static_cast<L2cScratch&>(scratch);
    const int64_t max_pos = [&] {
      int64_t p = 0;
      for (const Segment& sg : segs) p = std::max(p, sg.state().n_past() + sg.T);
      return p;
    }();
    if ((int64_t)s.att_scores.size() < max_pos) s.att_scores.resize((size_t)max_pos);
    float* x = s.x.data();
    float* q = s.q.data();
    float* k = s.k.data();
    float* v = s.v.data();
    float* att = s.att.data();
    float* gt = s.g.data();
    float* up = s.u.data();
    float* hb = s.hb.data();
    const int8_t* qa = s.qa.data();
    const float* a = s.a.data();
    for (const Segment& sg : segs)
      for (int64_t t = 0; t < sg.T; ++t) kernels::weight_row_to_f32(embd_.tok, sg.tokens()[t], x + (sg.row + t) * dim_);
    OutputSegments kept;
    for (size_t l = 0; l < layers_.size(); ++l) {
      const L2cLayer& L = layers_[l];
      quant_rows(s, x, rows, dim_);
      bitlinear(L.wq, qa, a, rows, q, pool);
      bitlinear(L.wk, qa, a, rows, k, pool);
      bitlinear(L.wv, qa, a, rows, v, pool);
      for (const Segment& sg : segs) {
        layers::KvCache& kv = *sg.state().kv(l);
        const int64_t pos0 = sg.state().n_past();
        for (int64_t t = 0; t < sg.T; ++t) {
          rope_row(q + (sg.row + t) * dim_, dim_, pos0 + t);
          rope_row(k + (sg.row + t) * kv_dim_, kv_dim_, pos0 + t);
        }
        kv.store(pos0, sg.T, k + sg.row * kv_dim_, kv_dim_, v + sg.row * kv_dim_, kv_dim_);
        for (int64_t t = 0; t < sg.T; ++t) attend(s, kv, q + (sg.row + t) * dim_, pos0 + t, att + (sg.row + t) * dim_);
      }
      quant_rows(s, att, rows, dim_);
      bitlinear(L.wo, qa, a, rows, hb, pool);
      for (int64_t i = 0; i < rows * dim_; ++i) x[i] += hb[i];
      int64_t n = rows;
      if (l + 1 == layers_.size()) {
        kept = keep_output_segments(segs, {{x, dim_}});
        if ((n = kept.rows) == 0) break;
      }
      quant_rows(s, x, n, dim_);
      bitlinear(L.w1, qa, a, n, gt, pool);
      bitlinear(L.w3, qa, a, n, up, pool);
      for (int64_t i = 0; i < n * hid_; ++i) {
        float val = gt[i];
        val *= 1.0f / (1.0f + std::exp(-val));
        gt[i] = val * up[i];
      }
      quant_rows(s, gt, n, hid_);
      bitlinear(L.w2, qa, a, n, hb, pool);
      for (int64_t i = 0; i < n * dim_; ++i) x[i] += hb[i];
    }
    advance_segments(segs);
    // Final RMSNorm (llama2.c rmsnorm) and classifier, sequential f32, on the
    // kept rows (write_logits_segments' placement).
    const int64_t nv = info_.n_vocab;
    for (const Segment& sg : kept.segs) {
      for (int64_t t = 0; t < sg.T; ++t) {
        const float* xr = x + (sg.row + t) * dim_;
        float* out = sg.item->which == Logits::kAll ? sg.item->logits + (sg.offset + t) * nv : sg.item->logits;
        float ss = 0.f;
        for (int64_t j = 0; j < dim_; ++j) ss += xr[j] * xr[j];
        ss /= (float)dim_;
        ss += eps_;
        ss = 1.0f / std::sqrt(ss);
        for (int64_t j = 0; j < dim_; ++j) s.tmp[(size_t)j] = embd_.output_norm.ptr()[j] * (ss * xr[j]);
        for (int64_t vi = 0; vi < nv; ++vi) {
          const float* e = cls_.data() + vi * dim_;
          float val = 0.f;
          for (int64_t j = 0; j < dim_; ++j) val += e[j] * s.tmp[(size_t)j];
          out[vi] = val;
        }
      }
    }
  }

  int64_t dim_ = 0, hid_ = 0, n_head_ = 0, n_head_kv_ = 0, head_dim_ = 0, kv_dim_ = 0;
  float eps_ = 1e-5f;
  kernels::RopeParams rope_;
  Embeddings embd_;
  std::vector<L2cLayer> layers_;
  std::vector<float> cls_;  // the classifier (output embedding) as f32 rows
};

}  // namespace

Result<std::unique_ptr<Model>> load_bitnet_llama2c(const format::GgufFile& gguf) {
  return init_model(std::make_unique<BitnetLlama2cModel>(), gguf);
}

}  // namespace chimera::models
