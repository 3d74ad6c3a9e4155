// The generic Hugging Face -> GGUF driver (see hf_convert.h for the design):
// folder -> family (by config.json model_type) -> hyper-parameters and layer
// kinds -> tokenizer keys -> tensors via the family's rule table.
// Invariants: every checkpoint tensor is claimed by exactly one rule; tensors
// whose stored type already equals the output type and need no transform are
// written straight from the memory map (no copy); everything else is widened to
// f32, transformed and narrowed once. A failed conversion leaves no file.
#include "format/hf/hf_convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include <sys/mman.h>

#include "core/fp16.h"
#include "core/memory.h"
#include "format/safetensors/safetensors.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
namespace st = format::safetensors;

std::string subst(const char* pattern, int64_t i, int64_t e = -1) {
  std::string s(pattern);
  const size_t p = s.find("{i}");
  if (p != std::string::npos) s.replace(p, 3, std::to_string(i));
  const size_t q = s.find("{e}");
  if (q != std::string::npos && e >= 0) s.replace(q, 3, std::to_string(e));
  return s;
}

bool stacked(const TensorRule& r) { return std::string(r.hf).find("{e}") != std::string::npos; }

struct Claim {
  const TensorRule* rule;
  int64_t layer;  // -1: global
};

Result<GgmlType> resolve_type(const std::string& name, const st::Checkpoint& ck) {
  if (name == "f32") return GgmlType::F32;
  if (name == "f16") return GgmlType::F16;
  if (name == "bf16") return GgmlType::BF16;
  if (!name.empty()) return invalid_argument("--type must be f32, f16 or bf16 (got '" + name + "')");
  // The float type of the largest float tensor: Mamba checkpoints keep small
  // tensors (A_log, D, conv weights) in F32 next to F16 / BF16 matrices;
  // packed BitNet weights are U8.
  const st::TensorInfo* big = nullptr;
  for (const st::TensorInfo* t : ck.tensors()) {
    const bool flt = t->dtype == st::Dtype::F32 || t->dtype == st::Dtype::F16 || t->dtype == st::Dtype::BF16;
    if (flt && (!big || t->n_bytes() > big->n_bytes())) big = t;
  }
  if (big && big->dtype == st::Dtype::BF16) return GgmlType::BF16;
  if (big && big->dtype == st::Dtype::F16) return GgmlType::F16;
  return GgmlType::F32;
}

// Rows of a head for the RoPE permutations (0: not permuted).
int64_t permute_head_rows(const TensorRule& r, const LayerPlan& plan, int64_t rows) {
  const int64_t heads = r.transform == Transform::kRopePermuteQ   ? plan.n_head
                        : r.transform == Transform::kRopePermuteK ? plan.n_head_kv
                                                                  : 0;
  return heads > 0 ? rows / heads : 0;
}

// Drops the pages of a read-only file mapping that hold [p, p + n) once a
// converted tensor is produced, so they do not stay resident until the end
// (pages fault back in if read again, e.g. by the other half of a split).
void drop_pages(const uint8_t* p, size_t n) { advise_pages(p, n, /*outward=*/true, MADV_DONTNEED); }

