// The tensors of arch "phi4flash" (models/phi4flash.cpp), as `chimera convert`
// writes them (docs/PHI4FLASH.md). Layer tags from the layer plan: "mamba"
// (Mamba-1), "gmu", "self_attn" (fused q|k|v) or "cross_attn" (q only), and
// "diff_attn" on both attention kinds. Sizes: n_embd, n_vocab, n_ff, n_head,
// n_head_kv, head_dim, and the Mamba-1 sizes (tensor_blocks.h).
#include "models/tensor_blocks.h"

namespace chimera::models {

namespace {
using R = quant::TensorRole;
constexpr Need kReq = Need::kRequired, kOpt = Need::kOptional;
}  // namespace

const TensorTable& phi4flash_tensors() {
  static const TensorTable t = make_table({
      {{tn::kTokenEmbd, {"n_embd", "n_vocab"}, R::kTokenEmbd},
       {tn::kAttnNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {tn::kAttnNormBias, {"n_embd"}, R::kNorm, kReq, {}, kFillZeros}},
      mamba1_entries("mamba"),
      {{tn::kGmuIn, {"n_embd", "d_inner"}, R::kGmuIn, kReq, "gmu"},
       {tn::kGmuInBias, {"d_inner"}, R::kBias, kOpt, "gmu"},
       {tn::kGmuOut, {"d_inner", "n_embd"}, R::kGmuOut, kReq, "gmu"},
       {tn::kGmuOutBias, {"n_embd"}, R::kBias, kOpt, "gmu"},
       {tn::kAttnQkv, {"n_embd", "(n_head+2*n_head_kv)*head_dim"}, R::kAttnQkv, kReq, "self_attn"},
       {tn::kAttnQkvBias, {"(n_head+2*n_head_kv)*head_dim"}, R::kBias, kOpt, "self_attn", kFillZeros},
       {tn::kAttnQ, {"n_embd", "n_head*head_dim"}, R::kAttnQ, kReq, "cross_attn"},
       {tn::kAttnQBias, {"n_head*head_dim"}, R::kBias, kOpt, "cross_attn", kFillZeros},
       {tn::kAttnOutput, {"n_head*head_dim", "n_embd"}, R::kAttnOutput, kReq, "diff_attn"},
       {tn::kAttnOutputBias, {"n_embd"}, R::kBias, kOpt, "diff_attn", kFillZeros},
       {tn::kAttnLambdaQ1, {"head_dim"}, R::kAttnParam, kReq, "diff_attn", fill_normal(0.1f)},
       {tn::kAttnLambdaK1, {"head_dim"}, R::kAttnParam, kReq, "diff_attn", fill_normal(0.1f)},
       {tn::kAttnLambdaQ2, {"head_dim"}, R::kAttnParam, kReq, "diff_attn", fill_normal(0.1f)},
       {tn::kAttnLambdaK2, {"head_dim"}, R::kAttnParam, kReq, "diff_attn", fill_normal(0.1f)},
       {tn::kAttnSubNorm, {"2*head_dim"}, R::kNorm, kReq, "diff_attn", kFillOnes},
       {tn::kFfnNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {tn::kFfnNormBias, {"n_embd"}, R::kNorm, kReq, {}, kFillZeros},
       {tn::kFfnUp, {"n_embd", "2*n_ff"}, R::kFfnUp},  // [gate | up]
       {tn::kFfnUpBias, {"2*n_ff"}, R::kBias, kOpt},
       {tn::kFfnDown, {"n_ff", "n_embd"}, R::kFfnDown},
       {tn::kFfnDownBias, {"n_embd"}, R::kBias, kOpt},
       {tn::kOutputNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {tn::kOutputNormBias, {"n_embd"}, R::kNorm, kReq, {}, kFillZeros},
       {tn::kOutput, {"n_embd", "n_vocab"}, R::kOutput, kOpt}},  // absent: tied to token_embd
  });
  return t;
}

}  // namespace chimera::models
