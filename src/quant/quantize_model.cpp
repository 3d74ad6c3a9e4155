// Quantization mixes, llama.cpp's per-tensor type rules, row codecs and the
// GGUF-to-GGUF quantization driver (see quantize_model.h for the contract).
// The driver maps the input, decodes each tensor to f32 (exact for F32/F16/BF16;
// a lossy requantization for already-quantized inputs, reported through warn),
// encodes it in parallel over row ranges while GgufWriter writes the output
// (lazy tensors, with the input's alignment), one tensor at a time, dropping
// each tensor's input pages once written: memory stays at about one tensor in
// f32 plus its encoding, whatever the model size. Tensors that are not
// quantized are copied byte for byte.
#include "quant/quantize_model.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <sys/mman.h>

#include "core/fp16.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
#include "format/gguf/tensor_names.h"
#include "quant/iq4xs_blocks.h"
#include "quant/kquant_blocks.h"
#include "quant/legacy_blocks.h"
#include "quant/ternarize.h"
#include "quant/ternary_blocks.h"

namespace chimera::quant {

using format::GgmlType;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower((unsigned char)a[i]) != std::tolower((unsigned char)b[i])) return false;
  return true;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}

using format::tn::layer_of;  // layer index of a per-layer name, or -1

// llama.cpp: the first and last eighth of the layers, and every third in between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// llama.cpp's category_is_attn_v: V projections, fused QKV and MLA's kv_b share the attn_v rules
// (and the attn_v layer count).
bool is_attn_v_like(std::string_view n) {
  return contains(n, "attn_v.weight") || contains(n, "attn_qkv.weight") || contains(n, "attn_kv_b.weight");
}

// The tensor kinds the mix rules single out.
enum class Category { kOther, kOutput, kTokenEmbd, kAttnV, kFfnDown, kAttnOutput };

// From the role when the table gave one, else from llama.cpp's name patterns.
Category category(const TensorShape& t) {
  switch (t.role) {
    case TensorRole::kUnknown: break;
    case TensorRole::kOutput: return Category::kOutput;
    case TensorRole::kTokenEmbd: return Category::kTokenEmbd;
    case TensorRole::kAttnV:
    case TensorRole::kAttnQkv: return Category::kAttnV;
    case TensorRole::kFfnDown:
    case TensorRole::kExpertDown:
    case TensorRole::kShexpDown: return Category::kFfnDown;
    case TensorRole::kAttnOutput: return Category::kAttnOutput;
    default: return Category::kOther;
  }
  const std::string_view n = t.name;
  if (n == "output.weight") return Category::kOutput;
  if (n == "token_embd.weight") return Category::kTokenEmbd;
  if (is_attn_v_like(n)) return Category::kAttnV;
  if (contains(n, "ffn_down")) return Category::kFfnDown;
  if (contains(n, "attn_output.weight")) return Category::kAttnOutput;
  return Category::kOther;
}

bool is_kquant(GgmlType t) {
  return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K;
}

bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

bool is_ternary(GgmlType t) { return t == GgmlType::TQ1_0 || t == GgmlType::TQ2_0; }

