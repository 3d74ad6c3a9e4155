// The tensors of arch "granitehybrid" (models/granitehybrid.cpp), as llama.cpp's
// converter writes them. Layer tags from the layer plan: "attn" or "mamba2"
// (attention.head_count_kv 0 = Mamba-2), and "dense" or "moe" (+ "shexp" with a
// shared expert). Sizes: n_embd, n_vocab, n_ff, per attention layer n_head and
// n_head_kv, head_dim, head_dim_v; the Mamba-2 sizes; n_expert, n_ff_shexp.
#include "models/tensor_blocks.h"

namespace chimera::models {

namespace {
using R = quant::TensorRole;
constexpr Need kReq = Need::kRequired, kOpt = Need::kOptional;
}  // namespace

const TensorTable& granitehybrid_tensors() {
  static const TensorTable t = make_table({
      {{tn::kTokenEmbd, {"n_embd", "n_vocab"}, R::kTokenEmbd},
       {tn::kAttnNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes}},
      attention_entries("attn", kOpt),
      mamba2_entries("mamba2", kOpt),
      {{tn::kFfnNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes}},
      moe_entries("moe"),
      shared_expert_entries("shexp"),
      gated_ffn_entries("dense"),
      {{tn::kOutputNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {tn::kOutput, {"n_embd", "n_vocab"}, R::kOutput, kOpt}},  // absent: tied to token_embd
  });
  return t;
}

}  // namespace chimera::models
