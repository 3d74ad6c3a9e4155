// Family rows for the Hugging Face importer: the config.json -> `<arch>.*`
// hyper-parameter mapping and the tensor-name table of each supported family.
// Adding a family is one FamilySpec here (see hf_convert.h). Keys that a
// checkpoint's config.json omits take the released model's values (documented
// per family, e.g. docs/PHI4FLASH.md). Invariants: every size written is
// validated (positive, divisible where the math needs it) so the model loader
// never sees an impossible plan; layer kinds are derived from the config, never
// hard-coded indices.
#include <algorithm>
#include <cmath>

#include "format/hf/hf_convert.h"
#include "format/rope_factors.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;

Result<int64_t> get_int(const json& c, const char* key, int64_t def) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return def;
  if (!it->is_number_integer()) return invalid_argument(std::string("'") + key + "' must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v <= 0 || v > (int64_t(1) << 31)) return invalid_argument(std::string("'") + key + "' = " + std::to_string(v) + " is out of range");
  return v;
}

// A key the family cannot default (the tensor shapes depend on it).
Result<int64_t> require_int(const json& c, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return not_found(std::string("missing config key '") + key + "'");
  return get_int(c, key, 0);
}

Result<double> get_float(const json& c, const char* key, double def) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return def;
  if (!it->is_number()) return invalid_argument(std::string("'") + key + "' must be a number");
  const double v = it->get<double>();
  if (!(v > 0) || !std::isfinite(v)) return invalid_argument(std::string("'") + key + "' must be positive");
  return v;
}

// The first of `keys` that config.json sets (llama.cpp's find_hparam order);
// the first key when none is set (so errors name the preferred spelling).
const char* pick(const json& c, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (auto it = c.find(k); it != c.end() && !it->is_null()) return k;
  return *keys.begin();
}

// A boolean switch the converter cannot honour when it differs from `supported`.
Status refuse_bool(const json& c, const char* key, bool supported, const char* family) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean()) return invalid_argument(std::string("'") + key + "' must be true or false");
  if (it->get<bool>() != supported)
    return unsupported(std::string("'") + key + "': " + (supported ? "false" : "true") + " is not supported for " + family);
  return Status::ok();
}

// llama.cpp pads Mamba token tables to a multiple of pad_vocab_size_multiple.
Result<int64_t> padded_vocab(const json& c, int64_t def_multiple) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_vocab, require_int(c, "vocab_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t m, get_int(c, "pad_vocab_size_multiple", def_multiple));
  return (n_vocab + m - 1) / m * m;
}

// Writes `<arch>.<key>` = value as u32 for each pair (sizes validated by the caller).
void set_u32s(GgufWriter& w, const std::string& arch, std::initializer_list<std::pair<const char*, int64_t>> kv) {
  for (const auto& [k, v] : kv) w.set(arch + "." + k, GgufValue::from_u32((uint32_t)v));
}

// ---- phi4flash (Phi-4-mini-flash-reasoning, SambaY) -------------------------
// Layer kinds; see docs/PHI4FLASH.md and ARCHITECTURES.md §1.2.
enum Phi4FlashKind { kP4Mamba = 0, kP4SelfAttn = 1, kP4Gmu = 2, kP4CrossAttn = 3 };

Status phi4flash_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  std::vector<int>* kinds = &plan->kinds;
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, get_int(c, "hidden_size", 2560));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, get_int(c, "num_hidden_layers", 32));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, get_int(c, "intermediate_size", 10240));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, get_int(c, "num_attention_heads", 40));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_kv, get_int(c, "num_key_value_heads", 20));
  CHIMERA_ASSIGN_OR_RETURN(int64_t window, get_int(c, "sliding_window", 512));
  CHIMERA_ASSIGN_OR_RETURN(int64_t period, get_int(c, "mb_per_layer", 2));
  CHIMERA_ASSIGN_OR_RETURN(int64_t ctx, get_int(c, "max_position_embeddings", 262144));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_state, get_int(c, "mamba_d_state", 16));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_conv, get_int(c, "mamba_d_conv", 4));
  CHIMERA_ASSIGN_OR_RETURN(int64_t expand, get_int(c, "mamba_expand", 2));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, "layer_norm_eps", 1e-5));
  int64_t dt_rank = (d + 15) / 16;  // "auto"
  if (auto it = c.find("mamba_dt_rank"); it != c.end() && !it->is_null() && !(it->is_string() && *it == "auto")) {
    CHIMERA_ASSIGN_OR_RETURN(dt_rank, get_int(c, "mamba_dt_rank", dt_rank));
  }
  if (d % n_head != 0) return invalid_argument("hidden_size must be a multiple of num_attention_heads");
  if (n_head % 2 != 0 || n_kv % 2 != 0)
    return invalid_argument("differential attention pairs heads: head counts must be even");
  if (n_head % n_kv != 0) return invalid_argument("num_attention_heads must be a multiple of num_key_value_heads");
  if (n_layer % 2 != 0 || n_layer < 4) return invalid_argument("num_hidden_layers must be even and >= 4");
  const int64_t half = n_layer / 2;
  if (half % period != 0)
    return invalid_argument("num_hidden_layers/2 must be a multiple of mb_per_layer (layer L/2 is the memory Mamba layer)");
  if (period < 2) return invalid_argument("mb_per_layer must be >= 2 (layer L/2+1 must be attention)");
  const std::string a = "phi4flash.";
  set_u32s(w, "phi4flash",
           {{"context_length", ctx}, {"embedding_length", d}, {"block_count", n_layer}, {"feed_forward_length", n_ff},
            {"attention.head_count", n_head}, {"attention.head_count_kv", n_kv},
            {"attention.key_length", d / n_head}, {"attention.value_length", d / n_head}});
  w.set(a + "attention.layer_norm_epsilon", GgufValue::from_f32((float)eps));
  set_u32s(w, "phi4flash",
           {{"attention.sliding_window", window}, {"ssm.conv_kernel", d_conv}, {"ssm.inner_size", expand * d},
            {"ssm.state_size", d_state}, {"ssm.time_step_rank", dt_rank}, {"mamba_period", period}});
  kinds->assign((size_t)n_layer, kP4Mamba);
  for (int64_t i = 0; i < n_layer; ++i) {
    const bool mamba = i % period == 0;
    const bool cross = i >= half + 2;
    (*kinds)[(size_t)i] = cross ? (mamba ? kP4Gmu : kP4CrossAttn) : (mamba ? kP4Mamba : kP4SelfAttn);
  }
  return Status::ok();
}

