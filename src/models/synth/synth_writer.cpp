// Streaming GGUF output for `synth`. GgufWriter needs every tensor's bytes alive
// until write(); a multi-GB synthetic model would then sit in memory whole. Here
// the header is written first and each tensor is generated, encoded and written
// in chunks of whole rows, so memory stays at a few MB whatever the model size.
// The metadata bytes come from GgufWriter itself (no second serializer): a probe
// writer with the same metadata plus general.alignment = 1 as its last key emits
// the header unpadded; dropping the 24-byte preamble and that last key (33 bytes)
// leaves exactly the serialized metadata. Tensor infos and data follow the layout
// in format/gguf/gguf.h with the default alignment of 32.
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "models/synth/synth.h"

namespace chimera::models::synth {

namespace {

constexpr uint64_t kAlignment = 32;
constexpr uint64_t kChunkElements = uint64_t(1) << 20;

struct File {
  std::FILE* f = nullptr;
  bool ok = true;
  uint64_t pos = 0;
  ~File() {
    if (f) std::fclose(f);
  }
  void put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f) != n) ok = false;
    pos += n;
  }
  template <typename T>
  void pod(T v) { put(&v, sizeof v); }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    put(s.data(), s.size());
  }
  void pad() {
    static const uint8_t zeros[kAlignment] = {0};
    put(zeros, (kAlignment - pos % kAlignment) % kAlignment);
  }
};

uint64_t padded(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

Result<std::vector<uint8_t>> metadata_bytes(const SynthPlan& plan) {
  format::GgufWriter probe;
  for (const auto& [key, value] : plan.metadata) {
    if (key == "general.alignment") return internal_error("synth plans use the default alignment");
    probe.set(key, value);
  }
  probe.set_alignment(1);
  std::vector<uint8_t> all = probe.to_bytes();
  constexpr size_t kPreamble = 4 + 4 + 8 + 8;                       // magic, version, n_tensors, n_kv
  constexpr size_t kAlignKey = 8 + sizeof("general.alignment") - 1 + 4 + 4;  // key, type, u32
  if (all.size() < kPreamble + kAlignKey) return internal_error("unexpected GGUF probe size");
  return std::vector<uint8_t>(all.begin() + kPreamble, all.end() - kAlignKey);
}

Status check_free_space(const std::string& path, uint64_t need) {
  std::filesystem::path dir = std::filesystem::absolute(path).parent_path();
  struct statvfs st;
  if (::statvfs(dir.c_str(), &st) != 0) return Status::ok();  // unknown: let the write report it
  const uint64_t avail = (uint64_t)st.f_bavail * st.f_frsize;
  if (avail < need)
    return io_error("not enough disk space in '" + dir.string() + "': need " + std::to_string(need >> 20) +
                    " MiB, " + std::to_string(avail >> 20) + " MiB free");
  return Status::ok();
}

}  // namespace

Status write_synth_gguf(const SynthPlan& plan, uint64_t seed, const std::string& path,
                        const SynthProgress& progress) {
  CHIMERA_ASSIGN_OR_RETURN(std::vector<uint8_t> meta, metadata_bytes(plan));
  const uint64_t total = plan.total_bytes();
  CHIMERA_RETURN_IF_ERROR(check_free_space(path, total + meta.size() + (1 << 20)));

  const std::string tmp = path + ".partial";
  File out;
  out.f = std::fopen(tmp.c_str(), "wb");
  if (!out.f) return io_error("cannot create '" + tmp + "'");

  out.put("GGUF", 4);
  out.pod<uint32_t>(3);
  out.pod<uint64_t>(plan.tensors.size());
  out.pod<uint64_t>(plan.metadata.size());
  out.put(meta.data(), meta.size());
  uint64_t offset = 0;
  for (const auto& t : plan.tensors) {
    out.str(t.name);
    out.pod<uint32_t>((uint32_t)t.ne.size());
    for (int64_t d : t.ne) out.pod<uint64_t>((uint64_t)d);
    out.pod<uint32_t>((uint32_t)t.type);
    out.pod<uint64_t>(offset);
    offset += padded(t.n_bytes());
  }
  out.pad();

  std::vector<float> values;
  std::vector<uint8_t> bytes;
  uint64_t done = 0;
  Status st;
  for (const auto& t : plan.tensors) {
    const uint64_t row = (uint64_t)t.ne[0];
    const uint64_t n = t.n_elements();
    const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkElements / row);
    for (uint64_t begin = 0; begin < n; begin += rows_per_chunk * row) {
      const uint64_t count = std::min(n - begin, rows_per_chunk * row);
      values.resize(count);
      bytes.resize(format::ggml_row_size(t.type, (int64_t)row) * (count / row));
      synth_values(t, seed, begin, count, values.data());
      st = encode_values(t.type, values.data(), (int64_t)count, bytes.data()).with_context("tensor '" + t.name + "'");
      if (!st) break;
      out.put(bytes.data(), bytes.size());
      if (!out.ok) break;
      done += bytes.size();
      if (progress) progress(done, total, t.name);
    }
    if (!out.ok || !st) break;
    out.pad();
  }
  const bool closed = std::fclose(out.f) == 0;
  out.f = nullptr;
  if (!st || !out.ok || !closed) {
    std::remove(tmp.c_str());
    return st ? io_error("failed writing '" + tmp + "' (disk full?)") : st;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return io_error("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  }
  return Status::ok();
}

}  // namespace chimera::models::synth
