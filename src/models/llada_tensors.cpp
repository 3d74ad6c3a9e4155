// The tensors of the masked diffusion LMs, archs "llada" and "dream"
// (models/llada.cpp): the Llama / Qwen2 block, as llama.cpp's converter writes
// them (Dream's q/k/v biases are the attention block's optional biases).
// Sizes: n_embd, n_vocab, n_head, n_head_kv, head_dim, head_dim_v, n_ff.
#include "models/tensor_blocks.h"

namespace chimera::models {

namespace {
using R = quant::TensorRole;
constexpr Need kReq = Need::kRequired, kOpt = Need::kOptional;
}  // namespace

const TensorTable& llada_tensors() {
  static const TensorTable t = make_table({
      {{tn::kTokenEmbd, {"n_embd", "n_vocab"}, R::kTokenEmbd},
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
