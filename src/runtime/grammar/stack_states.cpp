// Stack sets and their byte transitions (see stack_states.h).
#include "runtime/grammar/stack_states.h"

#include <algorithm>
#include <cstring>

namespace chimera::runtime::grammar {

StateSpace::StateSpace(Grammar g, StateLimits limits) : g_(std::move(g)), limits_(limits) {
  nodes_.push_back({0, 0});
  state_begin_.push_back(0);
  scratch_.clear();
  visited_.clear();
  for (uint32_t a : g_.rule_alts[g_.root]) {
    if (!closure(a, 0)) return;
  }
  start_ = intern(scratch_);
}

bool StateSpace::fail(std::string msg) {
  if (error_.is_ok()) error_ = invalid_argument("grammar: " + std::move(msg));
  return false;
}

int32_t StateSpace::node(uint32_t pos, int32_t parent) {
  const uint64_t key = ((uint64_t)pos << 32) | (uint32_t)parent;
  auto it = node_index_.find(key);
  if (it != node_index_.end()) return it->second;
  if (nodes_.size() >= limits_.max_nodes) {
    fail("too many matcher stacks (" + std::to_string(limits_.max_nodes) + "); the grammar nests too deeply");
    return -1;
  }
  const auto id = (int32_t)nodes_.size();
  nodes_.push_back({pos, parent});
  node_index_.emplace(key, id);
  return id;
}

bool StateSpace::closure(uint32_t pos0, int32_t parent0) {
  work_.clear();
  work_.push_back({pos0, parent0});
  while (!work_.empty()) {
    auto [pos, parent] = work_.back();
    work_.pop_back();
    if (!visited_.insert(((uint64_t)pos << 32) | (uint32_t)parent).second) continue;
    const Element& e = g_.elems[pos];
    if (e.type == Element::kBytes) {
      const int32_t id = node(pos, parent);
      if (id < 0) return false;
      scratch_.push_back(id);
      if (scratch_.size() > limits_.max_stacks)
        return fail("more than " + std::to_string(limits_.max_stacks) +
                    " parallel parses at one position; the grammar is too ambiguous");
    } else if (e.type == Element::kEnd) {
      if (parent == 0) {
        scratch_.push_back(0);  // the empty stack: a complete match
      } else {
        work_.push_back({nodes_[(size_t)parent].pos, nodes_[(size_t)parent].parent});
      }
    } else {
      int32_t ret = parent;  // tail call: nothing left to return to in this alternative
      if (g_.elems[pos + 1].type != Element::kEnd) {
        ret = node(pos + 1, parent);
        if (ret < 0) return false;
      }
      for (uint32_t a : g_.rule_alts[e.arg]) work_.push_back({a, ret});
    }
  }
  return true;
}

int32_t StateSpace::intern(std::vector<int32_t>& stacks) {
  if (!error_.is_ok() || stacks.empty()) return kDead;
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  std::string key(stacks.size() * sizeof(int32_t), '\0');
  std::memcpy(key.data(), stacks.data(), key.size());
  auto it = state_index_.find(key);
  if (it != state_index_.end()) return it->second;
  if (accepting_.size() >= limits_.max_states) {
    fail("more than " + std::to_string(limits_.max_states) + " matcher states; the grammar is too large for this text");
    return kDead;
  }
  const auto id = (int32_t)accepting_.size();
  stacks_.insert(stacks_.end(), stacks.begin(), stacks.end());
  state_begin_.push_back((uint32_t)stacks_.size());
  accepting_.push_back(stacks[0] == 0);  // sorted: the empty stack (0) comes first
  trans_.resize(trans_.size() + 256, kUnknown);
  state_index_.emplace(std::move(key), id);
  return id;
}

int32_t StateSpace::compute(int32_t s, uint8_t b) {
  if (!error_.is_ok()) return kDead;
  scratch_.clear();
  visited_.clear();
  for (uint32_t i = state_begin_[(size_t)s]; i < state_begin_[(size_t)s + 1]; ++i) {
    const int32_t id = stacks_[i];
    if (id == 0) continue;
    const Node n = nodes_[(size_t)id];  // a copy: closure() may grow nodes_
    if (!g_.byte_sets[g_.elems[n.pos].arg].test(b)) continue;
    if (!closure(n.pos + 1, n.parent)) return kDead;
  }
  const int32_t t = intern(scratch_);
  if (error_.is_ok()) trans_[(size_t)s * 256 + b] = t;
  return t;
}

bool StateSpace::can_continue(int32_t s) const {
  if (s < 0) return false;
  return state_begin_[(size_t)s + 1] - state_begin_[(size_t)s] > (accepting_[(size_t)s] ? 1u : 0u);
}

}  // namespace chimera::runtime::grammar