// The llama_tensor_get_type decision before the row-length fallback.
GgmlType mix_rule(const QuantMix& mix, const MixContext& ctx, const TensorShape& t) {
  const std::string_view n = t.name;
  const std::string_view m = mix.name;
  const Category cat = category(t);
  const bool head = cat == Category::kOutput || (!ctx.has_output && cat == Category::kTokenEmbd);
  GgmlType type = mix.base;
  if (is_ternary(mix.base)) {
    // llama.cpp's LLAMA_FTYPE_MOSTLY_TQ1_0 / TQ2_0: the output head (or a tied token_embd)
    // gets Q6_K (Q8_0 for rows that are not whole 256-blocks), an untied token_embd Q4_K,
    // every other matrix the ternary type.
    if (head) return (t.ne.empty() ? 0 : t.ne[0]) % kQK_K != 0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
    if (cat == Category::kTokenEmbd) return GgmlType::Q4_K;
    return type;
  }
  if (!is_kquant(mix.base) && mix.base != GgmlType::Q4_0 && mix.base != GgmlType::Q4_1 &&
      mix.base != GgmlType::Q5_0 && mix.base != GgmlType::Q5_1 && mix.base != GgmlType::Q8_0 &&
      mix.base != GgmlType::IQ4_XS)
    return type;  // float "mixes" convert every quantizable tensor to the base type
  const int64_t layer = layer_of(n);
  if (head) {
    const int64_t nx = t.ne.empty() ? 0 : t.ne[0];
    if (nx % kQK_K != 0) return GgmlType::Q8_0;
    return type == GgmlType::Q8_0 ? type : GgmlType::Q6_K;
  }
  if (cat == Category::kAttnV) {
    const int64_t i = layer < 0 ? 0 : layer;
    if (m == "Q2_K") type = ctx.n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
    else if (m == "Q3_K_M") type = i < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
    else if ((m == "Q4_K_M" || m == "Q5_K_M") && use_more_bits(i, ctx.n_attn_v)) type = GgmlType::Q6_K;
    else if (m == "Q4_K_S" && i < 4) type = GgmlType::Q5_K;
    else if (m == "IQ4_XS" && ctx.n_gqa >= 4) type = GgmlType::Q5_K;
  } else if (cat == Category::kFfnDown) {
    const int64_t i = layer < 0 ? 0 : layer, nl = ctx.n_ffn_down;
    if (m == "Q2_K") type = GgmlType::Q3_K;
    else if (m == "Q3_K_M") type = i < nl / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
    else if ((m == "Q4_K_M" || m == "Q5_K_M") && use_more_bits(i, nl)) type = GgmlType::Q6_K;
    else if (m == "Q4_K_S" && i < nl / 8) type = GgmlType::Q5_K;
    else if (m == "IQ4_XS" && i < nl / 8) type = GgmlType::Q5_K;  // llama.cpp: without an imatrix
  } else if (cat == Category::kAttnOutput) {
    if (m == "Q2_K") type = GgmlType::Q3_K;
    else if (m == "Q3_K_M") type = GgmlType::Q4_K;
  }
  return type;
}

}  // namespace

const std::vector<QuantMix>& quant_mixes() {
  // ftype numbers are llama.cpp's llama_ftype (LLAMA_FTYPE_MOSTLY_*).
  static const std::vector<QuantMix> kMixes = {
      {"Q8_0", 7, GgmlType::Q8_0},    {"Q4_0", 2, GgmlType::Q4_0},    {"Q4_1", 3, GgmlType::Q4_1},
      {"Q5_0", 8, GgmlType::Q5_0},    {"Q5_1", 9, GgmlType::Q5_1},    {"Q2_K", 10, GgmlType::Q2_K},
      {"Q3_K_M", 12, GgmlType::Q3_K}, {"Q4_K_S", 14, GgmlType::Q4_K}, {"Q4_K_M", 15, GgmlType::Q4_K},
      {"Q5_K_S", 16, GgmlType::Q5_K}, {"Q5_K_M", 17, GgmlType::Q5_K}, {"Q6_K", 18, GgmlType::Q6_K},
      {"F16", 1, GgmlType::F16},      {"BF16", 32, GgmlType::BF16},   {"F32", 0, GgmlType::F32},
      {"TQ1_0", 36, GgmlType::TQ1_0}, {"TQ2_0", 37, GgmlType::TQ2_0}, {"IQ4_XS", 30, GgmlType::IQ4_XS},
  };
  return kMixes;
}

const QuantMix* find_quant_mix(std::string_view name) {
  for (const auto& m : quant_mixes())
    if (iequals(m.name, name)) return &m;
  return nullptr;
}

std::string quant_mix_names() {
  std::string s;
  for (const auto& m : quant_mixes()) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

MixContext make_mix_context(const std::vector<TensorShape>& tensors, int64_t n_head, int64_t n_head_kv) {
  MixContext c;
  for (const auto& t : tensors) {
    const Category cat = category(t);
    if (cat == Category::kAttnV) ++c.n_attn_v;
    if (cat == Category::kFfnDown) ++c.n_ffn_down;
    if (cat == Category::kOutput) c.has_output = true;
  }
  if (n_head > 0 && n_head_kv > 0) c.n_gqa = n_head / n_head_kv;
  return c;
}

bool is_quantizable(const TensorShape& t) {
  if (t.role != TensorRole::kUnknown) return t.ne.size() >= 2 && is_matrix_role(t.role);
  const std::string_view n = t.name;
  if (!ends_with(n, "weight") || t.ne.size() < 2) return false;
  if (ends_with(n, "_norm.weight")) return false;
  // Kept at full precision by llama.cpp: router, position/type embeddings, SSM conv/state.
  for (std::string_view k : {"ffn_gate_inp.weight", "pos_embd", "token_types", "ssm_conv1d.weight",
                             "rope_freqs", "altup", "laurel"})
    if (contains(n, k)) return false;
  return true;
}

GgmlType choose_tensor_type(const QuantMix& mix, const MixContext& ctx, const TensorShape& t, bool* fallback) {
  if (fallback) *fallback = false;
  if (!is_quantizable(t)) return GgmlType::F32;
  GgmlType type = mix_rule(mix, ctx, t);
  const int64_t nx = t.ne[0];
  if (format::ggml_row_size(type, nx) != 0) return type;
  if (fallback) *fallback = true;
  switch (type) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::TQ1_0:
    case GgmlType::TQ2_0: type = GgmlType::Q4_0; break;
    case GgmlType::Q4_K: type = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: type = GgmlType::Q5_1; break;
    case GgmlType::Q6_K: type = GgmlType::Q8_0; break;
    case GgmlType::IQ4_XS: type = GgmlType::IQ4_NL; break;
    default: type = GgmlType::F16; break;  // llama.cpp refuses legacy types here; F16 is always possible
  }
  if (format::ggml_row_size(type, nx) == 0) type = GgmlType::F16;
  return type;
}

