// The tensors of arch "llama" (models/llama.cpp), as llama.cpp's converter
// writes them. Sizes: n_embd, n_vocab (token_embd rows), n_head, n_head_kv,
// head_dim, head_dim_v, n_ff, n_rot (rotated dimensions per head).
#include "models/tensor_blocks.h"

namespace chimera::models {

namespace {
using R = quant::TensorRole;
constexpr Need kReq = Need::kRequired, kOpt = Need::kOptional;
}  // namespace

const TensorTable& llama_tensors() {
  static const TensorTable t = make_table({
      {{tn::kTokenEmbd, {"n_embd", "n_vocab"}, R::kTokenEmbd},
       {tn::kRopeFreqs, {"n_rot/2"}, R::kRopeFactors, kOpt},  // Llama 3 frequency factors
       {tn::kAttnNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes}},
      attention_entries({}, kOpt),
      {{tn::kFfnNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes}},
      gated_ffn_entries({}),
      {{tn::kOutputNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {tn::kOutput, {"n_embd", "n_vocab"}, R::kOutput, kOpt}},  // absent: tied to token_embd
  });
  return t;
}

}  // namespace chimera::models
