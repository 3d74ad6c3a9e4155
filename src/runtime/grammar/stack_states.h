// The grammar as a lazily built byte automaton. A matcher position is a set
// of pushdown stacks (as in llama.cpp's grammar sampler): each stack lists the
// element to match next and, below it, where to return after each rule in
// progress. Stacks are interned as shared linked nodes and sets of stacks as
// numbered states, so a state is an int and a byte step is a table lookup once
// it has been computed: step(s, b) fills a 256-entry row of state s on first
// use. Tail calls do not push (a rule reference at the end of an alternative
// returns straight to the caller), so `x*` and right-recursive rules keep the
// stack height constant and their states recur — which is what makes the
// per-state caches (transitions here, token masks in token_mask.h) pay off.
//
// Bounds: closure() visits each (element, return stack) pair at most once
// per step, a state holds at most max_stacks stacks, and the space at most
// max_states states and max_nodes stack nodes. Passing a bound is an error
// (error() says which), never a hang or unbounded memory; step() then
// returns kDead. Not thread-safe: one StateSpace per request / engine thread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "runtime/grammar/grammar.h"

namespace chimera::runtime::grammar {

struct StateLimits {
  size_t max_states = 100000;    // each costs a 1 KiB transition row
  size_t max_stacks = 4096;      // per state: more means a badly ambiguous grammar
  size_t max_nodes = 4u << 20;   // interned stack nodes
};

class StateSpace {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kUnknown = -2;  // a transition-table entry not computed yet

  StateSpace(Grammar g, StateLimits limits = {});
  // The state before any byte (kDead only on error).
  int32_t start() const { return start_; }
  // The state after byte b in state s (s >= 0), kDead when b cannot follow.
  int32_t step(int32_t s, uint8_t b) {
    const int32_t t = trans_[(size_t)s * 256 + b];
    return t != kUnknown ? t : compute(s, b);
  }
  // The bytes so far are a complete match (the empty stack is in the set).
  bool accepting(int32_t s) const { return s >= 0 && accepting_[(size_t)s]; }
  // Some byte can follow.
  bool can_continue(int32_t s) const;
  const Status& error() const { return error_; }
  size_t n_states() const { return accepting_.size(); }
  const Grammar& grammar() const { return g_; }

  // The transition table, 256 entries per state (kUnknown where step() has
  // not been asked yet). Moves when a state is added: re-read after step().
  const int32_t* table() const { return trans_.data(); }

 private:
  struct Node {
    uint32_t pos;    // element index (the stack top, or a return position)
    int32_t parent;  // node below; 0 = the empty stack
  };
  int32_t compute(int32_t s, uint8_t b);
  int32_t node(uint32_t pos, int32_t parent);
  // Adds to scratch_ every stack reachable from "match elems[pos], then parent"
  // without consuming a byte. False on a limit.
  bool closure(uint32_t pos, int32_t parent);
  int32_t intern(std::vector<int32_t>& stacks);
  bool fail(std::string msg);

  Grammar g_;
  StateLimits limits_;
  std::vector<Node> nodes_;  // nodes_[0] is the empty stack
  std::unordered_map<uint64_t, int32_t> node_index_;
  std::vector<uint32_t> state_begin_;   // stacks of state s: stacks_[begin[s], begin[s+1])
  std::vector<int32_t> stacks_;
  std::vector<uint8_t> accepting_;
  std::vector<int32_t> trans_;          // 256 per state
  std::unordered_map<std::string, int32_t> state_index_;
  std::vector<int32_t> scratch_;
  std::unordered_set<uint64_t> visited_;
  std::vector<std::pair<uint32_t, int32_t>> work_;
  int32_t start_ = kDead;
  Status error_;
};

}  // namespace chimera::runtime::grammar
