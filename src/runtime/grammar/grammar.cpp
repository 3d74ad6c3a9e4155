// Grammar building and validation (see grammar.h for the invariants).
// Nullable and finishable rules are least fixed points; left recursion is a
// cycle in the "can start with" graph (r -> s when s can come first in an
// alternative of r after elements that may match nothing) that pushes a
// return frame, found iteratively so deep generated grammars cannot overflow
// the call stack.
#include "runtime/grammar/grammar.h"

#include <algorithm>
#include <cstring>

namespace chimera::runtime::grammar {

uint32_t GrammarBuilder::rule(const std::string& name) {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return it->second;
  const uint32_t id = (uint32_t)g_.rule_alts.size();
  g_.rule_alts.emplace_back();
  g_.rule_names.push_back(name);
  by_name_.emplace(name, id);
  return id;
}

uint32_t GrammarBuilder::fresh_rule(const std::string& base) {
  for (;;) {
    std::string name = base + "-" + std::to_string(++fresh_counter_);
    if (!by_name_.count(name)) return rule(name);
  }
}

uint32_t GrammarBuilder::byte_set(const ByteSet& s) {
  std::string key(sizeof s.w, '\0');
  std::memcpy(key.data(), s.w.data(), sizeof s.w);
  auto it = set_index_.find(key);
  if (it != set_index_.end()) return it->second;
  const uint32_t id = (uint32_t)g_.byte_sets.size();
  g_.byte_sets.push_back(s);
  set_index_.emplace(std::move(key), id);
  return id;
}

Status GrammarBuilder::add_alt(uint32_t r, const std::vector<Element>& seq) {
  if (g_.elems.size() + seq.size() + 1 > Grammar::kMaxElements || g_.rule_alts.size() > Grammar::kMaxRules)
    return invalid_argument("grammar is too large (more than " + std::to_string(Grammar::kMaxElements) +
                            " elements or " + std::to_string(Grammar::kMaxRules) +
                            " rules; a repetition count may be too big)");
  g_.rule_alts[r].push_back((uint32_t)g_.elems.size());
  g_.elems.insert(g_.elems.end(), seq.begin(), seq.end());
  g_.elems.push_back({Element::kEnd, 0});
  return Status::ok();
}

Grammar GrammarBuilder::take(uint32_t root) {
  g_.root = root;
  Grammar out = std::move(g_);
  g_ = Grammar();
  by_name_.clear();
  set_index_.clear();
  return out;
}

Status Grammar::validate() const {
  const size_t n = rule_alts.size();
  if (root >= n) return invalid_argument("grammar has no root rule");
  for (size_t r = 0; r < n; ++r) {
    if (rule_alts[r].empty()) return invalid_argument("undefined rule '" + rule_names[r] + "'");
  }
  for (const Element& e : elems) {
    if (e.type == Element::kRule && e.arg >= n) return internal_error("grammar references a missing rule id");
    if (e.type == Element::kBytes && (e.arg >= byte_sets.size() || byte_sets[e.arg].empty()))
      return invalid_argument("grammar contains a character class that matches nothing");
  }

  // Least fixed points: nullable (can match "") and finishable (matches something).
  std::vector<char> nullable(n, 0), finishable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      for (uint32_t a : rule_alts[r]) {
        bool all_null = true, all_fin = true;
        for (uint32_t i = a; elems[i].type != Element::kEnd; ++i) {
          const Element& e = elems[i];
          if (e.type == Element::kBytes) {
            all_null = false;
          } else {
            all_null = all_null && nullable[e.arg];
            all_fin = all_fin && finishable[e.arg];
          }
        }
        if (all_null && !nullable[r]) nullable[r] = 1, changed = true;
        if (all_fin && !finishable[r]) finishable[r] = 1, changed = true;
      }
    }
  }
  for (size_t r = 0; r < n; ++r) {
    if (!finishable[r])
      return invalid_argument("rule '" + rule_names[r] +
                              "' can never finish: every alternative refers to a rule that recurses without end");
  }

  // "Can start with" edges r -> s (s may come first in an alternative of r).
  // An edge is a tail call when s ends the alternative: the matcher does not
  // push a return frame for it, so a cycle of tail calls only revisits a
  // position it has seen (harmless: (x?)* is such a cycle). A cycle through a
  // pushing edge grows the stack forever: that is left recursion. Found with
  // Tarjan's strongly connected components (iterative): a pushing edge inside
  // one component closes such a cycle.
  struct Edge {
    uint32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> first(n);
  for (size_t r = 0; r < n; ++r) {
    for (uint32_t a : rule_alts[r]) {
      for (uint32_t i = a; elems[i].type == Element::kRule; ++i) {
        first[r].push_back({elems[i].arg, elems[i + 1].type == Element::kEnd});
        if (!nullable[elems[i].arg]) break;
      }
    }
  }
  std::vector<int64_t> index(n, -1), low(n, 0), comp(n, -1);
  std::vector<uint8_t> on_stack(n, 0);
  std::vector<uint32_t> stack;
  std::vector<std::pair<uint32_t, size_t>> path;  // (rule, next edge)
  int64_t counter = 0, n_comp = 0;
  for (size_t s = 0; s < n; ++s) {
    if (index[s] >= 0) continue;
    path.push_back({(uint32_t)s, 0});
    index[s] = low[s] = counter++;
    stack.push_back((uint32_t)s);
    on_stack[s] = 1;
    while (!path.empty()) {
      const uint32_t r = path.back().first;
      const size_t k = path.back().second;
      if (k < first[r].size()) {
        ++path.back().second;
        const uint32_t t = first[r][k].to;
        if (index[t] < 0) {
          index[t] = low[t] = counter++;
          stack.push_back(t);
          on_stack[t] = 1;
          path.push_back({t, 0});
        } else if (on_stack[t]) {
          low[r] = std::min(low[r], index[t]);
        }
        continue;
      }
      if (low[r] == index[r]) {
        for (;;) {
          const uint32_t t = stack.back();
          stack.pop_back();
          on_stack[t] = 0;
          comp[t] = n_comp;
          if (t == r) break;
        }
        ++n_comp;
      }
      path.pop_back();
      if (!path.empty()) low[path.back().first] = std::min(low[path.back().first], low[r]);
    }
  }
  for (size_t r = 0; r < n; ++r) {
    for (const Edge& e : first[r]) {
      if (!e.tail && comp[e.to] == comp[r])
        return invalid_argument("left recursion in rule '" + rule_names[r] + "' (through rule '" + rule_names[e.to] +
                                "'): a rule may not start with itself");
    }
  }
  return Status::ok();
}

}  // namespace chimera::runtime::grammar