constexpr KindMask kMamba = 1u << kP4Mamba;
constexpr KindMask kSelf = 1u << kP4SelfAttn;
constexpr KindMask kGmu = 1u << kP4Gmu;
constexpr KindMask kCross = 1u << kP4CrossAttn;
constexpr KindMask kAttn = kSelf | kCross;

FamilySpec phi4flash_spec() {
  const Transform N = Transform::kNone;
  return FamilySpec{
      {"phi4flash"},
      "phi4flash",
      &phi4flash_hparams,
      {
          {"model.embed_tokens.weight", "token_embd.weight"},
          {"model.final_layernorm.weight", "output_norm.weight"},
          {"model.final_layernorm.bias", "output_norm.bias"},
          {"lm_head.weight", "output.weight", kAllKinds, N, false, /*optional=*/true},
          {"model.layers.{i}.input_layernorm.weight", "blk.{i}.attn_norm.weight"},
          {"model.layers.{i}.input_layernorm.bias", "blk.{i}.attn_norm.bias"},
          // Mamba-1 mixers (layers i % period == 0 below L/2 + 2).
          {"model.layers.{i}.attn.in_proj.weight", "blk.{i}.ssm_in.weight", kMamba},
          {"model.layers.{i}.attn.in_proj.bias", "blk.{i}.ssm_in.bias", kMamba, N, false, true},
          {"model.layers.{i}.attn.conv1d.weight", "blk.{i}.ssm_conv1d.weight", kMamba, Transform::kSqueezeMiddle},
          {"model.layers.{i}.attn.conv1d.bias", "blk.{i}.ssm_conv1d.bias", kMamba, N, false, true},
          {"model.layers.{i}.attn.x_proj.weight", "blk.{i}.ssm_x.weight", kMamba},
          {"model.layers.{i}.attn.dt_proj.weight", "blk.{i}.ssm_dt.weight", kMamba},
          {"model.layers.{i}.attn.dt_proj.bias", "blk.{i}.ssm_dt.bias", kMamba},
          {"model.layers.{i}.attn.A_log", "blk.{i}.ssm_a", kMamba, Transform::kNegExp},
          {"model.layers.{i}.attn.D", "blk.{i}.ssm_d", kMamba},
          {"model.layers.{i}.attn.out_proj.weight", "blk.{i}.ssm_out.weight", kMamba},
          {"model.layers.{i}.attn.out_proj.bias", "blk.{i}.ssm_out.bias", kMamba, N, false, true},
          // Gated memory units (cross decoder, i % period == 0).
          {"model.layers.{i}.attn.in_proj.weight", "blk.{i}.gmu_in.weight", kGmu},
          {"model.layers.{i}.attn.out_proj.weight", "blk.{i}.gmu_out.weight", kGmu},
          // Differential attention: self layers have fused q|k|v, cross layers q only.
          {"model.layers.{i}.attn.Wqkv.weight", "blk.{i}.attn_qkv.weight", kSelf},
          {"model.layers.{i}.attn.Wqkv.bias", "blk.{i}.attn_qkv.bias", kSelf, N, false, true},
          {"model.layers.{i}.attn.Wqkv.weight", "blk.{i}.attn_q.weight", kCross},
          {"model.layers.{i}.attn.Wqkv.bias", "blk.{i}.attn_q.bias", kCross, N, false, true},
          {"model.layers.{i}.attn.out_proj.weight", "blk.{i}.attn_output.weight", kAttn},
          {"model.layers.{i}.attn.out_proj.bias", "blk.{i}.attn_output.bias", kAttn, N, false, true},
          {"model.layers.{i}.attn.inner_cross_attn.lambda_q1", "blk.{i}.attn_lambda_q1.weight", kAttn},
          {"model.layers.{i}.attn.inner_cross_attn.lambda_k1", "blk.{i}.attn_lambda_k1.weight", kAttn},
          {"model.layers.{i}.attn.inner_cross_attn.lambda_q2", "blk.{i}.attn_lambda_q2.weight", kAttn},
          {"model.layers.{i}.attn.inner_cross_attn.lambda_k2", "blk.{i}.attn_lambda_k2.weight", kAttn},
          {"model.layers.{i}.attn.inner_cross_attn.subln.weight", "blk.{i}.attn_sub_norm.weight", kAttn},
          {"model.layers.{i}.post_attention_layernorm.weight", "blk.{i}.ffn_norm.weight"},
          {"model.layers.{i}.post_attention_layernorm.bias", "blk.{i}.ffn_norm.bias"},
          // fc1 stays fused [gate | up] (gate first), as llama.cpp's phi3 ffn_up.
          {"model.layers.{i}.mlp.fc1.weight", "blk.{i}.ffn_up.weight"},
          {"model.layers.{i}.mlp.fc2.weight", "blk.{i}.ffn_down.weight"},
      }};
}

