// The Model base (KV type checks, the default-context convenience), segment
// packing and the GGUF -> model loader.
#include "models/model.h"

#include "models/context.h"

#include "format/gguf/tensor_names.h"
#include "kernels/dispatch.h"
#include "kernels/repack_cache.h"

#include <algorithm>
#include <atomic>

namespace chimera::models {

namespace {
std::atomic<int64_t> g_unfused_steps{0};
}  // namespace

int64_t unfused_batch_steps() { return g_unfused_steps.load(std::memory_order_relaxed); }

Model::Model() = default;
Model::~Model() = default;

Context Model::new_context() const { return Context(*this); }

bool Model::accepts_kv_types(layers::KvCacheTypes t) const {
  if (t == layers::KvCacheTypes{}) return true;
  const bool q8 = t.k == kernels::KvType::kQ8_0 || t.v == kernels::KvType::kQ8_0;
  for (const auto& s : state_specs()) {
    const auto* kv = std::get_if<layers::KvSpec>(&s);
    if (!kv) continue;
    if (!reads_typed_kv()) return false;
    // Q8_0: a head must not split a 32-element block.
    if (q8 && (kv->head_dim_k <= 0 || kv->head_dim_k % 32 || kv->head_dim_v <= 0 || kv->head_dim_v % 32)) return false;
  }
  return true;
}

layers::KvCacheTypes Model::default_kv_types() const {
  return accepts_kv_types(layers::kDefaultKvCacheTypes) ? layers::kDefaultKvCacheTypes : layers::KvCacheTypes{};
}

Status Model::check_kv_types(layers::KvCacheTypes t) const {
  if (accepts_kv_types(t)) return Status::ok();
  return unsupported(info_.arch + ": KV cache type k=" + kernels::kv_type_name(t.k) + " v=" +
                     kernels::kv_type_name(t.v) + " is not supported for this model (" +
                     (reads_typed_kv() ? "Q8_0 needs head sizes that are multiples of 32" : "f32 only") + ")");
}

void Model::forward_batch_impl(ModelScratch& scratch, std::span<BatchItem> items, ThreadPool* pool) const {
  if (items.size() > 1) g_unfused_steps.fetch_add(1, std::memory_order_relaxed);
  for (BatchItem& it : items) forward_impl(scratch, *it.state, it.tokens, it.n, it.which, it.logits, pool);
}

std::vector<std::vector<Segment>> pack_segments(std::span<BatchItem> items, int64_t max_rows) {
  std::vector<std::vector<Segment>> out;
  std::vector<int64_t> next(items.size(), 0);
  for (bool pending = true; pending;) {
    pending = false;
    std::vector<Segment> mb;
    int64_t rows = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (next[i] >= items[i].n) continue;
      const int64_t T = std::min(max_rows, items[i].n - next[i]);
      if (rows + T > max_rows) {
        pending = true;
        continue;
      }
      mb.push_back({&items[i], next[i], T, rows});
      rows += T;
      next[i] += T;
      pending = pending || next[i] < items[i].n;
    }
    if (!mb.empty()) out.push_back(std::move(mb));
  }
  return out;
}

void MicroBatchedModel::forward_impl(ModelScratch& scratch, layers::SequenceState& st, const int32_t* tokens,
                                     int64_t n, Logits which, float* logits, ThreadPool* pool) const {
  BatchItem item{&st, tokens, n, which, logits};
  forward_batch_impl(scratch, {&item, 1}, pool);
}

void MicroBatchedModel::forward_batch_impl(ModelScratch& scratch, std::span<BatchItem> items,
                                           ThreadPool* pool) const {
  for (const auto& mb : pack_segments(items, kMaxUbatch)) {
    int64_t rows = 0;
    for (const Segment& s : mb) rows += s.T;
    ubatch_segments(scratch, mb, rows, pool);
  }
}

