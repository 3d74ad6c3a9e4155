// The repack cache file (layout below) and its validity checks. One file per
// model and ISA (repack_cache_path); the header still records the ISA.
//
// File: a 128-byte header, n_entries 96-byte entries, then each entry's data
// at a 4096-aligned offset. All integers little-endian.
//   header: magic[16] "CHIMERA-RPCACHE2", u64 model_size, u64 model_hash,
//           u64 exe_size, u64 exe_mtime_ns, char isa[16], u64 n_entries, pad
//   entry:  u64 src_offset, u64 bytes, u64 data_offset, u64 row_bytes,
//           char kernel[64] (NUL-terminated)
#include "kernels/repack_cache.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/memory.h"  // advise_pages
#include "core/timer.h"

namespace chimera::kernels {
namespace {

// The last character is the version of the packed layouts: bumped when one
// changes (2: session 15's x16 Q6_K level chunks), so that a cache of another
// layout is a miss even where the executable's size and mtime would match.
constexpr char kMagic[16] = {'C', 'H', 'I', 'M', 'E', 'R', 'A', '-', 'R', 'P', 'C', 'A', 'C', 'H', 'E', '2'};
constexpr size_t kHeaderBytes = 128, kEntryBytes = 96, kKernelName = 64, kIsaName = 16, kAlign = 4096;

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> on{false};
  return on;
}

thread_local std::shared_ptr<RepackCache> t_current;

uint64_t rd64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
void wr64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

// One chunk: four independent multiply-xor lanes over 32-byte strides, the
// tail byte by byte, the length folded in.
uint64_t hash_chunk(const uint8_t* p, size_t n) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h[4] = {0x243F6A8885A308D3ull, 0x13198A2E03707344ull, 0xA4093822299F31D0ull, 0x082EFA98EC4E6C89ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) {
      h[l] = (h[l] ^ rd64(p + i + 8 * l)) * kMul;
      h[l] ^= h[l] >> 31;
    }
  }
  uint64_t t = n;
  for (; i < n; ++i) t = (t ^ p[i]) * kMul;
  return mix(mix(h[0]) ^ mix(h[1] + 1) ^ mix(h[2] + 2) ^ mix(h[3] + 3) ^ mix(t));
}

bool exe_key(uint64_t* size, uint64_t* mtime_ns) {
  struct stat st {};
  if (stat("/proc/self/exe", &st) != 0) return false;
  *size = (uint64_t)st.st_size;
  *mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
  return true;
}

std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
  return b;
}

}  // namespace

std::string repack_cache_path(const std::string& path, const std::string& isa_name) {
  return path + "." + isa_name + ".chimera-cache";
}

std::string RepackCache::cache_path() const { return repack_cache_path(path_, isa_); }

void set_repack_cache_enabled(bool on) { enabled_flag().store(on); }
bool repack_cache_enabled() { return enabled_flag().load(); }

uint64_t repack_cache_hash(const uint8_t* p, size_t n) {
  // Fixed 64 MiB chunks (the value does not depend on the thread count),
  // hashed in parallel, combined in order.
  constexpr size_t kChunk = 64u << 20;
  const size_t chunks = n / kChunk + 1;
  std::vector<uint64_t> hs(chunks);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t c; (c = next.fetch_add(1)) < chunks;) {
      const size_t off = c * kChunk;
      hs[c] = hash_chunk(p + off, std::min(kChunk, n - off));
    }
  };
  const size_t threads = std::min<size_t>(chunks, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  uint64_t h = mix(n);
  for (uint64_t x : hs) h = mix(h ^ x) * 0x9E3779B97F4A7C15ull;
  return h;
}

std::shared_ptr<RepackCache> RepackCache::open(const std::string& path, const uint8_t* base, size_t size,
                                               const char* isa_name) {
  auto c = std::shared_ptr<RepackCache>(new RepackCache());
  c->path_ = path;
  c->isa_ = isa_name;
  c->base_ = base;
  c->size_ = size;
  if (!exe_key(&c->exe_size_, &c->exe_mtime_ns_)) return nullptr;  // no key: no cache
  c->hash_ = repack_cache_hash(base, size);
  // Hashing touched every page of the read-only file mapping: drop them from
  // the resident set again (the page cache keeps them; tensors read later fault
  // back in what they use), so the model is not resident twice.
  advise_pages(base, size, /*outward=*/false, MADV_DONTNEED);
  if (c->read_existing()) {
    c->hit_ = true;
  } else {
    c->entries_.clear();
    c->map_.reset();
  }
  return c;
}

