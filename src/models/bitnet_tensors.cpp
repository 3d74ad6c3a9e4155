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
      {"token_embd.weight", {"n_embd", "n_vocab"}, R::kTokenEmbd},
      {"blk.{i}.attn_norm.weight", {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
      {"blk.{i}.attn_q.weight", {"n_embd", "n_head*head_dim"}, R::kAttnQ},
      {"blk.{i}.attn_q.bias", {"n_head*head_dim"}, R::kBias, kOpt},
      {"blk.{i}.attn_q.scale", {"1"}, R::kScale, kOpt},
      {"blk.{i}.attn_k.weight", {"n_embd", "n_head_kv*head_dim"}, R::kAttnK},
      {"blk.{i}.attn_k.bias", {"n_head_kv*head_dim"}, R::kBias, kOpt},
      {"blk.{i}.attn_k.scale", {"1"}, R::kScale, kOpt},
      {"blk.{i}.attn_v.weight", {"n_embd", "n_head_kv*head_dim"}, R::kAttnV},
      {"blk.{i}.attn_v.bias", {"n_head_kv*head_dim"}, R::kBias, kOpt},
      {"blk.{i}.attn_v.scale", {"1"}, R::kScale, kOpt},
      {"blk.{i}.attn_output.weight", {"n_head*head_dim", "n_embd"}, R::kAttnOutput},
      {"blk.{i}.attn_output.bias", {"n_embd"}, R::kBias, kOpt},
      {"blk.{i}.attn_output.scale", {"1"}, R::kScale, kOpt},
      {"blk.{i}.attn_sub_norm.weight", {"n_head*head_dim"}, R::kNorm, kReq, {}, kFillOnes},
      {"blk.{i}.ffn_norm.weight", {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
      {"blk.{i}.ffn_gate.weight", {"n_embd", "n_ff"}, R::kFfnGate},
      {"blk.{i}.ffn_gate.bias", {"n_ff"}, R::kBias, kOpt},
      {"blk.{i}.ffn_gate.scale", {"1"}, R::kScale, kOpt},
      {"blk.{i}.ffn_up.weight", {"n_embd", "n_ff"}, R::kFfnUp},
      {"blk.{i}.ffn_up.bias", {"n_ff"}, R::kBias, kOpt},
      {"blk.{i}.ffn_up.scale", {"1"}, R::kScale, kOpt},
      {"blk.{i}.ffn_sub_norm.weight", {"n_ff"}, R::kNorm, kReq, {}, kFillOnes},
      {"blk.{i}.ffn_down.weight", {"n_ff", "n_embd"}, R::kFfnDown},
      {"blk.{i}.ffn_down.bias", {"n_embd"}, R::kBias, kOpt},
      {"blk.{i}.ffn_down.scale", {"1"}, R::kScale, kOpt},
      {"output_norm.weight", {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
      {"output.weight", {"n_embd", "n_vocab"}, R::kOutput, kOpt},  // absent: tied to token_embd
  }};
  return t;
}

}  // namespace chimera::models
