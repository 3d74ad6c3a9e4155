// libFuzzer target for the GGUF reader: parses arbitrary bytes as a GGUF file.
// Invariant under test: GgufFile::parse returns ok or an error Status for every
// input — no crash, sanitizer report, hang or absurd allocation. When parsing
// succeeds, the accessors and the tensor data ranges are exercised too, so a
// bad bounds check shows up as an ASan read overflow.
#include <cstddef>
#include <cstdint>

#include "format/gguf/gguf.h"

using chimera::MappedFile;
using chimera::format::GgufFile;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = GgufFile::parse(MappedFile::from_bytes(data, size));
  if (!r.is_ok()) {
    // Every error must carry a message.
    if (r.status().message().empty()) __builtin_trap();
    return 0;
  }
  const GgufFile& f = *r.value();
  volatile uint64_t sink = 0;
  for (const auto& [key, v] : f.metadata()) {
    if (f.find(key) != &v) __builtin_trap();
    sink = sink + v.to_display(4).size();
  }
  (void)f.architecture();
  (void)f.get_per_layer_int("llama.attention.head_count_kv", 4, 1);
  for (const auto& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) __builtin_trap();
    // Touch the first and last byte of every tensor: must lie inside the input.
    if (t.n_bytes) sink = sink + t.data[0] + t.data[t.n_bytes - 1];
  }
  (void)sink;
  return 0;
}