bool RepackCache::read_existing() {
  auto m = MappedFile::open(cache_path());
  if (!m.is_ok()) return false;
  map_ = std::move(m).value();
  const uint8_t* p = map_->data();
  const size_t n = map_->size();
  if (n < kHeaderBytes || std::memcmp(p, kMagic, 16) != 0) return false;
  char isa[kIsaName + 1] = {};
  std::memcpy(isa, p + 48, kIsaName);
  if (rd64(p + 16) != size_ || rd64(p + 24) != hash_ || rd64(p + 32) != exe_size_ || rd64(p + 40) != exe_mtime_ns_ ||
      isa_ != isa)
    return false;
  const uint64_t count = rd64(p + 64);
  if (count > (n - kHeaderBytes) / kEntryBytes) return false;
  for (uint64_t i = 0; i < count; ++i) {
    const uint8_t* e = p + kHeaderBytes + i * kEntryBytes;
    Entry en;
    en.src_offset = rd64(e);
    en.bytes = rd64(e + 8);
    en.data_offset = rd64(e + 16);
    en.row_bytes = rd64(e + 24);
    const char* k = (const char*)e + 32;
    if (std::memchr(k, 0, kKernelName) == nullptr) return false;
    en.kernel = k;
    if (en.data_offset % kAlign != 0 || en.data_offset > n || en.bytes > n - en.data_offset || en.src_offset >= size_)
      return false;
    en.data = p + en.data_offset;
    entries_.push_back(std::move(en));
  }
  return true;
}

const uint8_t* RepackCache::find(const void* src, const char* kernel, size_t bytes) const {
  if (!hit_) return nullptr;
  const auto* s = static_cast<const uint8_t*>(src);
  if (s < base_ || s >= base_ + size_) return nullptr;
  const uint64_t off = (uint64_t)(s - base_);
  for (const Entry& e : entries_)
    if (e.src_offset == off && e.bytes == bytes && e.kernel == kernel) return e.data;
  return nullptr;
}

void RepackCache::add(const void* src, const char* kernel, size_t row_bytes, const uint8_t* data, size_t bytes) {
  const auto* s = static_cast<const uint8_t*>(src);
  if (hit_ || s < base_ || s >= base_ + size_ || std::strlen(kernel) >= kKernelName) return;
  Entry e;
  e.src_offset = (uint64_t)(s - base_);
  e.bytes = bytes;
  e.row_bytes = row_bytes;
  e.kernel = kernel;
  e.data = data;
  entries_.push_back(std::move(e));
}

void RepackCache::finish() {
  if (hit_) {
    uint64_t total = 0;
    for (const Entry& e : entries_) total += e.bytes;
    status_ = "hit, " + mib(total) + " mapped from " + cache_path();
    return;
  }
  if (entries_.empty()) {
    status_ = "nothing to cache";
    return;
  }
  Stopwatch sw;
  uint64_t off = kHeaderBytes + entries_.size() * kEntryBytes;
  for (Entry& e : entries_) {
    off = (off + kAlign - 1) / kAlign * kAlign;
    e.data_offset = off;
    off += e.bytes;
  }
  std::vector<uint8_t> head(kHeaderBytes + entries_.size() * kEntryBytes, 0);
  std::memcpy(head.data(), kMagic, 16);
  wr64(head.data() + 16, size_);
  wr64(head.data() + 24, hash_);
  wr64(head.data() + 32, exe_size_);
  wr64(head.data() + 40, exe_mtime_ns_);
  std::memcpy(head.data() + 48, isa_.data(), std::min(isa_.size(), kIsaName - 1));
  wr64(head.data() + 64, entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    uint8_t* e = head.data() + kHeaderBytes + i * kEntryBytes;
    wr64(e, entries_[i].src_offset);
    wr64(e + 8, entries_[i].bytes);
    wr64(e + 16, entries_[i].data_offset);
    wr64(e + 24, entries_[i].row_bytes);
    std::memcpy(e + 32, entries_[i].kernel.c_str(), entries_[i].kernel.size() + 1);
  }
  const std::string tmp = cache_path() + ".tmp." + std::to_string((long)getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    status_ = "not written (" + cache_path() + ": " + std::strerror(errno) + ")";
    return;
  }
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  uint64_t pos = head.size();
  static const uint8_t zeros[kAlign] = {};
  for (const Entry& e : entries_) {
    if (!ok) break;
    ok = std::fwrite(zeros, 1, e.data_offset - pos, f) == e.data_offset - pos &&
         std::fwrite(e.data, 1, e.bytes, f) == e.bytes;
    pos = e.data_offset + e.bytes;
  }
  const int err = ok ? 0 : errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), cache_path().c_str()) != 0) {
    const int e = err ? err : errno;
    std::remove(tmp.c_str());
    status_ = "not written (" + cache_path() + ": " + std::strerror(e) + ")";
    return;
  }
  char t[32];
  std::snprintf(t, sizeof t, "%.2f s", sw.elapsed());
  status_ = "written, " + mib(pos) + " to " + cache_path() + " in " + t + " (the next load maps it)";
  // The untagged cache of an earlier chimera (all ISAs in one file): never
  // read by this binary, so it would only take disk space.
  const std::string legacy = path_ + ".chimera-cache";
  if (unlink(legacy.c_str()) == 0) status_ += "; removed the stale " + legacy;
}

ScopedRepackCache::ScopedRepackCache(std::shared_ptr<RepackCache> cache) : prev_(std::move(t_current)) {
  t_current = std::move(cache);
}
ScopedRepackCache::~ScopedRepackCache() { t_current = std::move(prev_); }
const std::shared_ptr<RepackCache>& ScopedRepackCache::current() { return t_current; }

}  // namespace chimera::kernels