// ---- llama (Llama 2/3.x, TinyLlama, SmolLM, ... LlamaForCausalLM) ----------
// Keys as llama.cpp's convert_hf_to_gguf.py writes them; Q/K rows permuted
// from rotate-half to interleaved RoPE; Llama 3 RoPE scaling becomes the
// rope_freqs.weight tensor. docs/CONVERT.md lists every config key read.
Status llama_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, "hidden_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, "num_hidden_layers"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, require_int(c, "intermediate_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, require_int(c, "num_attention_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_kv, get_int(c, "num_key_value_heads", n_head));
  CHIMERA_ASSIGN_OR_RETURN(int64_t ctx, get_int(c, "max_position_embeddings", 2048));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, "rms_norm_eps", 1e-6));
  CHIMERA_ASSIGN_OR_RETURN(double theta, get_float(c, "rope_theta", 10000.0));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_vocab, require_int(c, "vocab_size"));
  if (n_head % n_kv != 0) return invalid_argument("num_attention_heads must be a multiple of num_key_value_heads");
  const bool explicit_head = c.contains("head_dim") && !c["head_dim"].is_null();
  CHIMERA_ASSIGN_OR_RETURN(int64_t head_dim, get_int(c, "head_dim", d / n_head));
  if (!explicit_head && d % n_head != 0) return invalid_argument("hidden_size must be a multiple of num_attention_heads");
  if (head_dim % 2 != 0) return invalid_argument("the head size must be even (RoPE pairs)");
  if (auto it = c.find("attention_bias"); it != c.end() && it->is_boolean() && it->get<bool>())
    return unsupported("'attention_bias': true is not supported for llama");
  if (auto it = c.find("mlp_bias"); it != c.end() && it->is_boolean() && it->get<bool>())
    return unsupported("'mlp_bias': true is not supported for llama");
  if (auto it = c.find("hidden_act"); it != c.end() && !(it->is_string() && it->get<std::string>() == "silu"))
    return unsupported("'hidden_act' must be \"silu\" for llama");
  const std::string a = "llama.";
  set_u32s(w, "llama",
           {{"vocab_size", n_vocab}, {"context_length", ctx}, {"embedding_length", d}, {"block_count", n_layer},
            {"feed_forward_length", n_ff}, {"rope.dimension_count", head_dim}, {"attention.head_count", n_head},
            {"attention.head_count_kv", n_kv}});
  w.set(a + "rope.freq_base", GgufValue::from_f32((float)theta));
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  if (explicit_head) set_u32s(w, "llama", {{"attention.key_length", head_dim}, {"attention.value_length", head_dim}});
  if (auto rs = c.find("rope_scaling"); rs != c.end() && !rs->is_null()) {
    if (!rs->is_object()) return invalid_argument("'rope_scaling' must be an object");
    std::string type = rs->value("rope_type", rs->value("type", std::string()));
    CHIMERA_ASSIGN_OR_RETURN(double factor, get_float(*rs, "factor", 1.0));
    if (type == "llama3") {
      CHIMERA_ASSIGN_OR_RETURN(double lo, get_float(*rs, "low_freq_factor", 1.0));
      CHIMERA_ASSIGN_OR_RETURN(double hi, get_float(*rs, "high_freq_factor", 4.0));
      CHIMERA_ASSIGN_OR_RETURN(int64_t orig, get_int(*rs, "original_max_position_embeddings", 8192));
      if (!(hi > lo)) return invalid_argument("rope_scaling: high_freq_factor must exceed low_freq_factor");
      plan->extra_f32.emplace_back("rope_freqs.weight",
                                   llama3_rope_factors(head_dim, theta, factor, lo, hi, (double)orig));
    } else if (type == "linear") {
      w.set(a + "rope.scaling.type", GgufValue::from_string("linear"));
      w.set(a + "rope.scaling.factor", GgufValue::from_f32((float)factor));
    } else {
      return unsupported("rope_scaling type '" + type + "' is not supported for llama (llama3, linear)");
    }
  }
  plan->kinds.assign((size_t)n_layer, 0);
  plan->n_head = n_head;
  plan->n_head_kv = n_kv;
  return Status::ok();
}

FamilySpec llama_spec() {
  const Transform N = Transform::kNone;
  return FamilySpec{
      {"llama"},
      "llama",
      &llama_hparams,
      {
          {"model.embed_tokens.weight", "token_embd.weight"},
          {"model.norm.weight", "output_norm.weight"},
          {"lm_head.weight", "output.weight", kAllKinds, N, false, /*optional=*/true},
          {"model.layers.{i}.input_layernorm.weight", "blk.{i}.attn_norm.weight"},
          {"model.layers.{i}.self_attn.q_proj.weight", "blk.{i}.attn_q.weight", kAllKinds, Transform::kRopePermuteQ},
          {"model.layers.{i}.self_attn.k_proj.weight", "blk.{i}.attn_k.weight", kAllKinds, Transform::kRopePermuteK},
          {"model.layers.{i}.self_attn.v_proj.weight", "blk.{i}.attn_v.weight"},
          {"model.layers.{i}.self_attn.o_proj.weight", "blk.{i}.attn_output.weight"},
          {"model.layers.{i}.self_attn.rotary_emb.inv_freq", nullptr, kAllKinds, N, false, true},
          {"model.layers.{i}.post_attention_layernorm.weight", "blk.{i}.ffn_norm.weight"},
          {"model.layers.{i}.mlp.gate_proj.weight", "blk.{i}.ffn_gate.weight"},
          {"model.layers.{i}.mlp.up_proj.weight", "blk.{i}.ffn_up.weight"},
          {"model.layers.{i}.mlp.down_proj.weight", "blk.{i}.ffn_down.weight"},
      }};
}


