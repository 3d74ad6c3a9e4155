// Shared decoder pieces.
#include "models/transformer_util.h"

#include <cmath>
#include <cstring>

#include "format/gguf/tensor_names.h"
#include "kernels/ops.h"

namespace chimera::models {

Status bind_embeddings(const layers::WeightBinder& b, const format::GgufFile& g, int64_t n_embd, Embeddings* e) {
  const format::GgufTensorInfo* t = g.find_tensor(format::tn::kTokenEmbd);
  if (!t) return not_found("missing tensor 'token_embd.weight'");
  const int64_t n_vocab = t->dim(1);
  CHIMERA_ASSIGN_OR_RETURN(e->tok, b.table(format::tn::kTokenEmbd, n_embd, n_vocab));
  CHIMERA_ASSIGN_OR_RETURN(e->output_norm, b.vector(format::tn::kOutputNorm, n_embd));
  CHIMERA_ASSIGN_OR_RETURN(e->output_norm_b, b.optional_vector(format::tn::kOutputNormBias, n_embd));
  if (b.has(format::tn::kOutput)) {
    const format::GgufTensorInfo* o = g.find_tensor(format::tn::kOutput);
    CHIMERA_ASSIGN_OR_RETURN(e->output, b.matrix(format::tn::kOutput, n_embd, o->dim(1)));
    CHIMERA_ASSIGN_OR_RETURN(e->output_b, b.optional_vector(format::tn::kOutputBias, o->dim(1)));
  } else {
    CHIMERA_ASSIGN_OR_RETURN(e->output, b.matrix(format::tn::kTokenEmbd, n_embd, n_vocab));
    e->tied = true;
  }
  return Status::ok();
}

void embed_tokens(const kernels::WeightView& tok, const int32_t* tokens, int64_t T, float* x) {
  for (int64_t t = 0; t < T; ++t) kernels::weight_row_to_f32(tok, tokens[t], x + t * tok.cols);
}

namespace {

// The final norm of one residual row.
void final_norm(const Embeddings& e, const float* xr, float* hr, int64_t n_embd, float eps, FinalNorm norm) {
  if (norm == FinalNorm::kRms)
    kernels::rms_norm(xr, e.output_norm.ptr(), hr, n_embd, eps);
  else
    kernels::layer_norm(xr, e.output_norm.ptr(), e.output_norm_b.ptr(), hr, n_embd, eps);
}

}  // namespace

void write_logits(const Embeddings& e, const float* x, int64_t T, int64_t n_embd, float eps, float* logits,
                  Workspace& ws, ThreadPool* pool, FinalNorm norm) {
  float* h = ws.h.data();
  for (int64_t r = 0; r < T; ++r) final_norm(e, x + r * n_embd, h + r * n_embd, n_embd, eps, norm);
  kernels::matmul(e.output, h, T, n_embd, logits, e.output.rows, pool);
  if (e.output_b.present())
    for (int64_t r = 0; r < T; ++r) kernels::add(logits + r * e.output.rows, e.output_b.ptr(), e.output.rows);
}

void embed_segments(const kernels::WeightView& tok, std::span<const Segment> segs, float* x) {
  for (const Segment& s : segs) embed_tokens(tok, s.tokens(), s.T, x + s.row * tok.cols);
}

std::vector<OutputRow> output_rows(std::span<const Segment> segs, int64_t n_vocab) {
  std::vector<OutputRow> out;
  for (const Segment& s : segs) {
    const BatchItem& it = *s.item;
    if (it.which == Logits::kNone || !it.logits) continue;
    if (it.which == Logits::kAll) {
      for (int64_t t = 0; t < s.T; ++t) out.push_back({s.row + t, it.logits + (s.offset + t) * n_vocab});
    } else if (s.last()) {
      out.push_back({s.row + s.T - 1, it.logits});
    }
  }
  return out;
}

int64_t keep_output_rows(float* x, std::vector<OutputRow>& out, int64_t n_embd) {
  // Sources ascend and src >= i, so moving in order never overwrites a row still to move.
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].src != (int64_t)i)
      std::memmove(x + (int64_t)i * n_embd, x + out[i].src * n_embd, sizeof(float) * (size_t)n_embd);
    out[i].src = (int64_t)i;
  }
  return (int64_t)out.size();
}

void write_logits_segments(const Embeddings& e, const float* x, std::span<const Segment> segs, int64_t n_embd,
                           float eps, Workspace& ws, AlignedBuffer<float>& scratch, ThreadPool* pool,
                           FinalNorm norm, float out_scale) {
  write_logits_rows(e, x, output_rows(segs, e.output.rows), n_embd, eps, ws, scratch, pool, norm, out_scale);
}

void write_logits_rows(const Embeddings& e, const float* x, std::span<const OutputRow> picks, int64_t n_embd,
                       float eps, Workspace& ws, AlignedBuffer<float>& scratch, ThreadPool* pool, FinalNorm norm,
                       float out_scale) {
  if (picks.empty()) return;
  const int64_t nv = e.output.rows;
  const int64_t n_rows = (int64_t)picks.size();
  float* h = ws.h.data();  // the caller reserved >= the micro-batch's rows >= n_rows
  for (int64_t r = 0; r < n_rows; ++r)
    final_norm(e, x + picks[(size_t)r].src * n_embd, h + r * n_embd, n_embd, eps, norm);
  if ((int64_t)scratch.size() < n_rows * nv) scratch.resize((size_t)(n_rows * nv));
  float* out = scratch.data();
  kernels::matmul(e.output, h, n_rows, n_embd, out, nv, pool);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* o = out + r * nv;
    if (e.output_b.present()) kernels::add(o, e.output_b.ptr(), nv);
    if (out_scale != 0.f) kernels::scale(o, out_scale, nv);
    std::memcpy(picks[(size_t)r].dst, o, (size_t)nv * sizeof(float));
  }
}

std::vector<layers::AttentionSpan> attention_spans(std::span<const Segment> segs,
                                                   std::span<const layers::AttentionConfig> seg_cfg) {
  std::vector<layers::AttentionSpan> spans;
  spans.reserve(segs.size());
  for (size_t i = 0; i < segs.size(); ++i) {
    const Segment& sg = segs[i];
    const int64_t pos0 = sg.state().n_past();
    spans.push_back({&sg.state(), sg.row, sg.T, pos0, pos0 + sg.T, seg_cfg.empty() ? nullptr : &seg_cfg[i]});
  }
  return spans;
}

void advance_segments(std::span<const Segment> segs) {
  for (const Segment& s : segs) s.state().advance(s.T);
}

OutputSegments keep_output_segments(std::span<const Segment> segs, std::initializer_list<RowBuffer> bufs) {
  OutputSegments out;
  for (const Segment& s : segs) {
    const BatchItem& it = *s.item;
    if (it.which == Logits::kNone || !it.logits) continue;
    if (it.which == Logits::kLast && !s.last()) continue;
    const int64_t skip = it.which == Logits::kLast ? s.T - 1 : 0;
    const int64_t T = s.T - skip;
    // Kept rows only move towards the front, in order: memmove in place is safe.
    for (const RowBuffer& b : bufs)
      if (s.row + skip != out.rows)
        std::memmove(b.data + out.rows * b.width, b.data + (s.row + skip) * b.width,
                     sizeof(float) * (size_t)(T * b.width));
    out.segs.push_back({s.item, s.offset + skip, T, out.rows});
    out.pos0.push_back(s.state().n_past() + skip);
    out.rows += T;
  }
  return out;
}

}  // namespace chimera::models
