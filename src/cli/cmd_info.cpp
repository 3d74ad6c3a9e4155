// `chimera info -m FILE`: describes a GGUF file without loading the model —
// header (version, alignment, data offset), architecture and name, every
// metadata key (long arrays summarised by element type, count and first items;
// long strings such as chat templates truncated), the tensor table, totals by
// type, and a memory estimate (weights + KV cache for a context length in the
// cache types a run would use — the model's default, f16 for most families,
// or --cache-type-k/-v — plus recurrent state for SSM layers). `--json` prints the same as JSON.
// Invariants: the file is untrusted, so every metadata number used in the
// estimate is range-checked and the arithmetic saturates instead of
// overflowing; a value that makes no sense disables the estimate with a note
// instead of failing the command. Errors print "error: ..." and exit 1.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "format/gguf/gguf.h"
#include "kernels/attention.h"
#include "layers/state.h"
#include "models/model.h"

namespace chimera::cli {
namespace {

using format::GgufFile;
using format::GgufType;
using format::GgufValue;
using Json = nlohmann::json;

constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();
constexpr int64_t kDefaultCtx = 4096;
constexpr size_t kMaxItems = 6;          // array items shown (text)
constexpr size_t kMaxJsonItems = 16;     // array items listed (JSON)
constexpr size_t kMaxJsonString = 4096;  // string bytes kept (JSON)
constexpr int64_t kMaxLayers = 1 << 16;  // larger block_count is treated as bogus

struct Options {
  std::string model;
  int64_t ctx = 0;  // 0: default
  bool no_tensors = false;
  bool json = false;
  std::string cache_type_k, cache_type_v;  // empty: the model's default
};

uint64_t sat_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > kSaturated / a) return kSaturated;
  return a * b;
}
uint64_t sat_add(uint64_t a, uint64_t b) { return b > kSaturated - a ? kSaturated : a + b; }

// Names from the file may hold control bytes (terminal escapes): show them as \xNN.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += (char)c;
    }
  }
  return out;
}

std::string human_bytes(uint64_t b) {
  if (b == kSaturated) return "overflow";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = (double)b;
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)b);
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

// ---- memory estimate -------------------------------------------------------

struct LayerCache {
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  bool recurrent = false;
};

struct Estimate {
  bool ok = false;
  std::string note;                 // why the estimate is missing or partial
  int64_t n_layer = 0;
  int64_t ctx_train = 0;            // <arch>.context_length (0 if absent)
  layers::KvCacheTypes kv_types;    // the cache types of the estimate
  uint64_t kv_bytes_per_token = 0;  // K + V rows in kv_types, all layers
  uint64_t recurrent_bytes = 0;     // conv + SSM state per sequence (f32)
  int64_t n_attn_layers = 0;
  int64_t n_recurrent_layers = 0;
};

std::optional<int64_t> positive(const GgufFile& f, const std::string& key) {
  auto v = f.get_int(key);
  if (!v || *v <= 0) return std::nullopt;
  return v;
}

// Per-layer integers, scalar or array; error when out of [0, 2^31).
Result<std::vector<int64_t>> per_layer(const GgufFile& f, const std::string& key, int64_t n_layer,
                                       std::optional<int64_t> fallback) {
  auto r = f.get_per_layer_int(key, (size_t)n_layer, fallback);
  if (!r.is_ok()) return r.status();
  for (int64_t x : r.value())
    if (x < 0 || x > std::numeric_limits<int32_t>::max())
      return invalid_argument("'" + key + "' holds " + std::to_string(x));
  return r;
}