namespace {

// Encodes one row (n elements, a multiple of the block size).
void encode_one(GgmlType type, const float* x, int64_t n, uint8_t* y) {
  switch (type) {
    case GgmlType::F32: std::memcpy(y, x, (size_t)n * 4); break;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(x[i]);
        std::memcpy(y + 2 * i, &h, 2);
      }
      break;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(y + 2 * i, &h, 2);
      }
      break;
    case GgmlType::Q8_0: quantize_row_q8_0_ref(x, (block_q8_0*)y, n); break;
    case GgmlType::Q4_0: quantize_row_q4_0_ref(x, (block_q4_0*)y, n); break;
    case GgmlType::Q4_1: quantize_row_q4_1_ref(x, (block_q4_1*)y, n); break;
    case GgmlType::Q5_0: quantize_row_q5_0_ref(x, (block_q5_0*)y, n); break;
    case GgmlType::Q5_1: quantize_row_q5_1_ref(x, (block_q5_1*)y, n); break;
    case GgmlType::IQ4_NL: quantize_row_iq4_nl_ref(x, (block_iq4_nl*)y, n); break;
    case GgmlType::Q2_K: quantize_row_q2_K_ref(x, (block_q2_K*)y, n); break;
    case GgmlType::Q3_K: quantize_row_q3_K_ref(x, (block_q3_K*)y, n); break;
    case GgmlType::Q4_K: quantize_row_q4_K_ref(x, (block_q4_K*)y, n); break;
    case GgmlType::Q5_K: quantize_row_q5_K_ref(x, (block_q5_K*)y, n); break;
    case GgmlType::Q6_K: quantize_row_q6_K_ref(x, (block_q6_K*)y, n); break;
    case GgmlType::IQ4_XS: quantize_row_iq4_xs_ref(x, (block_iq4_xs*)y, n); break;
    // Row-wise TQ encoding is llama.cpp's (per-block absmax, as llama-quantize and synth do);
    // quantize_model ternarizes whole matrices with absmean instead (ternarize_matrices).
    case GgmlType::TQ1_0: quantize_row_tq1_0(x, (block_tq1_0*)y, n); break;
    case GgmlType::TQ2_0: quantize_row_tq2_0(x, (block_tq2_0*)y, n); break;
    default: break;  // rejected by encode_rows
  }
}