// ---- mamba2 (Mamba2ForCausalLM) and mamba (MambaForCausalLM) ----------------
// Keys, defaults and reshapes as llama.cpp's Mamba2Model / MambaModel write
// them (docs/CONVERT.md lists every config key read). One layer kind.
Status mamba2_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, pick(c, {"hidden_size", "d_model"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, pick(c, {"num_hidden_layers", "n_layer"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t expand, get_int(c, pick(c, {"mamba_expand", "expand"}), 2));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_inner, get_int(c, pick(c, {"mamba_d_ssm", "intermediate_size", "d_inner"}), expand * d));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_group, get_int(c, "n_groups", 1));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_conv, get_int(c, pick(c, {"conv_kernel", "d_conv"}), 4));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_state, get_int(c, pick(c, {"state_size", "d_state"}), 128));
  CHIMERA_ASSIGN_OR_RETURN(int64_t head_dim, get_int(c, pick(c, {"mamba_d_head", "head_dim"}), 64));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, pick(c, {"layer_norm_epsilon", "rms_norm_eps"}), 1e-5));
  CHIMERA_ASSIGN_OR_RETURN(plan->vocab_size, padded_vocab(c, 16));
  if (d_inner != expand * d) return invalid_argument("the SSM inner size must be expand * hidden_size");
  if (d_inner % head_dim != 0) return invalid_argument("the SSM inner size must be a multiple of 'head_dim'");
  if (d_inner % n_group != 0) return invalid_argument("the SSM inner size must be a multiple of 'n_groups'");
  if (auto it = c.find("num_heads"); it != c.end() && !it->is_null()) {
    CHIMERA_ASSIGN_OR_RETURN(int64_t nh, get_int(c, "num_heads", 0));
    if (nh * head_dim != d_inner) return invalid_argument("'num_heads' * 'head_dim' must equal expand * hidden_size");
  }
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "use_bias", false, "mamba2"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "rms_norm", true, "mamba2"));
  if (auto it = c.find("hidden_act"); it != c.end() && !(it->is_string() && it->get<std::string>() == "silu"))
    return unsupported("'hidden_act' must be \"silu\" for mamba2");
  set_u32s(w, "mamba2",
           {{"context_length", int64_t(1) << 20}, {"embedding_length", d}, {"feed_forward_length", 0},
            {"attention.head_count", 0}, {"block_count", n_layer}, {"ssm.conv_kernel", d_conv},
            {"ssm.inner_size", d_inner}, {"ssm.state_size", d_state}, {"ssm.time_step_rank", d_inner / head_dim},
            {"ssm.group_count", n_group}});
  w.set("mamba2.attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  plan->kinds.assign((size_t)n_layer, 0);
  plan->n_group = n_group;
  return Status::ok();
}

FamilySpec mamba2_spec() {
  return FamilySpec{
      {"mamba2"},
      "mamba2",
      &mamba2_hparams,
      {
          {.hf = "backbone.embeddings.weight", .gguf = "token_embd.weight"},
          {.hf = "backbone.norm_f.weight", .gguf = "output_norm.weight"},
          {.hf = "lm_head.weight", .gguf = "output.weight", .optional = true},
          {.hf = "backbone.layers.{i}.norm.weight", .gguf = "blk.{i}.attn_norm.weight"},
          {.hf = "backbone.layers.{i}.mixer.in_proj.weight", .gguf = "blk.{i}.ssm_in.weight"},
          {.hf = "backbone.layers.{i}.mixer.conv1d.weight", .gguf = "blk.{i}.ssm_conv1d.weight",
           .transform = Transform::kSqueezeMiddle},
          {.hf = "backbone.layers.{i}.mixer.conv1d.bias", .gguf = "blk.{i}.ssm_conv1d.bias", .optional = true},
          {.hf = "backbone.layers.{i}.mixer.dt_bias", .gguf = "blk.{i}.ssm_dt.bias"},
          {.hf = "backbone.layers.{i}.mixer.A_log", .gguf = "blk.{i}.ssm_a", .transform = Transform::kNegExp,
           .reshape = Reshape::kAppendOne},
          {.hf = "backbone.layers.{i}.mixer.D", .gguf = "blk.{i}.ssm_d", .reshape = Reshape::kAppendOne},
          {.hf = "backbone.layers.{i}.mixer.norm.weight", .gguf = "blk.{i}.ssm_norm.weight", .reshape = Reshape::kGroups},
          {.hf = "backbone.layers.{i}.mixer.out_proj.weight", .gguf = "blk.{i}.ssm_out.weight"},
      }};
}

Status mamba_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, pick(c, {"hidden_size", "d_model"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, pick(c, {"num_hidden_layers", "n_layer"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_conv, get_int(c, pick(c, {"conv_kernel", "d_conv"}), 4));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_inner, get_int(c, pick(c, {"intermediate_size", "d_inner"}), 2 * d));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_state, get_int(c, pick(c, {"state_size", "d_state"}), 16));
  const char* rank_key = pick(c, {"time_step_rank", "dt_rank"});
  int64_t dt_rank = (d + 15) / 16;  // "auto"
  if (auto it = c.find(rank_key); it != c.end() && !it->is_null() && !(it->is_string() && *it == "auto")) {
    CHIMERA_ASSIGN_OR_RETURN(dt_rank, get_int(c, rank_key, dt_rank));
  }
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, pick(c, {"layer_norm_epsilon", "rms_norm_eps"}), 1e-5));
  CHIMERA_ASSIGN_OR_RETURN(plan->vocab_size, padded_vocab(c, 8));
  if (d_inner != 2 * d) return invalid_argument("the SSM inner size ('intermediate_size') must be 2 * hidden_size");
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "use_bias", false, "mamba"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "rms_norm", true, "mamba"));
  if (auto it = c.find("hidden_act"); it != c.end() && !(it->is_string() && it->get<std::string>() == "silu"))
    return unsupported("'hidden_act' must be \"silu\" for mamba");
  set_u32s(w, "mamba",
           {{"context_length", int64_t(1) << 20}, {"embedding_length", d}, {"feed_forward_length", 0},
            {"attention.head_count", 0}, {"block_count", n_layer}, {"ssm.conv_kernel", d_conv},
            {"ssm.inner_size", d_inner}, {"ssm.state_size", d_state}, {"ssm.time_step_rank", dt_rank}});
  w.set("mamba.attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  w.set("mamba.ssm.dt_b_c_rms", GgufValue::from_bool(false));  // true only for falcon_mamba
  plan->kinds.assign((size_t)n_layer, 0);
  return Status::ok();
}