Estimate estimate_memory(const GgufFile& f, const Options& o) {
  Estimate e;
  e.kv_types = kv_types_from_flags(o.cache_type_k, o.cache_type_v, models::default_kv_types_for(f));
  const std::string arch = f.architecture();
  if (arch.empty()) {
    e.note = "no general.architecture";
    return e;
  }
  const std::string p = arch + ".";
  e.ctx_train = positive(f, p + "context_length").value_or(0);
  auto n_layer = positive(f, p + "block_count");
  if (!n_layer || *n_layer > kMaxLayers) {
    e.note = "missing or implausible " + p + "block_count";
    return e;
  }
  e.n_layer = *n_layer;
  auto n_embd = positive(f, p + "embedding_length");
  auto heads = per_layer(f, p + "attention.head_count", e.n_layer, 0);
  if (!heads.is_ok()) {
    e.note = heads.status().message();
    return e;
  }
  int64_t max_head = 0;
  for (int64_t h : heads.value()) max_head = std::max(max_head, h);
  auto heads_kv = per_layer(f, p + "attention.head_count_kv", e.n_layer, max_head);
  if (!heads_kv.is_ok()) {
    e.note = heads_kv.status().message();
    return e;
  }
  const auto key_len = positive(f, p + "attention.key_length");
  const auto val_len = positive(f, p + "attention.value_length");
  // SSM (Mamba-1/2) state sizes; a layer without KV heads is recurrent when they exist.
  const auto d_inner = positive(f, p + "ssm.inner_size");
  const auto d_state = positive(f, p + "ssm.state_size");
  const auto d_conv = positive(f, p + "ssm.conv_kernel");
  const int64_t n_group = positive(f, p + "ssm.group_count").value_or(0);
  const bool has_ssm = d_inner && d_state && d_conv;
  uint64_t recurrent_per_layer = 0;
  if (has_ssm) {
    const uint64_t conv_ch = sat_add((uint64_t)*d_inner, sat_mul(sat_mul(2, (uint64_t)n_group), (uint64_t)*d_state));
    recurrent_per_layer = sat_add(sat_mul(sat_mul((uint64_t)*d_conv - 1, conv_ch), 4),
                                  sat_mul(sat_mul((uint64_t)*d_inner, (uint64_t)*d_state), 4));
  }
  for (int64_t l = 0; l < e.n_layer; ++l) {
    const int64_t h = heads.value()[(size_t)l];
    const int64_t hkv = heads_kv.value()[(size_t)l];
    if (hkv == 0 || h == 0) {
      if (has_ssm) {
        ++e.n_recurrent_layers;
        e.recurrent_bytes = sat_add(e.recurrent_bytes, recurrent_per_layer);
      }
      continue;
    }
    int64_t dk = key_len.value_or(0), dv = val_len.value_or(0);
    if ((!key_len || !val_len) && (!n_embd || *n_embd % h != 0)) {
      e.note = "cannot derive the head size (embedding_length / head_count) for layer " + std::to_string(l);
      return e;
    }
    if (!key_len) dk = *n_embd / h;
    if (!val_len) dv = *n_embd / h;
    if ((e.kv_types.k == kernels::KvType::kQ8_0 && dk % 32) || (e.kv_types.v == kernels::KvType::kQ8_0 && dv % 32)) {
      e.note = "a q8_0 cache needs head sizes that are multiples of 32 (layer " + std::to_string(l) + ": " +
               std::to_string(dk) + ", " + std::to_string(dv) + ")";
      return e;
    }
    ++e.n_attn_layers;
    // Per head, so that kv_row_bytes's Q8_0 blocks never cross heads;
    // dk, dv < 2^31 and hkv < 2^31 keep the products far from saturation.
    const uint64_t row = sat_add(sat_mul((uint64_t)hkv, kernels::kv_row_bytes(e.kv_types.k, dk)),
                                 sat_mul((uint64_t)hkv, kernels::kv_row_bytes(e.kv_types.v, dv)));
    e.kv_bytes_per_token = sat_add(e.kv_bytes_per_token, row);
  }
  if (e.n_attn_layers == 0 && e.n_recurrent_layers == 0) {
    e.note = "no attention head counts or SSM sizes in the metadata";
    return e;
  }
  e.ok = true;
  return e;
}

std::vector<int64_t> contexts(const Estimate& e, int64_t requested) {
  std::vector<int64_t> c;
  if (requested > 0) c.push_back(requested);
  else c.push_back(e.ctx_train > 0 ? std::min(e.ctx_train, kDefaultCtx) : kDefaultCtx);
  if (e.ctx_train > 0 && e.ctx_train != c[0]) c.push_back(e.ctx_train);
  return c;
}

// ---- metadata display ------------------------------------------------------

Json value_json(const GgufValue& v, int depth = 0) {
  switch (v.type) {
    case GgufType::BOOL: return v.u != 0;
    case GgufType::UINT8: case GgufType::UINT16: case GgufType::UINT32: case GgufType::UINT64: return v.u;
    case GgufType::INT8: case GgufType::INT16: case GgufType::INT32: case GgufType::INT64: return v.i;
    case GgufType::FLOAT32: case GgufType::FLOAT64: return v.f;
    case GgufType::STRING:
      if (v.s.size() <= kMaxJsonString) return v.s;
      return Json{{"length", v.s.size()}, {"head", v.s.substr(0, kMaxJsonString)}, {"truncated", true}};
    case GgufType::ARRAY: {
      Json items = Json::array();
      for (size_t k = 0; k < v.arr.size() && k < kMaxJsonItems; ++k) items.push_back(value_json(v.arr[k], depth + 1));
      if (v.arr.size() <= kMaxJsonItems) return items;
      return Json{{"elem_type", format::gguf_type_name(v.elem_type)},
                  {"count", v.arr.size()},
                  {"head", std::move(items)},
                  {"truncated", true}};
    }
  }
  return nullptr;
}