bool can_encode(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0: case GgmlType::Q4_0:
    case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::IQ4_NL: case GgmlType::Q2_K:
    case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: case GgmlType::TQ1_0:
    case GgmlType::TQ2_0: case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status ternarize_matrices(GgmlType type, const float* src, const std::vector<int64_t>& ne, uint8_t* dst,
                          size_t dst_bytes, std::vector<float>* scales) {
  if (!is_ternary(type)) return invalid_argument("ternarize_matrices: " + format::ggml_type_name(type) + " is not TQ1_0/TQ2_0");
  if (ne.size() < 2) return invalid_argument("ternarize_matrices: tensor is not a matrix");
  const int64_t nx = ne[0], ny = ne[1];
  int64_t n_mat = 1;
  for (size_t i = 2; i < ne.size(); ++i) n_mat *= ne[i];
  const size_t mat_bytes = format::ggml_row_size(type, nx) * (size_t)ny;
  if (mat_bytes == 0 && nx * ny != 0)
    return invalid_argument("ternarize_matrices: rows of " + std::to_string(nx) + " are not whole 256-blocks");
  if (dst_bytes < mat_bytes * (size_t)n_mat) return invalid_argument("ternarize_matrices: output buffer too small");
  if (scales) scales->clear();
  for (int64_t m = 0; m < n_mat; ++m) {
    float s = 0.f;
    CHIMERA_RETURN_IF_ERROR(ternarize_tensor(type, src + m * nx * ny, ny, nx, dst + (size_t)m * mat_bytes, mat_bytes, &s));
    if (scales) scales->push_back(s);
  }
  return Status::ok();
}

Status encode_rows(GgmlType type, const float* src, int64_t n_rows, int64_t n_cols, uint8_t* dst, ThreadPool* pool) {
  if (!can_encode(type)) return unsupported("cannot quantize to " + format::ggml_type_name(type));
  const size_t row_bytes = format::ggml_row_size(type, n_cols);
  if (row_bytes == 0)
    return invalid_argument("rows of " + std::to_string(n_cols) + " elements cannot be stored as " +
                            format::ggml_type_name(type));
  auto work = [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) encode_one(type, src + r * n_cols, n_cols, dst + (size_t)r * row_bytes);
  };
  if (pool && pool->size() > 1 && n_rows > 1)
    pool->parallel_for(n_rows, work);
  else
    work(0, n_rows, 0);
  return Status::ok();
}

Status decode_row(GgmlType type, const uint8_t* x, int64_t n, float* y) {
  if (format::ggml_row_size(type, n) == 0 && n != 0)
    return invalid_argument(std::to_string(n) + " elements are not whole " + format::ggml_type_name(type) + " blocks");
  switch (type) {
    case GgmlType::F32: std::memcpy(y, x, (size_t)n * 4); break;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, x + 2 * i, 2);
        y[i] = f16_to_f32(h);
      }
      break;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, x + 2 * i, 2);
        y[i] = bf16_to_f32(h);
      }
      break;
    case GgmlType::Q8_0: dequantize_row_q8_0((const block_q8_0*)x, y, n); break;
    case GgmlType::Q4_0: dequantize_row_q4_0((const block_q4_0*)x, y, n); break;
    case GgmlType::Q4_1: dequantize_row_q4_1((const block_q4_1*)x, y, n); break;
    case GgmlType::Q5_0: dequantize_row_q5_0((const block_q5_0*)x, y, n); break;
    case GgmlType::Q5_1: dequantize_row_q5_1((const block_q5_1*)x, y, n); break;
    case GgmlType::IQ4_NL: dequantize_row_iq4_nl((const block_iq4_nl*)x, y, n); break;
    case GgmlType::Q2_K: dequantize_row_q2_K((const block_q2_K*)x, y, n); break;
    case GgmlType::Q3_K: dequantize_row_q3_K((const block_q3_K*)x, y, n); break;
    case GgmlType::Q4_K: dequantize_row_q4_K((const block_q4_K*)x, y, n); break;
    case GgmlType::Q5_K: dequantize_row_q5_K((const block_q5_K*)x, y, n); break;
    case GgmlType::Q6_K: dequantize_row_q6_K((const block_q6_K*)x, y, n); break;
    case GgmlType::IQ4_XS: dequantize_row_iq4_xs((const block_iq4_xs*)x, y, n); break;
    case GgmlType::Q8_K: dequantize_row_q8_K((const block_q8_K*)x, y, n); break;
    case GgmlType::TQ1_0: dequantize_row_tq1_0((const block_tq1_0*)x, y, n); break;
    case GgmlType::TQ2_0: dequantize_row_tq2_0((const block_tq2_0*)x, y, n); break;
    default: return unsupported("cannot read " + format::ggml_type_name(type) + " tensors");
  }
  return Status::ok();
}

