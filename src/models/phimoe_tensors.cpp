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
      {{"token_embd.weight", {"n_embd", "n_vocab"}, R::kTokenEmbd},
       {"rope_factors_long.weight", {"n_rot/2"}, R::kRopeFactors, kOpt, {}, kFillOnes},
       {"rope_factors_short.weight", {"n_rot/2"}, R::kRopeFactors, kOpt, {}, kFillOnes},
       {"blk.{i}.attn_norm.weight", {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {"blk.{i}.attn_norm.bias", {"n_embd"}, R::kNorm, kReq, {}, kFillZeros}},
      attention_entries({}, kOpt),
      {{"blk.{i}.ffn_norm.weight", {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {"blk.{i}.ffn_norm.bias", {"n_embd"}, R::kNorm, kReq, {}, kFillZeros}},
      moe_entries({}),
      {{"output_norm.weight", {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {"output_norm.bias", {"n_embd"}, R::kNorm, kReq, {}, kFillZeros},
       {"output.weight", {"n_embd", "n_vocab"}, R::kOutput, kOpt},  // absent: tied to token_embd
       {"output.bias", {"n_vocab"}, R::kBias, kOpt, {}, kFillZeros}},
  });
  return t;
}

}  // namespace chimera::models
