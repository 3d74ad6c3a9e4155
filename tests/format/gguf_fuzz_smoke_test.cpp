// Robustness sweeps over valid seed files: every truncation, and a
// deterministic "fuzz smoke" of 20k seeded random mutations (bit flips, byte
// sets, truncations, deletions, insertions and overwrites of interesting
// integers). Each input must parse to ok or an error — never a crash — and
// every accepted file must satisfy the reader's invariants (tensor data inside
// the file, aligned, non-overlapping). The real fuzzer is fuzz/gguf_fuzzer.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "format/gguf/gguf.h"
#include "format/gguf_test_files.h"

namespace chimera::format {
namespace {

Result<std::unique_ptr<GgufFile>> parse(const std::vector<uint8_t>& b) {
  return GgufFile::parse(MappedFile::from_bytes(b.data(), b.size()));
}

// Invariants of an accepted file; returns "" or what is violated.
std::string check_invariants(const GgufFile& f, size_t file_size) {
  if (f.data_offset() % f.alignment() != 0) return "data offset not aligned";
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& t : f.tensors()) {
    if (t.ne.empty() || t.ne.size() > kGgufMaxDims) return "bad n_dims";
    if (t.n_bytes == 0) return "empty tensor";
    if (t.offset % f.alignment() != 0) return "misaligned tensor";
    const uint64_t begin = f.data_offset() + t.offset;
    if (begin > file_size || t.n_bytes > file_size - begin) return "tensor '" + t.name + "' out of bounds";
    if (f.find_tensor(t.name) != &t) return "tensor index broken";
    ranges.emplace_back(t.offset, t.offset + t.n_bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t k = 1; k < ranges.size(); ++k)
    if (ranges[k].first < ranges[k - 1].second) return "overlapping tensors";
  for (const auto& [k, v] : f.metadata())
    if (f.find(k) != &v) return "metadata index broken";
  return "";
}

// Result of the largest valid prefix length: every shorter prefix must fail.
TEST(GgufTruncationTest, EveryPrefixOfSeedFilesFails) {
  for (const auto& [name, bytes] : test::seed_files()) {
    auto full = parse(bytes);
    ASSERT_TRUE(full.is_ok()) << name << ": " << full.status().message();
    // The smallest valid prefix: the end of the last tensor's data, or (no
    // tensors) the end of the header; trailing padding is optional.
    size_t first_ok = bytes.size() + 1;
    for (size_t len = 0; len <= bytes.size(); ++len) {
      std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + (ptrdiff_t)len);
      auto r = parse(prefix);
      if (r.is_ok()) {
        if (first_ok > len) first_ok = len;
        EXPECT_EQ(check_invariants(*r.value(), len), "") << name << " len " << len;
      } else {
        EXPECT_FALSE(r.status().message().empty());
        EXPECT_GT(first_ok, len) << name << ": prefix " << len << " fails after a shorter prefix passed: "
                                 << r.status().message();
      }
    }
    const GgufFile& f = *full.value();
    if (!f.tensors().empty()) {
      uint64_t end = 0;
      for (const auto& t : f.tensors()) end = std::max(end, f.data_offset() + t.offset + t.n_bytes);
      EXPECT_EQ(first_ok, end) << name;
    } else {
      EXPECT_LE(first_ok, f.data_offset()) << name;
      EXPECT_GT(first_ok + f.alignment(), f.data_offset()) << name;
    }
  }
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::vector<uint8_t> mutate(std::vector<uint8_t> b) {
    const int n_ops = 1 + (int)(rng_() % 4);
    for (int k = 0; k < n_ops; ++k) apply(b);
    return b;
  }

 private:
  size_t pos(size_t n) { return n ? (size_t)(rng_() % n) : 0; }
  uint64_t interesting() {
    static const uint64_t kValues[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 31, 32, 33, 63, 64, 255, 256,
                                       4095, 4096, 65535, 65536, 0x7fffffffull, 0x80000000ull, 0xffffffffull,
                                       1ull << 32, (1ull << 32) + 1, 1ull << 40, 1ull << 62, 1ull << 63,
                                       0x7fffffffffffffffull, ~0ull, ~0ull - 1, kGgufMaxValues,
                                       kGgufMaxValues + 1, kGgufMaxTensors + 1};
    return kValues[rng_() % (sizeof kValues / sizeof kValues[0])];
  }
  void apply(std::vector<uint8_t>& b) {
    switch (rng_() % 8) {
      case 0:  // bit flip
        if (!b.empty()) b[pos(b.size())] ^= (uint8_t)(1u << (rng_() % 8));
        break;
      case 1:  // byte set
        if (!b.empty()) b[pos(b.size())] = (uint8_t)(rng_() % 3 == 0 ? interesting() : rng_());
        break;
      case 2:  // truncation
        b.resize(pos(b.size() + 1));
        break;
      case 3:  // overwrite 8 bytes (often a count or offset) with an interesting u64
      case 4: {
        uint64_t v = interesting();
        if (b.size() >= 8) std::memcpy(b.data() + pos(b.size() - 7), &v, 8);
        break;
      }
      case 5: {  // overwrite 4 bytes (a type id, n_dims or version) with a small value
        uint32_t v = (uint32_t)(rng_() % 3 == 0 ? interesting() : rng_() % 48);
        if (b.size() >= 4) std::memcpy(b.data() + pos(b.size() - 3), &v, 4);
        break;
      }
      case 6: {  // insertion of an interesting u64
        uint64_t v = interesting();
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        b.insert(b.begin() + (ptrdiff_t)pos(b.size() + 1), p, p + 8);
        break;
      }
      case 7: {  // delete a short range
        if (b.empty()) break;
        const size_t at = pos(b.size());
        const size_t n = std::min<size_t>(1 + rng_() % 16, b.size() - at);
        b.erase(b.begin() + (ptrdiff_t)at, b.begin() + (ptrdiff_t)(at + n));
        break;
      }
    }
  }
  std::mt19937_64 rng_;
};

TEST(GgufFuzzSmokeTest, TwentyThousandMutations) {
  const auto seeds = test::seed_files();
  Mutator m(0xC0FFEEull);
  const auto start = std::chrono::steady_clock::now();
  int n_ok = 0, n_err = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const auto& seed = seeds[(size_t)iter % seeds.size()].second;
    const auto input = m.mutate(seed);
    auto r = parse(input);
    if (r.is_ok()) {
      ++n_ok;
      const std::string bad = check_invariants(*r.value(), input.size());
      ASSERT_EQ(bad, "") << "iteration " << iter;
      for (const auto& [k, v] : r.value()->metadata()) (void)v.to_display();
    } else {
      ++n_err;
      ASSERT_FALSE(r.status().message().empty()) << "iteration " << iter;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("fuzz smoke: %d accepted, %d rejected, %.2f s\n", n_ok, n_err, secs);
  // Both outcomes must occur, or the mutations are not exercising the reader.
  EXPECT_GT(n_ok, 100);
  EXPECT_GT(n_err, 1000);
}

}  // namespace
}  // namespace chimera::format
