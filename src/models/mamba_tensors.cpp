// The tensors of archs "mamba" (Mamba-1 mixer) and "mamba2" (models/mamba.cpp),
// as llama.cpp's converter writes them. Sizes: n_embd, n_vocab, d_inner,
// d_state, d_conv, and dt_rank (mamba) or ssm_n_head + n_group (mamba2).
#include "models/tensor_blocks.h"

namespace chimera::models {

namespace {
using R = quant::TensorRole;
constexpr Need kReq = Need::kRequired, kOpt = Need::kOptional;

TensorTable ssm_table(std::vector<TensorEntry> mixer) {
  return make_table({
      {{tn::kTokenEmbd, {"n_embd", "n_vocab"}, R::kTokenEmbd},
       {tn::kAttnNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes}},
      mixer,
      {{tn::kOutputNorm, {"n_embd"}, R::kNorm, kReq, {}, kFillOnes},
       {tn::kOutput, {"n_embd", "n_vocab"}, R::kOutput, kOpt}},  // absent: tied to token_embd
  });
}
}  // namespace

const TensorTable& mamba_tensors() {
  static const TensorTable t = ssm_table(mamba1_entries({}));
  return t;
}

const TensorTable& mamba2_tensors() {
  static const TensorTable t = ssm_table(mamba2_entries({}, kReq));
  return t;
}

}  // namespace chimera::models