std::string type_label(const GgufValue& v) {
  if (v.type != GgufType::ARRAY) return format::gguf_type_name(v.type);
  return std::string("arr[") + format::gguf_type_name(v.elem_type) + "]";
}

struct TypeTotal {
  uint64_t count = 0;
  uint64_t bytes = 0;
};

std::map<std::string, TypeTotal> totals_by_type(const GgufFile& f) {
  std::map<std::string, TypeTotal> m;
  for (const auto& t : f.tensors()) {
    auto& e = m[format::ggml_type_name(t.type)];
    ++e.count;
    e.bytes += t.n_bytes;
  }
  return m;
}

// ---- output ----------------------------------------------------------------

void print_text(const GgufFile& f, const Options& o) {
  std::printf("file:            %s (%llu bytes)\n", f.path().c_str(), (unsigned long long)f.file_size());
  std::printf("GGUF version:    %u\n", f.version());
  std::printf("alignment:       %llu\n", (unsigned long long)f.alignment());
  std::printf("data offset:     %llu\n", (unsigned long long)f.data_offset());
  const std::string arch = f.architecture();
  std::printf("architecture:    %s\n", arch.empty() ? "(none)" : printable(arch).c_str());
  if (auto name = f.get_string("general.name"))
    std::printf("name:            %s\n", GgufValue::from_string(*name).to_display().c_str());

  std::printf("\nmetadata (%zu keys):\n", f.metadata().size());
  size_t w = 0;
  for (const auto& [k, v] : f.metadata()) w = std::max(w, std::min<size_t>(k.size(), 48));
  for (const auto& [k, v] : f.metadata())
    std::printf("  %-*s %-10s %s\n", (int)w, printable(k).c_str(), type_label(v).c_str(),
                v.to_display(kMaxItems).c_str());

  if (!o.no_tensors) {
    std::printf("\ntensors (%zu):\n", f.tensors().size());
    size_t nw = 4;
    for (const auto& t : f.tensors()) nw = std::max(nw, std::min<size_t>(t.name.size(), 64));
    if (!f.tensors().empty()) std::printf("  %-*s %-8s %-24s %12s\n", (int)nw, "name", "type", "shape", "bytes");
    for (const auto& t : f.tensors())
      std::printf("  %-*s %-8s %-24s %12llu\n", (int)nw, printable(t.name).c_str(), format::ggml_type_name(t.type).c_str(),
                  t.shape_string().c_str(), (unsigned long long)t.n_bytes);
  }

  const uint64_t weights = f.tensor_bytes();
  std::printf("\ntotals:\n  %zu tensors, %llu bytes (%s)\n", f.tensors().size(), (unsigned long long)weights,
              human_bytes(weights).c_str());
  for (const auto& [type, t] : totals_by_type(f))
    std::printf("  %-8s x%-5llu %14llu bytes (%s)\n", type.c_str(), (unsigned long long)t.count,
                (unsigned long long)t.bytes, human_bytes(t.bytes).c_str());

  const Estimate e = estimate_memory(f, o);
  std::printf("\nmemory estimate (one sequence, KV cache k=%s v=%s):\n", kernels::kv_type_name(e.kv_types.k),
              kernels::kv_type_name(e.kv_types.v));
  std::printf("  weights:         %s\n", human_bytes(weights).c_str());
  if (!e.ok) {
    std::printf("  KV cache:        unknown (%s)\n", e.note.c_str());
    return;
  }
  std::printf("  layers:          %lld (%lld attention, %lld recurrent)\n", (long long)e.n_layer,
              (long long)e.n_attn_layers, (long long)e.n_recurrent_layers);
  if (e.n_recurrent_layers) std::printf("  recurrent state: %s\n", human_bytes(e.recurrent_bytes).c_str());
  if (e.n_attn_layers == 0) {
    std::printf("  KV cache:        none (no attention layers)\n");
    std::printf("  total:           %s\n", human_bytes(sat_add(weights, e.recurrent_bytes)).c_str());
    return;
  }
  std::printf("  KV per token:    %s\n", human_bytes(e.kv_bytes_per_token).c_str());
  for (int64_t c : contexts(e, o.ctx)) {
    const uint64_t kv = sat_mul(e.kv_bytes_per_token, (uint64_t)c);
    const uint64_t total = sat_add(sat_add(weights, kv), e.recurrent_bytes);
    std::printf("  n_ctx %-9lld KV cache %s, total %s%s\n", (long long)c, human_bytes(kv).c_str(),
                human_bytes(total).c_str(), c == e.ctx_train ? " (training context)" : "");
  }
}

