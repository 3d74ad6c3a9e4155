// Shared decoder pieces.
#include "models/transformer_util.h"

#include "kernels/ops.h"

namespace chimera::models {

Status bind_embeddings(const layers::WeightBinder& b, const format::GgufFile& g, int64_t n_embd, Embeddings* e) {
  const format::GgufTensorInfo* t = g.find_tensor("token_embd.weight");
  if (!t) return not_found("missing tensor 'token_embd.weight'");
  const int64_t n_vocab = t->dim(1);
  CHIMERA_ASSIGN_OR_RETURN(e->tok, b.matrix("token_embd.weight", n_embd, n_vocab));
  CHIMERA_ASSIGN_OR_RETURN(e->output_norm, b.vector("output_norm.weight", n_embd));
  CHIMERA_ASSIGN_OR_RETURN(e->output_norm_b, b.optional_vector("output_norm.bias", n_embd));
  if (b.has("output.weight")) {
    const format::GgufTensorInfo* o = g.find_tensor("output.weight");
    CHIMERA_ASSIGN_OR_RETURN(e->output, b.matrix("output.weight", n_embd, o->dim(1)));
    CHIMERA_ASSIGN_OR_RETURN(e->output_b, b.optional_vector("output.bias", o->dim(1)));
  } else {
    e->output = e->tok;
    e->tied = true;
  }
  return Status::ok();
}

void embed_tokens(const kernels::WeightView& tok, const int32_t* tokens, int64_t T, float* x) {
  for (int64_t t = 0; t < T; ++t) kernels::weight_row_to_f32(tok, tokens[t], x + t * tok.cols);
}

void write_logits(const Embeddings& e, const float* x, int64_t T, int64_t n_embd, float eps, Logits which,
                  float* logits, int64_t row0, bool last_chunk, Workspace& ws, ThreadPool* pool, FinalNorm norm) {
  if (which == Logits::kNone || logits == nullptr) return;
  int64_t first = 0, n_rows = T;
  float* out = logits + row0 * e.output.rows;
  if (which == Logits::kLast) {
    if (!last_chunk) return;
    first = T - 1;
    n_rows = 1;
    out = logits;
  }
  float* h = ws.h.data();
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + (first + r) * n_embd;
    if (norm == FinalNorm::kRms)
      kernels::rms_norm(xr, e.output_norm.ptr(), h + r * n_embd, n_embd, eps);
    else
      kernels::layer_norm(xr, e.output_norm.ptr(), e.output_norm_b.ptr(), h + r * n_embd, n_embd, eps);
  }
  kernels::matmul(e.output, h, n_rows, n_embd, out, e.output.rows, pool);
  if (e.output_b.present())
    for (int64_t r = 0; r < n_rows; ++r) kernels::add(out + r * e.output.rows, e.output_b.ptr(), e.output.rows);
}

}  // namespace chimera::models