void narrow(const float* v, size_t n, GgmlType type, uint8_t* dst) {
  if (type == GgmlType::F32) {
    std::memcpy(dst, v, n * 4);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = type == GgmlType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

// Adds one tensor. Stored type == output type without a transform: written
// straight from the mapping. Otherwise produced while the file is written, in
// chunks of rows (whole heads for the RoPE permutations), so converting holds
// at most one chunk in f32, never the whole checkpoint.
Status add_tensor(GgufWriter& w, const st::TensorInfo& t, const std::string& gname, const TensorRule& r,
                  GgmlType out_type, const LayerPlan& plan, const ConvertOptions& opts) {
  std::vector<int64_t> shape = t.shape;
  if (r.transform == Transform::kSqueezeMiddle) {
    if (shape.size() != 3 || shape[1] != 1)
      return invalid_argument("tensor '" + t.name + "' " + t.shape_string() + " is not [C, 1, K]");
    shape = {shape[0], shape[2]};
  }
  if (shape.empty()) shape = {1};
  if (r.reshape != Reshape::kKeep) {
    if (shape.size() != 1)
      return invalid_argument("tensor '" + t.name + "' " + t.shape_string() + " is not one-dimensional");
    if (r.reshape == Reshape::kAppendOne) {
      shape = {shape[0], 1};
    } else {
      if (plan.n_group <= 0 || shape[0] % plan.n_group != 0)
        return invalid_argument("tensor '" + t.name + "' " + t.shape_string() + " does not split into " +
                                std::to_string(plan.n_group) + " groups");
      shape = {plan.n_group, shape[0] / plan.n_group};
    }
  }
  // Splits keep rows [half * F, (half + 1) * F) of every block of 2F rows.
  const bool split = r.transform == Transform::kSplitFirstHalf || r.transform == Transform::kSplitSecondHalf;
  int64_t block_rows = 0, skip_rows = 0;
  if (split) {
    if (shape.size() < 2 || shape[shape.size() - 2] % 2 != 0)
      return invalid_argument("tensor '" + t.name + "' " + t.shape_string() + " does not split into two halves");
    shape[shape.size() - 2] /= 2;
    block_rows = shape[shape.size() - 2];
    skip_rows = r.transform == Transform::kSplitFirstHalf ? 0 : block_rows;
  }
  const bool permute = r.transform == Transform::kRopePermuteQ || r.transform == Transform::kRopePermuteK;
  const bool elementwise = r.transform == Transform::kNegExp || r.transform == Transform::kSqueezeMiddle;
  const bool f32_name = !gname.ends_with(".weight") || gname.ends_with("_norm.weight");  // as llama.cpp
  const GgmlType type = (r.keep_f32 || shape.size() == 1 || elementwise || f32_name) ? GgmlType::F32 : out_type;
  std::vector<int64_t> ne(shape.rbegin(), shape.rend());
  const int64_t cols = ne[0];
  const int64_t in_rows = (int64_t)(t.n_elements() / (uint64_t)std::max<int64_t>(cols, 1));
  const int64_t rows = split ? in_rows / 2 : in_rows;  // output rows
  int64_t head_rows = 0;
  if (permute) {
    head_rows = permute_head_rows(r, plan, rows);
    if (shape.size() != 2 || head_rows < 2 || head_rows % 2 != 0 || rows % head_rows != 0)
      return invalid_argument("tensor '" + t.name + "' " + t.shape_string() + " does not split into " +
                              std::to_string(r.transform == Transform::kRopePermuteQ ? plan.n_head : plan.n_head_kv) +
                              " heads of an even size");
  }
  auto report = [&opts, gname, ne, type] {
    if (opts.progress) opts.progress(gname, ne, type);
  };
  const bool same = (type == GgmlType::F32 && t.dtype == st::Dtype::F32) ||
                    (type == GgmlType::F16 && t.dtype == st::Dtype::F16) ||
                    (type == GgmlType::BF16 && t.dtype == st::Dtype::BF16);
  if (same && r.transform == Transform::kNone) {
    report();
    return w.add_tensor_mapped(gname, type, ne, t.data, t.n_bytes());
  }
  const size_t in_row = t.n_bytes() / (size_t)std::max<int64_t>(in_rows, 1);
  const size_t out_elem = type == GgmlType::F32 ? 4 : 2;
  // ~4 MiB of f32 per chunk, whole heads when permuting.
  int64_t chunk = std::max<int64_t>(1, ((int64_t)4 << 20) / (std::max<int64_t>(cols, 1) * 4));
  if (permute) chunk = std::max<int64_t>(1, chunk / head_rows) * head_rows;
  if (split) chunk = std::min(chunk, block_rows);  // a chunk never crosses a block
  const size_t n_out = (size_t)rows * (size_t)cols * out_elem;
  return w.add_tensor_lazy(gname, type, ne, n_out, [t, r, type, cols, rows, in_row, out_elem, chunk, head_rows,
                                                     block_rows, skip_rows, report](uint8_t* dst) -> Status {
    report();
    std::vector<float> perm;
    for (int64_t r0 = 0; r0 < rows;) {
      int64_t n = std::min(chunk, rows - r0);
      int64_t src_row = r0;
      if (block_rows > 0) {  // output row r0 of block b is input row b * 2F + skip + (r0 mod F)
        const int64_t b = r0 / block_rows, k = r0 % block_rows;
        n = std::min(n, block_rows - k);
        src_row = b * 2 * block_rows + skip_rows + k;
      }
      st::TensorInfo part = t;
      part.shape = {n, cols};
      part.data = t.data + (size_t)src_row * in_row;
      part.begin = 0;
      part.end = (uint64_t)((size_t)n * in_row);
      auto f = st::to_f32(part);
      if (!f) return f.status();
      std::vector<float>& v = f.value();
      if (r.transform == Transform::kNegExp)
        for (float& x : v) x = -std::exp(x);
      const float* src = v.data();
      if (head_rows > 0) {
        perm.resize(v.size());
        const int64_t half = head_rows / 2;
        for (int64_t row = 0; row < n; ++row) {
          const int64_t h = row / head_rows, k = row % head_rows, i = k / 2, j = k % 2;
          std::memcpy(perm.data() + row * cols, v.data() + (h * head_rows + j * half + i) * cols, (size_t)cols * 4);
        }
        src = perm.data();
      }
      narrow(src, v.size(), type, dst + (size_t)r0 * (size_t)cols * out_elem);
      r0 += n;
    }
    drop_pages(t.data, t.n_bytes());
    return Status::ok();
  });
}

// Rounds v to the precision of a checkpoint dtype (llama.cpp's
// `result.type(dtype)` after ternarizing a master weight).
float round_to(st::Dtype d, float v) {
  if (d == st::Dtype::BF16) return bf16_to_f32(f32_to_bf16(v));
  if (d == st::Dtype::F16) return f16_to_f32(f32_to_f16(v));
  return v;
}

// A BitNet BitLinear weight (Transform::kBitnetTernary, see hf_convert.h),
// produced while the file is written, ~4 MiB of rows at a time. Float
// masters take two passes (the absmean, then the ternary values); packed U8
// weights are unpacked with their one-element scale.
Status add_bitnet(GgufWriter& w, const st::TensorInfo& t, const st::TensorInfo* scale, const std::string& scale_name,
                  const std::string& gname, GgmlType out_type, const LayerPlan& plan, const ConvertOptions& opts) {
  if (t.shape.size() != 2) return invalid_argument("tensor '" + t.name + "' " + t.shape_string() + " is not a matrix");
  const bool packed = t.dtype == st::Dtype::U8;
  if (packed && !scale)
    return not_found("packed BitNet weight '" + t.name + "' needs the tensor '" + scale_name + "'");
  if (!packed && scale)
    return invalid_argument("tensor '" + t.name + "' is " + st::dtype_name(t.dtype) + ", not packed U8, but has '" +
                            scale_name + "'");
  float sc = 1.f;
  if (packed) {
    if (scale->n_elements() != 1)
      return invalid_argument("tensor '" + scale->name + "' " + scale->shape_string() + " must hold one value");
    auto f = st::to_f32(*scale);
    if (!f) return f.status();
    sc = f.value()[0];
    if (!(std::isfinite(sc) && sc > 0.f)) return invalid_argument("tensor '" + scale->name + "' is not a positive scale");
  }
  const int64_t in_rows = t.shape[0], cols = t.shape[1];
  const int64_t rows = packed ? 4 * in_rows : in_rows;
  const GgmlType type = out_type;
  const size_t out_elem = type == GgmlType::F32 ? 4 : 2;
  const std::vector<int64_t> ne = {cols, rows};
  const size_t in_row = t.n_bytes() / (size_t)std::max<int64_t>(in_rows, 1);
  const int64_t chunk = std::max<int64_t>(1, ((int64_t)4 << 20) / (std::max<int64_t>(cols, 1) * 4));
  const bool multiply = plan.bitnet_scale_multiplies;
  const size_t n_out = (size_t)rows * (size_t)cols * out_elem;
  return w.add_tensor_lazy(gname, type, ne, n_out, [t, gname, ne, type, packed, sc, multiply, in_rows, cols, in_row,
                                                     out_elem, chunk, &opts](uint8_t* dst) -> Status {
    if (opts.progress) opts.progress(gname, ne, type);
    std::vector<float> row((size_t)cols);
    if (packed) {
      for (int64_t r = 0; r < 4 * in_rows; ++r) {
        const uint8_t* src = t.data + (size_t)(r % in_rows) * in_row;
        const int shift = 2 * (int)(r / in_rows);
        for (int64_t c = 0; c < cols; ++c) {
          const float code = (float)((src[c] >> shift) & 3) - 1.f;
          row[(size_t)c] = multiply ? code * sc : code / sc;
        }
        narrow(row.data(), (size_t)cols, type, dst + (size_t)r * (size_t)cols * out_elem);
      }
      drop_pages(t.data, t.n_bytes());
      return Status::ok();
    }
    auto rows_at = [&](int64_t r0, int64_t n) {
      st::TensorInfo part = t;
      part.shape = {n, cols};
      part.data = t.data + (size_t)r0 * in_row;
      part.begin = 0;
      part.end = (uint64_t)((size_t)n * in_row);
      return st::to_f32(part);
    };
    double sum = 0;
    for (int64_t r0 = 0; r0 < in_rows; r0 += chunk) {
      auto f = rows_at(r0, std::min(chunk, in_rows - r0));
      if (!f) return f.status();
      for (float x : f.value()) sum += std::fabs((double)x);
    }
    // As llama.cpp (in f32): scale = max(mean|W|, 1e-5), iscale = 1 / scale,
    // W' = clamp(round(W * iscale), -1, 1) / iscale; round() is torch's
    // round-half-to-even, as nearbyint in the default rounding mode.
    const float s = std::max((float)(sum / (double)std::max<int64_t>(in_rows * cols, 1)), 1e-5f);
    const float iscale = 1.f / s;
    for (int64_t r0 = 0; r0 < in_rows; r0 += chunk) {
      const int64_t n = std::min(chunk, in_rows - r0);
      auto f = rows_at(r0, n);
      if (!f) return f.status();
      std::vector<float>& v = f.value();
      for (float& x : v) x = round_to(t.dtype, std::clamp(std::nearbyint(x * iscale), -1.f, 1.f) / iscale);
      narrow(v.data(), v.size(), type, dst + (size_t)r0 * (size_t)cols * out_elem);
    }
    drop_pages(t.data, t.n_bytes());
    return Status::ok();
  });
}

// Stacks the experts' [R, C] tensors into one [E, R, C] tensor, produced
// while the file is written, one expert (and ~4 MiB of rows) at a time.
Status add_stacked(GgufWriter& w, const std::vector<const st::TensorInfo*>& parts, const std::string& gname,
                   const TensorRule& r, GgmlType out_type, const ConvertOptions& opts) {
  const st::TensorInfo& t0 = *parts[0];
  if (t0.shape.size() != 2 || r.transform != Transform::kNone || r.reshape != Reshape::kKeep)
    return invalid_argument("tensor '" + t0.name + "' " + t0.shape_string() + " cannot be stacked (2-D only)");
  for (const st::TensorInfo* p : parts)
    if (p->shape != t0.shape || p->dtype != t0.dtype)
      return invalid_argument("expert tensor '" + p->name + "' " + p->shape_string() + " differs from '" + t0.name +
                              "' " + t0.shape_string());
  const int64_t rows = t0.shape[0], cols = t0.shape[1], n_exp = (int64_t)parts.size();
  const bool f32_name = !gname.ends_with(".weight") || gname.ends_with("_norm.weight");
  const GgmlType type = (r.keep_f32 || f32_name) ? GgmlType::F32 : out_type;
  const bool same = (type == GgmlType::F32 && t0.dtype == st::Dtype::F32) ||
                    (type == GgmlType::F16 && t0.dtype == st::Dtype::F16) ||
                    (type == GgmlType::BF16 && t0.dtype == st::Dtype::BF16);
  const size_t out_elem = type == GgmlType::F32 ? 4 : 2;
  const size_t per_expert = (size_t)rows * (size_t)cols * out_elem;
  const size_t in_row = t0.n_bytes() / (size_t)std::max<int64_t>(rows, 1);
  const int64_t chunk = std::max<int64_t>(1, ((int64_t)4 << 20) / (std::max<int64_t>(cols, 1) * 4));
  std::vector<int64_t> ne = {cols, rows, n_exp};
  return w.add_tensor_lazy(gname, type, ne, per_expert * (size_t)n_exp,
                           [parts, gname, ne, type, same, rows, cols, per_expert, in_row, out_elem, chunk,
                            &opts](uint8_t* dst) -> Status {
                             if (opts.progress) opts.progress(gname, ne, type);
                             for (size_t e = 0; e < parts.size(); ++e) {
                               const st::TensorInfo& t = *parts[e];
                               uint8_t* d = dst + e * per_expert;
                               if (same) {
                                 std::memcpy(d, t.data, t.n_bytes());
                                 drop_pages(t.data, t.n_bytes());
                                 continue;
                               }
                               for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
                                 const int64_t n = std::min(chunk, rows - r0);
                                 st::TensorInfo part = t;
                                 part.shape = {n, cols};
                                 part.data = t.data + (size_t)r0 * in_row;
                                 part.begin = 0;
                                 part.end = (uint64_t)((size_t)n * in_row);
                                 auto f = st::to_f32(part);
                                 if (!f) return f.status();
                                 narrow(f->data(), f->size(), type, d + (size_t)r0 * (size_t)cols * out_elem);
                               }
                               drop_pages(t.data, t.n_bytes());
                             }
                             return Status::ok();
                           });
}

Status convert_impl(const std::string& hf_dir, const std::string& out, const ConvertOptions& opts) {
  if (!fs::is_directory(hf_dir)) return invalid_argument("'" + hf_dir + "' is not a folder");
  const std::string cpath = (fs::path(hf_dir) / "config.json").string();
  CHIMERA_ASSIGN_OR_RETURN(json config, read_json(cpath));
  if (!config.is_object()) return invalid_argument("'" + cpath + "' is not a JSON object");
  auto mt = config.find("model_type");
  if (mt == config.end() || !mt->is_string()) return invalid_argument("'" + cpath + "' has no string 'model_type'");
  const std::string model_type = mt->get<std::string>();
  const FamilySpec* fam = nullptr;
  std::string known;
  for (const FamilySpec& f : families())
    for (const char* m : f.model_types) {
      known += std::string(known.empty() ? "" : ", ") + m;
      if (model_type == m) fam = &f;
    }
  if (!fam) return unsupported("model_type '" + model_type + "' is not supported (supported: " + known + ")");

  auto ck_r = st::Checkpoint::open(hf_dir);
  if (!ck_r) return ck_r.status();
  const st::Checkpoint& ck = *ck_r.value();
  CHIMERA_ASSIGN_OR_RETURN(GgmlType out_type, resolve_type(opts.out_type, ck));

  GgufWriter w;
  w.set("general.architecture", GgufValue::from_string(fam->arch));
  std::string name = opts.name;
  if (name.empty()) name = fs::path(hf_dir).filename().string();
  if (name.empty()) name = fs::path(hf_dir).parent_path().filename().string();  // "dir/"
  w.set("general.name", GgufValue::from_string(name));
  w.set("general.file_type", GgufValue::from_u32(out_type == GgmlType::F32 ? 0 : out_type == GgmlType::F16 ? 1 : 32));
  LayerPlan plan;
  Status hs = fam->hparams(config, w, &plan);
  const std::vector<int>& kinds = plan.kinds;
  if (!hs) return hs.with_context("'" + cpath + "'");
  if (plan.vocab_size > 0) {
    json padded = config;
    padded["vocab_size"] = plan.vocab_size;
    CHIMERA_RETURN_IF_ERROR(write_tokenizer(hf_dir, padded, w));
  } else {
    CHIMERA_RETURN_IF_ERROR(write_tokenizer(hf_dir, config, w));
  }
  if (fam->after_tokenizer) {
    Status as = fam->after_tokenizer(config, w);
    if (!as) return as.with_context("'" + cpath + "'");
  }
  for (const std::string& n : plan.required)
    if (!ck.find(n)) return not_found("checkpoint has no tensor '" + n + "' (required by this config.json)");

  // Expand the rule table into the exact names this layer plan expects.
  std::map<std::string, Claim> expected;
  for (const TensorRule& r : fam->rules) {
    if (std::string(r.hf).find("{i}") == std::string::npos) {
      expected[r.hf] = {&r, -1};
      continue;
    }
    for (size_t i = 0; i < kinds.size(); ++i)
      if (r.kinds & (1u << kinds[i])) {
        if (stacked(r)) {
          if (plan.n_expert <= 0) return internal_error("an expert rule without experts");
          for (int64_t e = 0; e < plan.n_expert; ++e) expected[subst(r.hf, (int64_t)i, e)] = {&r, (int64_t)i};
          continue;
        }
        const std::string n = subst(r.hf, (int64_t)i);
        const auto is_split = [](const TensorRule* x) {
          return x->transform == Transform::kSplitFirstHalf || x->transform == Transform::kSplitSecondHalf;
        };
        if (expected.count(n) && !(is_split(&r) && is_split(expected[n].rule)))
          return internal_error("two rules claim '" + n + "'");
        if (expected.count(n)) continue;
        expected[n] = {&r, (int64_t)i};
      }
  }
  for (const st::TensorInfo* t : ck.tensors())
    if (!expected.count(t->name))
      return unsupported("checkpoint tensor '" + t->name + "' " + t->shape_string() + " has no rule for arch " +
                         fam->arch + " (layer plan mismatch or unknown layout)");
  // Write in rule order, layer by layer: globals first, then blk.0, blk.1, ...
  for (int64_t layer = -1; layer < (int64_t)kinds.size(); ++layer) {
    if (layer == 0)
      for (const auto& [name, v] : plan.extra_f32)
        CHIMERA_RETURN_IF_ERROR(w.add_tensor_copy(name, GgmlType::F32, {(int64_t)v.size()},
                                                  std::vector<uint8_t>((const uint8_t*)v.data(),
                                                                       (const uint8_t*)(v.data() + v.size()))));
    for (const TensorRule& r : fam->rules) {
      const bool per_layer = std::string(r.hf).find("{i}") != std::string::npos;
      if (per_layer != (layer >= 0)) continue;
      if (per_layer && !(r.kinds & (1u << kinds[(size_t)layer]))) continue;
      if (stacked(r)) {
        std::vector<const st::TensorInfo*> parts;
        for (int64_t e = 0; e < plan.n_expert; ++e) {
          const std::string en = subst(r.hf, layer, e);
          const st::TensorInfo* t = ck.find(en);
          if (!t) return not_found("checkpoint has no tensor '" + en + "' (required by arch " + fam->arch + ")");
          parts.push_back(t);
        }
        Status s = add_stacked(w, parts, subst(r.gguf, layer), r, out_type, opts);
        if (!s) return s.with_context("tensor '" + parts[0]->name + "'");
        continue;
      }
      const std::string hn = subst(r.hf, layer);
      const st::TensorInfo* t = ck.find(hn);
      if (!t) {
        if (r.optional) continue;
        return not_found("checkpoint has no tensor '" + hn + "' (required by arch " + fam->arch + ")");
      }
      if (!r.gguf) continue;  // claimed, not converted
      if (r.drop_if_equal_to) {
        const st::TensorInfo* o = ck.find(r.drop_if_equal_to);
        if (o && o->dtype == t->dtype && o->shape == t->shape && std::memcmp(o->data, t->data, t->n_bytes()) == 0)
          continue;
      }
      Status s = Status::ok();
      if (r.transform == Transform::kBitnetTernary) {
        const std::string sn = r.scale ? subst(r.scale, layer) : std::string();
        s = add_bitnet(w, *t, r.scale ? ck.find(sn) : nullptr, sn, subst(r.gguf, layer), out_type, plan, opts);
      } else {
        s = add_tensor(w, *t, subst(r.gguf, layer), r, out_type, plan, opts);
      }
      if (!s) return s.with_context("tensor '" + hn + "'");
    }
  }
  return w.write(out, opts.check);
}

}  // namespace

Status convert(const std::string& hf_dir, const std::string& out, const ConvertOptions& opts) {
  Status s = convert_impl(hf_dir, out, opts);
  if (!s) {
    std::error_code ec;
    fs::remove(out, ec);
  }
  return s;
}

}  // namespace chimera::format::hf