FamilySpec mamba_spec() {
  return FamilySpec{
      {"mamba"},
      "mamba",
      &mamba_hparams,
      {
          {.hf = "backbone.embeddings.weight", .gguf = "token_embd.weight"},
          {.hf = "backbone.norm_f.weight", .gguf = "output_norm.weight"},
          {.hf = "lm_head.weight", .gguf = "output.weight", .optional = true,
           .drop_if_equal_to = "backbone.embeddings.weight"},
          {.hf = "backbone.layers.{i}.norm.weight", .gguf = "blk.{i}.attn_norm.weight"},
          {.hf = "backbone.layers.{i}.mixer.in_proj.weight", .gguf = "blk.{i}.ssm_in.weight"},
          {.hf = "backbone.layers.{i}.mixer.conv1d.weight", .gguf = "blk.{i}.ssm_conv1d.weight",
           .transform = Transform::kSqueezeMiddle},
          {.hf = "backbone.layers.{i}.mixer.conv1d.bias", .gguf = "blk.{i}.ssm_conv1d.bias", .optional = true},
          {.hf = "backbone.layers.{i}.mixer.x_proj.weight", .gguf = "blk.{i}.ssm_x.weight"},
          {.hf = "backbone.layers.{i}.mixer.dt_proj.weight", .gguf = "blk.{i}.ssm_dt.weight"},
          {.hf = "backbone.layers.{i}.mixer.dt_proj.bias", .gguf = "blk.{i}.ssm_dt.bias"},
          {.hf = "backbone.layers.{i}.mixer.A_log", .gguf = "blk.{i}.ssm_a", .transform = Transform::kNegExp},
          {.hf = "backbone.layers.{i}.mixer.D", .gguf = "blk.{i}.ssm_d"},
          {.hf = "backbone.layers.{i}.mixer.out_proj.weight", .gguf = "blk.{i}.ssm_out.weight"},
      }};
}

// ---- granitehybrid (GraniteMoeHybridForCausalLM, Granite 4.0-H) -------------
// llama.cpp's GraniteHybridModel: Mamba-2 layers and attention layers (Q/K rows
// permuted as for llama, although these layers use no RoPE), MoE + shared
// expert (or a dense shared MLP when num_local_experts is 0), the Granite
// multipliers. Layer kind = attention bit | dense bit.
enum GraniteKind { kGhMamba = 0, kGhAttn = 1, kGhMambaDense = 2, kGhAttnDense = 3 };

Status granitehybrid_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, "hidden_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, "num_hidden_layers"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, require_int(c, "num_attention_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_kv, require_int(c, "num_key_value_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, require_int(c, "intermediate_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_shared, require_int(c, "shared_intermediate_size"));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, "rms_norm_eps", 1e-6));
  CHIMERA_ASSIGN_OR_RETURN(double theta, get_float(c, "rope_theta", 10000.0));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_vocab, require_int(c, "vocab_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_conv, require_int(c, "mamba_d_conv"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_state, require_int(c, "mamba_d_state"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_group, require_int(c, "mamba_n_groups"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t expand, require_int(c, "mamba_expand"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ssm_head, require_int(c, "mamba_n_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t ssm_head_dim, get_int(c, "mamba_d_head", 64));
  int64_t n_expert = 0, n_used = 0;
  if (auto it = c.find("num_local_experts"); it != c.end() && !it->is_null() && !(it->is_number_integer() && *it == 0)) {
    CHIMERA_ASSIGN_OR_RETURN(n_expert, get_int(c, "num_local_experts", 0));
    CHIMERA_ASSIGN_OR_RETURN(n_used, require_int(c, "num_experts_per_tok"));
    if (n_used > n_expert) return invalid_argument("'num_experts_per_tok' exceeds 'num_local_experts'");
  }
  const int64_t d_inner = expand * d;
  if (d % n_head != 0) return invalid_argument("hidden_size must be a multiple of num_attention_heads");
  if ((d / n_head) % 2 != 0) return invalid_argument("the attention head size must be even");
  if (n_head % n_kv != 0) return invalid_argument("num_attention_heads must be a multiple of num_key_value_heads");
  if (d_inner % n_group != 0) return invalid_argument("the SSM inner size must be a multiple of 'mamba_n_groups'");
  if (d_inner % ssm_head_dim != 0 || d_inner / ssm_head_dim != n_ssm_head)
    return invalid_argument("'mamba_n_heads' * 'mamba_d_head' must equal mamba_expand * hidden_size");
  // Layer kinds: layer_types ("mamba" / "attention"), else attn_layer_indices.
  std::vector<bool> attn((size_t)n_layer, false);
  if (auto lt = c.find("layer_types"); lt != c.end() && !lt->is_null()) {
    if (!lt->is_array() || (int64_t)lt->size() != n_layer)
      return invalid_argument("'layer_types' must list num_hidden_layers entries");
    for (size_t i = 0; i < lt->size(); ++i) {
      const json& x = (*lt)[i];
      if (!x.is_string() || (x != "mamba" && x != "attention"))
        return unsupported("'layer_types'[" + std::to_string(i) + "] must be \"mamba\" or \"attention\"");
      attn[i] = x == "attention";
    }
  } else if (auto ai = c.find("attn_layer_indices"); ai != c.end() && ai->is_array()) {
    for (const json& x : *ai) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= n_layer)
        return invalid_argument("'attn_layer_indices' holds a layer index out of range");
      attn[(size_t)x.get<int64_t>()] = true;
    }
  } else {
    return not_found("missing config key 'layer_types' (or 'attn_layer_indices')");
  }
  if (std::find(attn.begin(), attn.end(), false) == attn.end())
    return unsupported("every layer is attention: llama.cpp converts such checkpoints as arch granite / granitemoe, "
                       "which is not supported here");
  if (auto it = c.find("position_embedding_type"); it != c.end() && !(it->is_string() && *it == "nope"))
    return unsupported("'position_embedding_type' must be \"nope\" for granitehybrid (hybrid layers use no RoPE)");
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "attention_bias", false, "granitehybrid"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "mamba_proj_bias", false, "granitehybrid"));
  if (auto it = c.find("hidden_act"); it != c.end() && !(it->is_string() && it->get<std::string>() == "silu"))
    return unsupported("'hidden_act' must be \"silu\" for granitehybrid");
  CHIMERA_ASSIGN_OR_RETURN(plan->vocab_size, padded_vocab(c, 8));

  const std::string a = "granitehybrid.";
  set_u32s(w, "granitehybrid",
           {{"vocab_size", n_vocab}, {"rope.dimension_count", d / n_head}, {"block_count", n_layer},
            {"context_length", int64_t(1) << 20}, {"embedding_length", d}, {"feed_forward_length", n_ff},
            {"attention.head_count", n_head}});
  std::vector<int32_t> kv((size_t)n_layer);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = attn[i] ? (int32_t)n_kv : 0;
  w.set(a + "attention.head_count_kv", GgufValue::from_i32s(kv));
  w.set(a + "rope.freq_base", GgufValue::from_f32((float)theta));
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  if (n_expert > 0) {
    set_u32s(w, "granitehybrid", {{"expert_count", n_expert}, {"expert_used_count", n_used}});
    // Not written by llama.cpp (it reads feed_forward_length): the expert width spelled out.
    set_u32s(w, "granitehybrid", {{"expert_feed_forward_length", n_ff}});
  }
  // Granite's multipliers, written when set (llama.cpp skips zero / absent ones).
  for (auto [hf, key] : {std::pair{"attention_multiplier", "attention.scale"}, std::pair{"embedding_multiplier", "embedding_scale"},
                         std::pair{"residual_multiplier", "residual_scale"}, std::pair{"logits_scaling", "logit_scale"}}) {
    auto it = c.find(hf);
    if (it == c.end() || it->is_null()) continue;
    if (!it->is_number()) return invalid_argument(std::string("'") + hf + "' must be a number");
    if (it->get<double>() != 0) w.set(a + key, GgufValue::from_f32(it->get<float>()));
  }
  set_u32s(w, "granitehybrid", {{"expert_shared_feed_forward_length", n_shared}});
  set_u32s(w, "granitehybrid",
           {{"ssm.conv_kernel", d_conv}, {"ssm.state_size", d_state}, {"ssm.group_count", n_group},
            {"ssm.inner_size", d_inner}, {"ssm.time_step_rank", n_ssm_head}});
  w.set(a + "rope.scaling.finetuned", GgufValue::from_bool(false));  // no RoPE
  const int dense = n_expert == 0 ? 2 : 0;
  plan->kinds.assign((size_t)n_layer, 0);
  for (size_t i = 0; i < attn.size(); ++i) plan->kinds[i] = (attn[i] ? kGhAttn : kGhMamba) + dense;
  plan->n_head = n_head;
  plan->n_head_kv = n_kv;
  plan->n_group = n_group;
  return Status::ok();
}

