// The tensors of archs "bitnet", "bitnet-b1.58" and "bitnet-25"
// (models/bitnet.cpp): the Llama block with attention / FFN sub-norms, each
// projection with an optional bias and an optional one-element weight scale
// (`.scale`, Microsoft's BitNet GGUFs). Sizes: n_embd, n_vocab, n_head,
// n_head_kv, head_dim, n_ff.
#include "models/tensor_blocks.h"

namespace chimera::models {

namespace {
using R = quant::TensorRole;
constexpr Need kReq = Need::kRequired, kOpt = Need::kOptional;
}  // namespace

const TensorTable& bitnet_tensors() {
  static const TensorTable t = {{
      {tn::kTokenEmbd, {"n_embd", "n_vocab"}, R::kTokenEmbd},
      {tn::kAttnNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
      {tn::kAttnQ, {"n_embd", "n_head*head_dim"}, R::kAttnQ},
      {tn::kAttnQBias, {"n_head*head_dim"}, R::kBias, kOpt},
      {tn::kAttnQScale, {"1"}, R::kScale, kOpt},
      {tn::kAttnK, {"n_embd", "n_head_kv*head_dim"}, R::kAttnK},
      {tn::kAttnKBias, {"n_head_kv*head_dim"}, R::kBias, kOpt},
      {tn::kAttnKScale, {"1"}, R::kScale, kOpt},
      {tn::kAttnV, {"n_embd", "n_head_kv*head_dim"}, R::kAttnV},
      {tn::kAttnVBias, {"n_head_kv*head_dim"}, R::kBias, kOpt},
      {tn::kAttnVScale, {"1"}, R::kScale, kOpt},
      {tn::kAttnOutput, {"n_head*head_dim", "n_embd"}, R::kAttnOutput},
      {tn::kAttnOutputBias, {"n_embd"}, R::kBias, kOpt},
      {tn::kAttnOutputScale, {"1"}, R::kScale, kOpt},
      {tn::kAttnSubNorm, {"n_head*head_dim"}, R::kNorm, kReq, {}, kFillOnes},
      {tn::kFfnNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
      {tn::kFfnGate, {"n_embd", "n_ff"}, R::kFfnGate},
      {tn::kFfnGateBias, {"n_ff"}, R::kBias, kOpt},
      {tn::kFfnGateScale, {"1"}, R::kScale, kOpt},
      {tn::kFfnUp, {"n_embd", "n_ff"}, R::kFfnUp},
      {tn::kFfnUpBias, {"n_ff"}, R::kBias, kOpt},
      {tn::kFfnUpScale, {"1"}, R::kScale, kOpt},
      {tn::kFfnSubNorm, {"n_ff"}, R::kNorm, kReq, {}, kFillOnes},
      {tn::kFfnDown, {"n_ff", "n_embd"}, R::kFfnDown},
      {tn::kFfnDownBias, {"n_embd"}, R::kBias, kOpt},
      {tn::kFfnDownScale, {"1"}, R::kScale, kOpt},
      {tn::kOutputNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
      {tn::kOutput, {"n_embd", "n_vocab"}, R::kOutput, kOpt},  // absent: tied to token_embd
  }};
  return t;
}

}  // namespace chimera::models