namespace {

// The registry entry of g's architecture; `what` names the file in errors.
Result<const RegistryEntry*> registry_entry(const format::GgufFile& g, const std::string& what) {
  const std::string arch = g.architecture();
  if (arch.empty()) return invalid_argument(what + " has no general.architecture");
  for (const auto& e : model_registry())
    if (arch == e.arch) return &e;
  std::string names;
  for (const auto& e : model_registry()) names += std::string(names.empty() ? "" : ", ") + e.arch;
  return unsupported("unsupported architecture '" + arch + "' (supported: " + names + ")");
}

}  // namespace

Status check_model_header(const format::GgufFile& header) {
  if (!header.header_only()) return internal_error("check_model_header needs a header-only file");
  CHIMERA_ASSIGN_OR_RETURN(const RegistryEntry* entry, registry_entry(header, "the output"));
  if (header.tensors().empty()) return invalid_argument("the output holds no tensors");
  CHIMERA_RETURN_IF_ERROR(tokenizer::Tokenizer::from_gguf(header).status());
  CHIMERA_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, entry->load(header));
  if (m) return internal_error("arch '" + header.architecture() + "' bound weights of a header-only file");
  return Status::ok();
}

Result<std::unique_ptr<Model>> load_model(const std::string& path) {
  CHIMERA_ASSIGN_OR_RETURN(auto gguf, format::GgufFile::open(path));
  const std::string arch = gguf->architecture();
  CHIMERA_ASSIGN_OR_RETURN(const RegistryEntry* entry, registry_entry(*gguf, "'" + path + "'"));
  if (gguf->tensors().empty()) return invalid_argument("'" + path + "' holds no tensors (vocabulary-only file?)");
  CHIMERA_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::from_gguf(*gguf));
  // The repack cache (when enabled) is consulted and filled by every
  // PackedWeights::pack of this load.
  std::shared_ptr<kernels::RepackCache> cache;
  if (kernels::repack_cache_enabled() && kernels::repack_enabled()) {
    const format::GgufTensorInfo& t0 = gguf->tensors()[0];
    const uint8_t* base = t0.data - gguf->data_offset() - t0.offset;
    // Levels that share packed layouts share the file (amx: the avx512vnni one).
    cache = kernels::RepackCache::open(path, base, gguf->file_size(),
                                       kernels::isa_name(kernels::layout_isa(kernels::active_isa())));
  }
  Result<std::unique_ptr<Model>> r = unsupported("not loaded");
  {
    kernels::ScopedRepackCache scope(cache);
    r = entry->load(*gguf);
  }
  if (!r.is_ok()) return r.status().with_context("loading '" + path + "' (" + arch + ")");
  std::unique_ptr<Model> m = std::move(r).value();
  if (cache) {
    cache->finish();
    m->repack_cache_status_ = cache->status();
  }
  m->info_.arch = arch;
  m->info_.name = gguf->get_string("general.name").value_or(arch);
  if (tok->n_vocab() < m->info_.n_vocab && tok->n_vocab() > 0) {
    // Models may pad the output to more rows than tokens; the reverse is fine too.
  }
  // Bytes a decode step reads (see ModelInfo::decode_bytes_per_token).
  {
    const auto n_exp = gguf->get_int(arch + ".expert_count").value_or(0);
    const auto n_used = gguf->get_int(arch + ".expert_used_count").value_or(0);
    const bool untied = gguf->find_tensor(format::tn::kOutput) != nullptr;
    double bytes = 0;
    for (const auto& t : gguf->tensors()) {
      double b = (double)t.n_bytes;
      if (t.name == format::tn::kTokenEmbd && untied) b = t.dim(1) > 0 ? b / (double)t.dim(1) : b;
      if (t.name.find("_exps") != std::string::npos && n_exp > 0 && n_used > 0) b = b * (double)n_used / (double)n_exp;
      bytes += b;
    }
    m->info_.decode_bytes_per_token = (uint64_t)bytes;
    if (m->info_.weight_bytes == 0) m->info_.weight_bytes = gguf->tensor_bytes();
  }
  m->tok_ = std::move(tok);
  m->gguf_ = std::move(gguf);
  return m;
}

}  // namespace chimera::models
