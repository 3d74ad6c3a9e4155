// Pieces shared by decoder-only families: token embedding lookup, the final
// norm + lm-head for only the rows whose logits are wanted (output-row
// pruning), and the residual-stream workspace.
#pragma once

#include "core/memory.h"
#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
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

// Final RMSNorm (or LayerNorm when norm_kind says so) and lm-head on the rows
// `which` selects. Row t of this ubatch is written to logits row row0 + t
// (kAll), or to row 0 when it is the sequence's last token (kLast).
enum class FinalNorm { kRms, kLayer };
void write_logits(const Embeddings& e, const float* x, int64_t T, int64_t n_embd, float eps, Logits which,
                  float* logits, int64_t row0, bool last_chunk, Workspace& ws, ThreadPool* pool,
                  FinalNorm norm = FinalNorm::kRms);

}  // namespace chimera::models