Result<QuantizeStats> quantize_model(const std::string& in_path, const std::string& out_path, const QuantMix& mix,
                                     const QuantizeOptions& opts) {
  auto opened = format::GgufFile::open(in_path);
  if (!opened) return opened.status().with_context("cannot read '" + in_path + "'");
  const format::GgufFile& in = **opened;
  if (out_path.empty()) return invalid_argument("no output path given");
  {
    std::error_code ec;
    if (std::filesystem::equivalent(in_path, out_path, ec))
      return invalid_argument("output '" + out_path + "' is the input file");
  }

  const std::string tmp = out_path + ".partial";
  {  // fail on an unwritable output before spending time on the weights
    std::FILE* probe = std::fopen(tmp.c_str(), "wb");
    if (!probe) return io_error("cannot create '" + tmp + "' (output directory missing or not writable)");
    std::fclose(probe);
    std::remove(tmp.c_str());
  }

  const std::string arch = in.architecture();
  auto head = [&](const char* key) { return in.get_int(arch + ".attention." + key).value_or(0); };
  std::vector<TensorShape> shapes;
  for (const auto& t : in.tensors())
    shapes.push_back({t.name, t.ne, opts.role_of ? opts.role_of(arch, t.name) : TensorRole::kUnknown});
  const MixContext ctx = make_mix_context(shapes, head("head_count"), head("head_count_kv"));

  format::GgufWriter w(in.version() >= 3 ? 3 : in.version());
  w.set_alignment((uint32_t)in.alignment());
  for (const auto& [key, value] : in.metadata()) w.set(key, value);
  w.set("general.file_type", format::GgufValue::from_u32(mix.ftype));
  w.set("general.quantization_version", format::GgufValue::from_u32(2));

  QuantizeStats stats;
  bool warned = false;
  if (is_ternary(mix.base) && opts.warn)
    opts.warn(std::string(mix.name) +
              " ternarizes every weight matrix to {-1, 0, +1} x one absmean scale per matrix (BitNet b1.58): "
              "only ternary-trained (BitNet-style) weights keep their quality; weights trained in full precision "
              "lose most of it");
  std::vector<float> f32;
  const size_t count = in.tensors().size();
  for (size_t idx = 0; idx < count; ++idx) {
    const auto& t = in.tensors()[idx];
    bool fallback = false;
    const bool quantize = is_quantizable(shapes[idx]);
    GgmlType to = quantize ? choose_tensor_type(mix, ctx, shapes[idx], &fallback) : t.type;
    // Tensors llama.cpp does not quantize (norms, biases, routers) keep their type and bytes.
    const int64_t nx = t.dim(0);
    const int64_t rows = (int64_t)(t.n_elements / (uint64_t)nx);
    const size_t out_bytes = to == t.type ? t.n_bytes : format::ggml_row_size(to, nx) * (size_t)rows;
    if (to != t.type) {
      if (!is_float(t.type) && !warned && opts.warn) {
        opts.warn("input tensor '" + t.name + "' is " + format::ggml_type_name(t.type) +
                  ": requantizing from already-quantized weights loses accuracy; quantize from F32/F16/BF16");
        warned = true;
      }
      ++stats.n_quantized;
    }
    if (fallback) ++stats.n_fallback;
    stats.bytes_in += t.n_bytes;
    stats.bytes_out += out_bytes;
    // Produced while the file is written, one tensor at a time; the input
    // pages of each are dropped once it is written (the input is a read-only
    // file mapping), so quantizing holds one tensor, not the whole model.
    auto fill = [&t, &f32, &opts, to, nx, rows, idx, count, fallback](uint8_t* dst) -> Status {
      if (to == t.type) {
        std::memcpy(dst, t.data, t.n_bytes);
      } else {
        f32.resize(t.n_elements);
        const size_t in_row = format::ggml_row_size(t.type, nx);
        for (int64_t r = 0; r < rows; ++r)
          CHIMERA_RETURN_IF_ERROR(decode_row(t.type, t.data + (size_t)r * in_row, nx, f32.data() + (size_t)r * nx));
        const size_t n_out = format::ggml_row_size(to, nx) * (size_t)rows;
        CHIMERA_RETURN_IF_ERROR(is_ternary(to) ? ternarize_matrices(to, f32.data(), t.ne, dst, n_out)
                                               : encode_rows(to, f32.data(), rows, nx, dst, opts.pool));
      }
      advise_pages(t.data, t.n_bytes, /*outward=*/true, MADV_DONTNEED);
      const uint64_t n_out = to == t.type ? t.n_bytes : format::ggml_row_size(to, nx) * (uint64_t)rows;
      if (opts.on_tensor) opts.on_tensor(idx, count, t.name, t.type, to, t.n_bytes, n_out, fallback);
      return Status::ok();
    };
    CHIMERA_RETURN_IF_ERROR(w.add_tensor_lazy(t.name, to, t.ne, out_bytes, std::move(fill)));
  }
  stats.n_tensors = count;

  // GgufWriter::write goes through out_path + ".partial" and renames on success.
  if (Status st = w.write(out_path); !st) return st.with_context("cannot write '" + out_path + "'");
  return stats;
}

}  // namespace chimera::quant
