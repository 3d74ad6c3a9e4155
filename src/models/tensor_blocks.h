// Tensor-table entries of the blocks several families share (attention,
// SwiGLU FFN, MoE, Mamba-1/-2 mixers), so a family's table lists its own
// tensors and composes these. Every block's entries apply to the layers with
// layer tag `tag` ("" = every layer) and use these size names:
//   attention  n_embd, n_head, n_head_kv, head_dim, head_dim_v
//   ffn        n_embd, n_ff
//   moe        n_embd, n_ff (per expert), n_expert; shared expert n_ff_shexp
//   mamba1     n_embd, d_inner, d_state, d_conv, dt_rank
//   mamba2     n_embd, d_inner, d_state, d_conv, ssm_n_head, n_group
// Projections bound with layers::bind_linear may carry a bias; those biases
// are optional entries unless the block says otherwise.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "models/tensor_table.h"

namespace chimera::models {

constexpr SynthFill kFillOnes = fill_constant(1.0f);
constexpr SynthFill kFillZeros = fill_constant(0.0f);

// attn_q / attn_k / attn_v / attn_output, each followed by its bias (`bias`).
std::vector<TensorEntry> attention_entries(std::string_view tag, Need bias, SynthFill bias_fill = {});
// ffn_gate / ffn_up / ffn_down (SwiGLU), optional biases.
std::vector<TensorEntry> gated_ffn_entries(std::string_view tag);
// Router (ffn_gate_inp) and the 3-D expert stacks ffn_{gate,up,down}_exps.
std::vector<TensorEntry> moe_entries(std::string_view tag);
// Shared expert ffn_{gate,up,down}_shexp.
std::vector<TensorEntry> shared_expert_entries(std::string_view tag);
// Mamba-1 mixer (ssm_in, conv, x/dt projections, A, D, ssm_out).
std::vector<TensorEntry> mamba1_entries(std::string_view tag);
// Mamba-2 mixer; the conv bias is required or optional (`conv_bias`).
std::vector<TensorEntry> mamba2_entries(std::string_view tag, Need conv_bias);

// The parts in order, as one table.
TensorTable make_table(std::initializer_list<std::vector<TensorEntry>> parts);

}  // namespace chimera::models
