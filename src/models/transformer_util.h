// Pieces shared by the families' forwards (MicroBatchedModel::ubatch_segments):
// token embedding lookup, the attention spans and state advance of a
// micro-batch's segments, output-row pruning and the final norm + lm-head for
// only the rows whose logits are wanted, and the residual-stream workspace.
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "core/memory.h"
#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
#include "layers/attention_block.h"
#include "layers/weights.h"
#include "models/model.h"

namespace chimera::models {

struct Embeddings {
  kernels::WeightView tok;     // token_embd.weight [n_embd, n_vocab]
  kernels::WeightView output;  // output.weight, or tok when tied
  layers::Vec output_norm;     // output_norm.weight
  layers::Vec output_norm_b;   // output_norm.bias (optional)
  layers::Vec output_b;        // output.bias (optional)
  bool tied = false;
};

// Binds token_embd / output_norm / output (falls back to tied embeddings).
Status bind_embeddings(const layers::WeightBinder& b, const format::GgufFile& g, int64_t n_embd, Embeddings* e);

// x[t] = row tokens[t] of the embedding table (as float32).
void embed_tokens(const kernels::WeightView& tok, const int32_t* tokens, int64_t T, float* x);

struct Workspace {
  int64_t n_embd = 0;
  AlignedBuffer<float> x, h;
  void reserve(int64_t T) {
    if ((int64_t)x.size() < T * n_embd) {
      x.resize((size_t)(T * n_embd));
      h.resize((size_t)(T * n_embd));
    }
  }
};

// Final RMSNorm (or LayerNorm when norm says so) and lm-head on the T rows of
// x, written to logits rows 0 .. T-1 (the diffusion LMs' canvas slices).
enum class FinalNorm { kRms, kLayer };
void write_logits(const Embeddings& e, const float* x, int64_t T, int64_t n_embd, float eps, float* logits,
                  Workspace& ws, ThreadPool* pool, FinalNorm norm = FinalNorm::kRms);

// Fused multi-sequence micro-batches (MicroBatchedModel::ubatch_segments):
// x row seg.row + t = embedding of segment token t, for every segment.
void embed_segments(const kernels::WeightView& tok, std::span<const Segment> segs, float* x);

// Final norm + lm-head for the rows of every segment whose item wants them
// (kAll: every row, to logits row offset + t; kLast: the item's last token, to
// row 0), one lm-head GEMM for all, each row scattered to its item's logits
// buffer; out_scale != 0 multiplies the logits (Granite's 1 / logit_scale).
void write_logits_segments(const Embeddings& e, const float* x, std::span<const Segment> segs, int64_t n_embd,
                           float eps, Workspace& ws, AlignedBuffer<float>& scratch, ThreadPool* pool,
                           FinalNorm norm = FinalNorm::kRms, float out_scale = 0.f);

// The rows of a fused micro-batch whose logits are wanted, in row order: row
// src of x gives logits row dst (what write_logits_segments computes).
struct OutputRow {
  int64_t src;
  float* dst;
};
std::vector<OutputRow> output_rows(std::span<const Segment> segs, int64_t n_vocab);

// Last-layer row pruning (llama.cpp does the same): after the last layer's
// token mixer only the rows whose logits are wanted feed anything, so the rest
// of that layer (its FFN / MoE) runs on those rows alone. Moves the rows `out`
// names to the front of x (out[i].src becomes i) and returns how many there
// are (0 when no logits are wanted: skip the rest of the layer); then
// write_logits_rows(out) writes them.
int64_t keep_output_rows(float* x, std::vector<OutputRow>& out, int64_t n_embd);

// write_logits_segments on the rows `out` names.
void write_logits_rows(const Embeddings& e, const float* x, std::span<const OutputRow> out, int64_t n_embd, float eps,
                       Workspace& ws, AlignedBuffer<float>& scratch, ThreadPool* pool,
                       FinalNorm norm = FinalNorm::kRms, float out_scale = 0.f);

// The spans of layers::attention_forward for the segments of a micro-batch:
// each at its state's next position, attending to every key so far; seg_cfg,
// when not empty, holds segment i's RoPE / kernel config (PhiMoE's LongRoPE
// factors follow each sequence's length; the spans point into it).
std::vector<layers::AttentionSpan> attention_spans(std::span<const Segment> segs,
                                                   std::span<const layers::AttentionConfig> seg_cfg = {});

// Advances every segment's state by its row count (end of a micro-batch).
void advance_segments(std::span<const Segment> segs);

// Output-row pruning as keep_output_rows, with the kept rows described as
// segments (phi4flash's cross decoder runs per-sequence attention on them):
// the rows whose logits are wanted, in segment order, moved to the
// front of each buffer in `bufs` (pointer, floats per row) and described by
// `segs` (row renumbered, offset / T narrowed to the kept rows: a kLast
// segment keeps its last row on the item's last piece, kAll all rows, others
// none), so write_logits_segments(segs) writes the same logits as for the
// full micro-batch. pos0[i]: position of segs[i]'s first row given states not
// yet advanced for this micro-batch.
struct OutputSegments {
  std::vector<Segment> segs;
  std::vector<int64_t> pos0;
  int64_t rows = 0;
};
struct RowBuffer {
  float* data;
  int64_t width;
};
OutputSegments keep_output_segments(std::span<const Segment> segs, std::initializer_list<RowBuffer> bufs);

}  // namespace chimera::models
