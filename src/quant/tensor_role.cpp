// Tensor role names and the matrix roles (see tensor_role.h).
#include "quant/tensor_role.h"

namespace chimera::quant {

std::string_view tensor_role_name(TensorRole r) {
  switch (r) {
    case TensorRole::kUnknown: return "unknown";
    case TensorRole::kTokenEmbd: return "token_embd";
    case TensorRole::kOutput: return "output";
    case TensorRole::kNorm: return "norm";
    case TensorRole::kBias: return "bias";
    case TensorRole::kScale: return "scale";
    case TensorRole::kRopeFactors: return "rope_factors";
    case TensorRole::kAttnQ: return "attn_q";
    case TensorRole::kAttnK: return "attn_k";
    case TensorRole::kAttnV: return "attn_v";
    case TensorRole::kAttnQkv: return "attn_qkv";
    case TensorRole::kAttnOutput: return "attn_output";
    case TensorRole::kAttnParam: return "attn_param";
    case TensorRole::kFfnGate: return "ffn_gate";
    case TensorRole::kFfnUp: return "ffn_up";
    case TensorRole::kFfnDown: return "ffn_down";
    case TensorRole::kFfnRouter: return "ffn_router";
    case TensorRole::kExpertGate: return "expert_gate";
    case TensorRole::kExpertUp: return "expert_up";
    case TensorRole::kExpertDown: return "expert_down";
    case TensorRole::kShexpGate: return "shexp_gate";
    case TensorRole::kShexpUp: return "shexp_up";
    case TensorRole::kShexpDown: return "shexp_down";
    case TensorRole::kSsmIn: return "ssm_in";
    case TensorRole::kSsmConv: return "ssm_conv";
    case TensorRole::kSsmX: return "ssm_x";
    case TensorRole::kSsmDt: return "ssm_dt";
    case TensorRole::kSsmParam: return "ssm_param";
    case TensorRole::kSsmOut: return "ssm_out";
    case TensorRole::kGmuIn: return "gmu_in";
    case TensorRole::kGmuOut: return "gmu_out";
  }
  return "?";
}

bool is_matrix_role(TensorRole r) {
  switch (r) {
    case TensorRole::kTokenEmbd:
    case TensorRole::kOutput:
    case TensorRole::kAttnQ:
    case TensorRole::kAttnK:
    case TensorRole::kAttnV:
    case TensorRole::kAttnQkv:
    case TensorRole::kAttnOutput:
    case TensorRole::kFfnGate:
    case TensorRole::kFfnUp:
    case TensorRole::kFfnDown:
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp:
    case TensorRole::kExpertDown:
    case TensorRole::kShexpGate:
    case TensorRole::kShexpUp:
    case TensorRole::kShexpDown:
    case TensorRole::kSsmIn:
    case TensorRole::kSsmX:
    case TensorRole::kSsmDt:
    case TensorRole::kSsmOut:
    case TensorRole::kGmuIn:
    case TensorRole::kGmuOut:
      return true;
    default:
      return false;
  }
}

}  // namespace chimera::quant
