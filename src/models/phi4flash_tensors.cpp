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
      {{"token_embd.weight", {"n_embd", "n_vocab"}, R::kTokenEmbd},
       {"blk.{i}.attn_norm.weight", {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {"blk.{i}.attn_norm.bias", {"n_embd"}, R::kNorm, kReq, {}, kFillZeros}},
      mamba1_entries("mamba"),
      {{"blk.{i}.gmu_in.weight", {"n_embd", "d_inner"}, R::kGmuIn, kReq, "gmu"},
       {"blk.{i}.gmu_in.bias", {"d_inner"}, R::kBias, kOpt, "gmu"},
       {"blk.{i}.gmu_out.weight", {"d_inner", "n_embd"}, R::kGmuOut, kReq, "gmu"},
       {"blk.{i}.gmu_out.bias", {"n_embd"}, R::kBias, kOpt, "gmu"},
       {"blk.{i}.attn_qkv.weight", {"n_embd", "(n_head+2*n_head_kv)*head_dim"}, R::kAttnQkv, kReq, "self_attn"},
       {"blk.{i}.attn_qkv.bias", {"(n_head+2*n_head_kv)*head_dim"}, R::kBias, kOpt, "self_attn", kFillZeros},
       {"blk.{i}.attn_q.weight", {"n_embd", "n_head*head_dim"}, R::kAttnQ, kReq, "cross_attn"},
       {"blk.{i}.attn_q.bias", {"n_head*head_dim"}, R::kBias, kOpt, "cross_attn", kFillZeros},
       {"blk.{i}.attn_output.weight", {"n_head*head_dim", "n_embd"}, R::kAttnOutput, kReq, "diff_attn"},
       {"blk.{i}.attn_output.bias", {"n_embd"}, R::kBias, kOpt, "diff_attn", kFillZeros},
       {"blk.{i}.attn_lambda_q1.weight", {"head_dim"}, R::kAttnParam, kReq, "diff_attn", fill_normal(0.1f)},
       {"blk.{i}.attn_lambda_k1.weight", {"head_dim"}, R::kAttnParam, kReq, "diff_attn", fill_normal(0.1f)},
       {"blk.{i}.attn_lambda_q2.weight", {"head_dim"}, R::kAttnParam, kReq, "diff_attn", fill_normal(0.1f)},
       {"blk.{i}.attn_lambda_k2.weight", {"head_dim"}, R::kAttnParam, kReq, "diff_attn", fill_normal(0.1f)},
       {"blk.{i}.attn_sub_norm.weight", {"2*head_dim"}, R::kNorm, kReq, "diff_attn", kFillOnes},
       {"blk.{i}.ffn_norm.weight", {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {"blk.{i}.ffn_norm.bias", {"n_embd"}, R::kNorm, kReq, {}, kFillZeros},
       {"blk.{i}.ffn_up.weight", {"n_embd", "2*n_ff"}, R::kFfnUp},  // [gate | up]
       {"blk.{i}.ffn_up.bias", {"2*n_ff"}, R::kBias, kOpt},
       {"blk.{i}.ffn_down.weight", {"n_ff", "n_embd"}, R::kFfnDown},
       {"blk.{i}.ffn_down.bias", {"n_embd"}, R::kBias, kOpt},
       {"output_norm.weight", {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {"output_norm.bias", {"n_embd"}, R::kNorm, kReq, {}, kFillZeros},
       {"output.weight", {"n_embd", "n_vocab"}, R::kOutput, kOpt}},  // absent: tied to token_embd
  });
  return t;
}

}  // namespace chimera::models
