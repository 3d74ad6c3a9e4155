// The repack cache: the load-time repacked weight layouts (kernels/repack.h)
// of a model kept next to it in MODEL.gguf.ISA.chimera-cache (one file per
// ISA, e.g. m.gguf.avx2.chimera-cache: the layouts are the ISA's, so loads
// that alternate --isa each map their own; a level that reads another's
// layouts uses that one's file — amx the avx512vnni one, dispatch.h
// layout_isa), so a second load maps them
// instead of repacking (load at mmap speed; the packed pages are
// file-backed, so they are never resident twice).
//
// A cache is valid only for the exact model bytes, the ISA and the binary that
// wrote it: its header records the model's size and a 64-bit hash of all its
// bytes (computed at every load, ~0.1 s/GB on warm pages), the active ISA and
// the size + mtime of the running executable (/proc/self/exe), so a rebuilt
// chimera (whose layouts may differ) or a changed model rebuilds it. Each
// entry also names the kernel whose layout it holds and the source tensor's
// offset and packed size; any mismatch is a miss. A cache that is stale,
// truncated or unreadable is replaced; a folder that cannot be written leaves
// the load as it was (repacking each time). Writing a cache removes the
// model's untagged MODEL.gguf.chimera-cache of an earlier chimera (one file
// for every ISA, which this binary never reads).
//
// Off by default for library users (tests, embedding); the CLI turns it on
// (set_repack_cache_enabled) unless --no-repack-cache or CHIMERA_REPACK_CACHE=0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/mmap_file.h"
#include "core/status.h"

namespace chimera::kernels {

void set_repack_cache_enabled(bool on);
bool repack_cache_enabled();

class RepackCache {
 public:
  // For the model file `path` mapped at [base, base + size): reads and
  // validates repack_cache_path(path, isa_name) (a hit) or prepares a new one
  // (a miss).
  static std::shared_ptr<RepackCache> open(const std::string& path, const uint8_t* base, size_t size,
                                           const char* isa_name);

  // The cached packed bytes of the tensor whose storage starts at `src`
  // (inside the model mapping), for `kernel`, `bytes` long; null when absent.
  const uint8_t* find(const void* src, const char* kernel, size_t bytes) const;
  // A freshly packed copy (alive until finish()) to be written on a miss.
  void add(const void* src, const char* kernel, size_t row_bytes, const uint8_t* data, size_t bytes);

  // After the model's weights are bound: on a miss with entries, writes the
  // cache (temp file + rename). Never fails the load; the outcome is in status().
  void finish();
  bool hit() const { return hit_; }
  // "hit: ... MiB mapped", "written: ...", "not written: <reason>", ...
  const std::string& status() const { return status_; }
  std::string cache_path() const;

 private:
  struct Entry {
    uint64_t src_offset = 0, bytes = 0, data_offset = 0, row_bytes = 0;
    std::string kernel;
    const uint8_t* data = nullptr;  // hit: into the cache mapping; miss: the packed buffer
  };
  std::string path_, isa_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint64_t hash_ = 0, exe_size_ = 0, exe_mtime_ns_ = 0;
  bool hit_ = false;
  std::string status_;
  std::vector<Entry> entries_;
  std::shared_ptr<MappedFile> map_;
  bool read_existing();
};

// While alive, PackedWeights::pack on this thread consults and fills `cache`
// (null: none). Nested scopes restore the previous one.
class ScopedRepackCache {
 public:
  explicit ScopedRepackCache(std::shared_ptr<RepackCache> cache);
  ~ScopedRepackCache();
  static const std::shared_ptr<RepackCache>& current();

 private:
  std::shared_ptr<RepackCache> prev_;
};

// The cache file of model `path` for the ISA named isa_name:
// PATH.ISA.chimera-cache.
std::string repack_cache_path(const std::string& path, const std::string& isa_name);

// 64-bit content hash used for the validity check (exposed for tests).
uint64_t repack_cache_hash(const uint8_t* p, size_t n);

}  // namespace chimera::kernels