FamilySpec granitehybrid_spec() {
  constexpr KindMask kM = 1u << kGhMamba | 1u << kGhMambaDense, kA = 1u << kGhAttn | 1u << kGhAttnDense;
  constexpr KindMask kMoe = 1u << kGhMamba | 1u << kGhAttn, kDense = 1u << kGhMambaDense | 1u << kGhAttnDense;
  const Transform A = Transform::kSplitFirstHalf, B = Transform::kSplitSecondHalf;
  return FamilySpec{
      {"granitemoehybrid"},
      "granitehybrid",
      &granitehybrid_hparams,
      {
          {.hf = "model.embed_tokens.weight", .gguf = "token_embd.weight"},
          {.hf = "model.norm.weight", .gguf = "output_norm.weight"},
          {.hf = "lm_head.weight", .gguf = "output.weight", .optional = true},
          {.hf = "model.layers.{i}.input_layernorm.weight", .gguf = "blk.{i}.attn_norm.weight"},
          {.hf = "model.layers.{i}.mamba.in_proj.weight", .gguf = "blk.{i}.ssm_in.weight", .kinds = kM},
          {.hf = "model.layers.{i}.mamba.conv1d.weight", .gguf = "blk.{i}.ssm_conv1d.weight", .kinds = kM,
           .transform = Transform::kSqueezeMiddle},
          {.hf = "model.layers.{i}.mamba.conv1d.bias", .gguf = "blk.{i}.ssm_conv1d.bias", .kinds = kM, .optional = true},
          {.hf = "model.layers.{i}.mamba.dt_bias", .gguf = "blk.{i}.ssm_dt.bias", .kinds = kM},
          {.hf = "model.layers.{i}.mamba.A_log", .gguf = "blk.{i}.ssm_a", .kinds = kM, .transform = Transform::kNegExp,
           .reshape = Reshape::kAppendOne},
          {.hf = "model.layers.{i}.mamba.D", .gguf = "blk.{i}.ssm_d", .kinds = kM, .reshape = Reshape::kAppendOne},
          {.hf = "model.layers.{i}.mamba.norm.weight", .gguf = "blk.{i}.ssm_norm.weight", .kinds = kM,
           .reshape = Reshape::kGroups},
          {.hf = "model.layers.{i}.mamba.out_proj.weight", .gguf = "blk.{i}.ssm_out.weight", .kinds = kM},
          {.hf = "model.layers.{i}.self_attn.q_proj.weight", .gguf = "blk.{i}.attn_q.weight", .kinds = kA,
           .transform = Transform::kRopePermuteQ},
          {.hf = "model.layers.{i}.self_attn.k_proj.weight", .gguf = "blk.{i}.attn_k.weight", .kinds = kA,
           .transform = Transform::kRopePermuteK},
          {.hf = "model.layers.{i}.self_attn.v_proj.weight", .gguf = "blk.{i}.attn_v.weight", .kinds = kA},
          {.hf = "model.layers.{i}.self_attn.o_proj.weight", .gguf = "blk.{i}.attn_output.weight", .kinds = kA},
          {.hf = "model.layers.{i}.post_attention_layernorm.weight", .gguf = "blk.{i}.ffn_norm.weight"},
          {.hf = "model.layers.{i}.block_sparse_moe.router.layer.weight", .gguf = "blk.{i}.ffn_gate_inp.weight",
           .kinds = kMoe, .keep_f32 = true},
          {.hf = "model.layers.{i}.block_sparse_moe.input_linear.weight", .gguf = "blk.{i}.ffn_gate_exps.weight",
           .kinds = kMoe, .transform = A},
          {.hf = "model.layers.{i}.block_sparse_moe.input_linear.weight", .gguf = "blk.{i}.ffn_up_exps.weight",
           .kinds = kMoe, .transform = B},
          {.hf = "model.layers.{i}.block_sparse_moe.output_linear.weight", .gguf = "blk.{i}.ffn_down_exps.weight",
           .kinds = kMoe},
          {.hf = "model.layers.{i}.shared_mlp.input_linear.weight", .gguf = "blk.{i}.ffn_gate_shexp.weight",
           .kinds = kMoe, .transform = A},
          {.hf = "model.layers.{i}.shared_mlp.input_linear.weight", .gguf = "blk.{i}.ffn_up_shexp.weight",
           .kinds = kMoe, .transform = B},
          {.hf = "model.layers.{i}.shared_mlp.output_linear.weight", .gguf = "blk.{i}.ffn_down_shexp.weight",
           .kinds = kMoe},
          {.hf = "model.layers.{i}.shared_mlp.input_linear.weight", .gguf = "blk.{i}.ffn_gate.weight",
           .kinds = kDense, .transform = A},
          {.hf = "model.layers.{i}.shared_mlp.input_linear.weight", .gguf = "blk.{i}.ffn_up.weight",
           .kinds = kDense, .transform = B},
          {.hf = "model.layers.{i}.shared_mlp.output_linear.weight", .gguf = "blk.{i}.ffn_down.weight",
           .kinds = kDense},
      }};
}

