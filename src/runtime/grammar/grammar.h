// A context-free grammar over bytes, the form every front end (GBNF text,
// JSON Schema) is lowered to before matching. Code-point character classes
// and string literals have already been turned into UTF-8 byte sequences, so
// the matcher and the token masking only ever step one byte at a time.
//
// Layout: every alternative of every rule is a run of elements in `elems`
// ending with a kEnd element; rule_alts[r] lists the start index of each of
// rule r's alternatives (an empty alternative starts with kEnd). A kBytes
// element matches one byte from byte_sets[arg]; a kRule element expands rule
// arg.
//
// Invariants after validate() succeeds (the matcher relies on them):
//   - every referenced rule exists and has at least one alternative;
//   - no byte set is empty;
//   - no rule is left-recursive, directly or through rules that can match the
//     empty string (expanding a rule always terminates);
//   - every rule can finish (derives at least one finite byte string), so a
//     non-empty set of matcher stacks always has a completion.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace chimera::runtime::grammar {

// A set of bytes as 256 bits.
struct ByteSet {
  std::array<uint64_t, 4> w{};
  bool test(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1u; }
  void set(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set((uint8_t)b);
  }
  bool empty() const { return (w[0] | w[1] | w[2] | w[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum Type : uint8_t { kEnd, kBytes, kRule };
  Type type = kEnd;
  uint32_t arg = 0;  // kBytes: index into byte_sets; kRule: rule id
};

struct Grammar {
  std::vector<Element> elems;
  std::vector<std::vector<uint32_t>> rule_alts;  // rule -> start index of each alternative
  std::vector<std::string> rule_names;           // for error messages
  std::vector<ByteSet> byte_sets;
  uint32_t root = 0;

  // Size limits: a grammar beyond them is refused (a {m,n} with a huge n, a
  // generated schema grammar gone wild) rather than eating memory.
  static constexpr size_t kMaxElements = 4u << 20;
  static constexpr size_t kMaxRules = 1u << 20;

  // Checks the invariants above; the error names the offending rule.
  Status validate() const;
};

// Builds a Grammar incrementally (used by the GBNF lowering).
class GrammarBuilder {
 public:
  // Id of the rule with this name (created without alternatives if new).
  uint32_t rule(const std::string& name);
  // A new rule with a unique name derived from `base`.
  uint32_t fresh_rule(const std::string& base);
  // Index of an equal byte set, added if new.
  uint32_t byte_set(const ByteSet& s);
  // Appends an alternative (elements without the final kEnd) to rule r.
  Status add_alt(uint32_t r, const std::vector<Element>& seq);
  bool has_alts(uint32_t r) const { return !g_.rule_alts[r].empty(); }
  const std::string& name(uint32_t r) const { return g_.rule_names[r]; }
  size_t n_rules() const { return g_.rule_alts.size(); }
  Grammar take(uint32_t root);

 private:
  Grammar g_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::unordered_map<std::string, uint32_t> set_index_;  // ByteSet bytes -> index
  size_t fresh_counter_ = 0;
};

}  // namespace chimera::runtime::grammar
