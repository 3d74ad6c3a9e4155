// The tensors of arch "phimoe" (models/phimoe.cpp), as llama.cpp's converter
// writes them: LayerNorms with biases, attention with biases, top-k MoE,
// LongRoPE factors when the model has them. Sizes: n_embd, n_vocab, n_head,
// n_head_kv, head_dim, head_dim_v, n_ff (per expert), n_expert, n_rot.
#include "models/tensor_blocks.h"

namespace chimera::models {

namespace {
using R = quant::TensorRole;
constexpr Need kReq = Need::kRequired, kOpt = Need::kOptional;
}  // namespace

const TensorTable& phimoe_tensors() {
  static const TensorTable t = make_table({
      {{tn::kTokenEmbd, {"n_embd", "n_vocab"}, R::kTokenEmbd},
       {tn::kRopeFactorsLong, {"n_rot/2"}, R::kRopeFactors, kOpt, {}, kFillOnes},
       {tn::kRopeFactorsShort, {"n_rot/2"}, R::kRopeFactors, kOpt, {}, kFillOnes},
       {tn::kAttnNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {tn::kAttnNormBias, {"n_embd"}, R::kNorm, kReq, {}, kFillZeros}},
      attention_entries({}, kOpt),
      {{tn::kFfnNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {tn::kFfnNormBias, {"n_embd"}, R::kNorm, kReq, {}, kFillZeros}},
      moe_entries({}),
      {{tn::kOutputNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {tn::kOutputNormBias, {"n_embd"}, R::kNorm, kReq, {}, kFillZeros},
       {tn::kOutput, {"n_embd", "n_vocab"}, R::kOutput, kOpt},  // absent: tied to token_embd
       {tn::kOutputBias, {"n_vocab"}, R::kBias, kOpt, {}, kFillZeros}},
  });
  return t;
}

}  // namespace chimera::models