// ---- phimoe (PhiMoEForCausalLM: Phi-3.5-MoE, Phi-tiny-MoE) ------------------
// llama.cpp's PhiMoeModel (Phi3MiniModel keys + expert counts; experts stacked
// into ffn_*_exps), plus what it forgets: key_length / value_length when the
// config has an explicit head_dim (Phi-tiny-MoE: 16 heads of 128 in a 4096
// model), and rope.dimension_count = that head_dim (llama.cpp writes
// hidden / heads). LongRoPE: rope_factors_long / _short tensors and
// rope.scaling.attn_factor as llama.cpp, plus the config's short/long mscale.
Status phimoe_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, "hidden_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, "num_hidden_layers"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, require_int(c, "intermediate_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, require_int(c, "num_attention_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_kv, require_int(c, "num_key_value_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_expert, require_int(c, "num_local_experts"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_used, require_int(c, "num_experts_per_tok"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t ctx, require_int(c, "max_position_embeddings"));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, "rms_norm_eps", 1e-5));
  CHIMERA_ASSIGN_OR_RETURN(double theta, get_float(c, "rope_theta", 10000.0));
  CHIMERA_ASSIGN_OR_RETURN(int64_t window, get_int(c, "sliding_window", 1));
  if (auto it = c.find("sliding_window"); it == c.end() || it->is_null()) window = 0;
  if (n_head % n_kv != 0) return invalid_argument("num_attention_heads must be a multiple of num_key_value_heads");
  if (n_used > n_expert) return invalid_argument("'num_experts_per_tok' exceeds 'num_local_experts'");
  if (n_used != 2) return unsupported("'num_experts_per_tok' must be 2 (sparsemixer routes top-2)");
  const bool explicit_head = c.contains("head_dim") && !c["head_dim"].is_null();
  CHIMERA_ASSIGN_OR_RETURN(int64_t head_dim, get_int(c, "head_dim", d / n_head));
  if (!explicit_head && d % n_head != 0) return invalid_argument("hidden_size must be a multiple of num_attention_heads");
  if (head_dim % 2 != 0) return invalid_argument("the head size must be even (RoPE pairs)");
  if (auto it = c.find("partial_rotary_factor"); it != c.end() && !it->is_null() && !(it->is_number() && *it == 1.0))
    return unsupported("'partial_rotary_factor' other than 1 is not supported for phimoe");
  if (auto it = c.find("hidden_act"); it != c.end() && !(it->is_string() && it->get<std::string>() == "silu"))
    return unsupported("'hidden_act' must be \"silu\" for phimoe");
  int64_t orig = ctx;
  const json* rs = nullptr;
  if (auto it = c.find("rope_scaling"); it != c.end() && !it->is_null()) {
    if (!it->is_object()) return invalid_argument("'rope_scaling' must be an object");
    rs = &*it;
  }
  const char* orig_key = "original_max_position_embeddings";
  if (c.contains(orig_key) && !c[orig_key].is_null()) {
    CHIMERA_ASSIGN_OR_RETURN(orig, get_int(c, orig_key, ctx));
  } else if (rs && rs->contains(orig_key)) {
    CHIMERA_ASSIGN_OR_RETURN(orig, get_int(*rs, orig_key, ctx));
  }
  const std::string a = "phimoe.";
  set_u32s(w, "phimoe",
           {{"context_length", ctx}, {"rope.scaling.original_context_length", orig}, {"embedding_length", d},
            {"feed_forward_length", n_ff}, {"block_count", n_layer}, {"attention.head_count", n_head},
            {"attention.head_count_kv", n_kv}});
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  set_u32s(w, "phimoe", {{"rope.dimension_count", head_dim}});
  w.set(a + "rope.freq_base", GgufValue::from_f32((float)theta));
  set_u32s(w, "phimoe", {{"attention.sliding_window", window}, {"expert_used_count", n_used}, {"expert_count", n_expert}});
  if (explicit_head) set_u32s(w, "phimoe", {{"attention.key_length", head_dim}, {"attention.value_length", head_dim}});
  if (rs) {
    const std::string type = rs->value("rope_type", rs->value("type", std::string()));
    if (type != "longrope" && type != "su")
      return unsupported("rope_scaling type '" + type + "' is not supported for phimoe (longrope)");
    std::vector<float> lf, sf;
    for (auto [key, dst] : {std::pair{"long_factor", &lf}, std::pair{"short_factor", &sf}}) {
      auto it = rs->find(key);
      if (it == rs->end() || !it->is_array()) return not_found(std::string("missing config key 'rope_scaling.") + key + "'");
      for (const json& x : *it) {
        if (!x.is_number()) return invalid_argument(std::string("'rope_scaling.") + key + "' must hold numbers");
        dst->push_back(x.get<float>());
      }
      if ((int64_t)dst->size() != head_dim / 2)
        return invalid_argument(std::string("'rope_scaling.") + key + "' must hold head_dim / 2 = " +
                                std::to_string(head_dim / 2) + " factors");
    }
    const double scale = (double)ctx / (double)orig;
    const double attn_factor = scale > 1.0 ? std::sqrt(1 + std::log(scale) / std::log((double)orig)) : 1.0;
    w.set(a + "rope.scaling.attn_factor", GgufValue::from_f32((float)attn_factor));
    for (auto [key, gk] : {std::pair{"short_mscale", "rope.scaling.short_mscale"}, std::pair{"long_mscale", "rope.scaling.long_mscale"}}) {
      auto it = rs->find(key);
      if (it == rs->end() || it->is_null()) continue;
      if (!it->is_number()) return invalid_argument(std::string("'rope_scaling.") + key + "' must be a number");
      w.set(a + gk, GgufValue::from_f32(it->get<float>()));
    }
    plan->extra_f32.emplace_back("rope_factors_long.weight", std::move(lf));
    plan->extra_f32.emplace_back("rope_factors_short.weight", std::move(sf));
  }
  plan->kinds.assign((size_t)n_layer, 0);
  plan->n_expert = n_expert;
  return Status::ok();
}