void print_json(const GgufFile& f, const Options& o) {
  Json j;
  j["file"] = f.path();
  j["file_size"] = f.file_size();
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  j["architecture"] = f.architecture();
  if (auto name = f.get_string("general.name")) j["name"] = *name;
  Json md = Json::array();
  for (const auto& [k, v] : f.metadata()) {
    Json e{{"key", k}, {"type", format::gguf_type_name(v.type)}};
    if (v.type == GgufType::ARRAY) {
      e["elem_type"] = format::gguf_type_name(v.elem_type);
      e["count"] = v.arr.size();
    }
    e["value"] = value_json(v);
    md.push_back(std::move(e));
  }
  j["metadata"] = std::move(md);
  if (!o.no_tensors) {
    Json ts = Json::array();
    for (const auto& t : f.tensors())
      ts.push_back({{"name", t.name}, {"type", format::ggml_type_name(t.type)}, {"shape", t.ne},
                    {"offset", t.offset}, {"bytes", t.n_bytes}});
    j["tensors"] = std::move(ts);
  }
  Json by_type = Json::object();
  for (const auto& [type, t] : totals_by_type(f)) by_type[type] = {{"count", t.count}, {"bytes", t.bytes}};
  const uint64_t weights = f.tensor_bytes();
  j["totals"] = {{"tensors", f.tensors().size()}, {"bytes", weights}, {"by_type", std::move(by_type)}};
  const Estimate e = estimate_memory(f, o);
  Json mem{{"weights_bytes", weights},
           {"kv_cache_type_k", kernels::kv_type_name(e.kv_types.k)},
           {"kv_cache_type_v", kernels::kv_type_name(e.kv_types.v)}};
  if (!e.ok) {
    mem["note"] = e.note;
  } else {
    mem["n_layer"] = e.n_layer;
    mem["attention_layers"] = e.n_attn_layers;
    mem["recurrent_layers"] = e.n_recurrent_layers;
    mem["kv_bytes_per_token"] = e.kv_bytes_per_token;
    mem["recurrent_state_bytes"] = e.recurrent_bytes;
    if (e.ctx_train > 0) mem["context_length"] = e.ctx_train;
    Json per_ctx = Json::array();
    for (int64_t c : contexts(e, o.ctx)) {
      const uint64_t kv = sat_mul(e.kv_bytes_per_token, (uint64_t)c);
      per_ctx.push_back({{"n_ctx", c}, {"kv_cache_bytes", kv},
                         {"total_bytes", sat_add(sat_add(weights, kv), e.recurrent_bytes)}});
    }
    mem["contexts"] = std::move(per_ctx);
  }
  j["memory"] = std::move(mem);
  // Strings from the file may be invalid UTF-8: replace rather than throw.
  std::printf("%s\n", j.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
}

void run_info(const Options& o) {
  if (o.ctx < 0) {
    report_error("context length must be positive (got " + std::to_string(o.ctx) + ")");
    return;
  }
  auto f = GgufFile::open(o.model);
  if (!f.is_ok()) {
    report_error(f.status());
    return;
  }
  if (o.json) print_json(*f.value(), o);
  else print_text(*f.value(), o);
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("info", "Describe a GGUF file: metadata, tensors, memory estimate");
  cmd->add_option("-m,--model", opts->model, "GGUF file")->required();
  add_ctx_option(cmd, &opts->ctx,
                 "context length for the KV-cache estimate (default: min(4096, training context))");
  cmd->add_flag("--no-tensors", opts->no_tensors, "omit the tensor table");
  add_kv_type_options(cmd, &opts->cache_type_k, &opts->cache_type_v);
  cmd->add_flag("--json", opts->json, "print JSON");
  cmd->callback([opts] { run_info(*opts); });
}

}  // namespace chimera::cli