FamilySpec phimoe_spec() {
  return FamilySpec{
      {"phimoe"},
      "phimoe",
      &phimoe_hparams,
      {
          {.hf = "model.embed_tokens.weight", .gguf = "token_embd.weight"},
          {.hf = "model.norm.weight", .gguf = "output_norm.weight"},
          {.hf = "model.norm.bias", .gguf = "output_norm.bias"},
          {.hf = "lm_head.weight", .gguf = "output.weight", .optional = true},
          {.hf = "lm_head.bias", .gguf = "output.bias", .optional = true},
          {.hf = "model.layers.{i}.input_layernorm.weight", .gguf = "blk.{i}.attn_norm.weight"},
          {.hf = "model.layers.{i}.input_layernorm.bias", .gguf = "blk.{i}.attn_norm.bias"},
          {.hf = "model.layers.{i}.self_attn.q_proj.weight", .gguf = "blk.{i}.attn_q.weight"},
          {.hf = "model.layers.{i}.self_attn.q_proj.bias", .gguf = "blk.{i}.attn_q.bias", .optional = true},
          {.hf = "model.layers.{i}.self_attn.k_proj.weight", .gguf = "blk.{i}.attn_k.weight"},
          {.hf = "model.layers.{i}.self_attn.k_proj.bias", .gguf = "blk.{i}.attn_k.bias", .optional = true},
          {.hf = "model.layers.{i}.self_attn.v_proj.weight", .gguf = "blk.{i}.attn_v.weight"},
          {.hf = "model.layers.{i}.self_attn.v_proj.bias", .gguf = "blk.{i}.attn_v.bias", .optional = true},
          {.hf = "model.layers.{i}.self_attn.o_proj.weight", .gguf = "blk.{i}.attn_output.weight"},
          {.hf = "model.layers.{i}.self_attn.o_proj.bias", .gguf = "blk.{i}.attn_output.bias", .optional = true},
          {.hf = "model.layers.{i}.self_attn.rotary_emb.inv_freq", .gguf = nullptr, .optional = true},
          {.hf = "model.layers.{i}.post_attention_layernorm.weight", .gguf = "blk.{i}.ffn_norm.weight"},
          {.hf = "model.layers.{i}.post_attention_layernorm.bias", .gguf = "blk.{i}.ffn_norm.bias"},
          {.hf = "model.layers.{i}.block_sparse_moe.gate.weight", .gguf = "blk.{i}.ffn_gate_inp.weight", .keep_f32 = true},
          {.hf = "model.layers.{i}.block_sparse_moe.experts.{e}.w1.weight", .gguf = "blk.{i}.ffn_gate_exps.weight"},
          {.hf = "model.layers.{i}.block_sparse_moe.experts.{e}.w3.weight", .gguf = "blk.{i}.ffn_up_exps.weight"},
          {.hf = "model.layers.{i}.block_sparse_moe.experts.{e}.w2.weight", .gguf = "blk.{i}.ffn_down_exps.weight"},
      }};
}

}  // namespace

const std::vector<FamilySpec>& families() {
  static const std::vector<FamilySpec> kFamilies = {phi4flash_spec(), llama_spec(), mamba2_spec(), mamba_spec(),
                                                     granitehybrid_spec(), phimoe_spec()};
  return kFamilies;
}

}  // namespace chimera::format::hf
