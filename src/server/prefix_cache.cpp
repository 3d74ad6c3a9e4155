// Prefix cache lookups, de-duplication and LRU eviction; see prefix_cache.h.
// Lookup is a linear scan with a common-prefix comparison per entry: the entry
// count is bounded by the memory budget (each entry is a whole state), so this
// stays far cheaper than the prefill it saves.
#include "server/prefix_cache.h"

#include <algorithm>
#include <unordered_map>

namespace chimera::server {
namespace {

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return (int64_t)i;
}

}  // namespace

PrefixCache::Hit PrefixCache::lookup(const std::string& scope, std::span<const int32_t> tokens, int64_t max_len) {
  Hit best;
  Entry* best_entry = nullptr;
  max_len = std::min<int64_t>(max_len, (int64_t)tokens.size());
  if (max_len <= 0) return best;
  for (Entry& e : entries_) {
    if (e.scope != scope) continue;
    const int64_t common = common_prefix(e.tokens, tokens.first((size_t)max_len));
    int64_t usable = 0;
    if (e.truncatable) {
      usable = common;
    } else if (common == (int64_t)e.tokens.size()) {
      usable = common;  // a checkpoint is usable only whole
    }
    if (usable > best.n_tokens) {
      best.n_tokens = usable;
      best.state = e.state.get();
      best.truncate = usable < (int64_t)e.tokens.size();
      best_entry = &e;
    }
  }
  if (best_entry) best_entry->last_used = ++clock_;
  return best;
}

bool PrefixCache::covers(const std::string& scope, std::span<const int32_t> tokens, bool truncatable) const {
  for (const Entry& e : entries_) {
    if (e.scope != scope) continue;
    if (truncatable && e.truncatable) {
      if (e.tokens.size() >= tokens.size() && common_prefix(e.tokens, tokens) == (int64_t)tokens.size()) return true;
    } else if (e.tokens.size() == tokens.size() && common_prefix(e.tokens, tokens) == (int64_t)tokens.size()) {
      return true;
    }
  }
  return false;
}

void PrefixCache::insert(const std::string& scope, std::vector<int32_t> tokens,
                         std::unique_ptr<layers::SequenceState> state) {
  if (!state || tokens.empty() || (int64_t)tokens.size() != state->n_past()) return;
  const bool truncatable = !state->has_recurrent();
  if (covers(scope, tokens, truncatable)) return;
  if (truncatable) {
    // Entries that are prefixes of the new one are now redundant.
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      if (it->truncatable && it->scope == scope && it->tokens.size() < tokens.size() &&
          common_prefix(it->tokens, tokens) == (int64_t)it->tokens.size())
        erase(it);
      it = next;
    }
  }
  Entry e;
  e.scope = scope;
  e.tokens = std::move(tokens);
  e.state = std::move(state);
  e.truncatable = truncatable;
  e.last_used = ++clock_;
  entries_.push_back(std::move(e));
}

bool PrefixCache::evict_lru() {
  if (entries_.empty()) return false;
  auto victim = entries_.begin();
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->last_used < victim->last_used) victim = it;
  erase(victim);
  return true;
}

void PrefixCache::clear() { entries_.clear(); }

void PrefixCache::erase(std::list<Entry>::iterator it) { entries_.erase(it); }

size_t PrefixCache::bytes() const {
  struct Held {
    long by_entries = 0, holders = 0;
    size_t bytes = 0;
  };
  std::unordered_map<const void*, Held> blocks;
  size_t b = 0;
  for (const Entry& e : entries_) {
    b += e.state->unshared_bytes();
    e.state->visit_kv_blocks([&](const void* id, long holders, size_t bytes) {
      Held& h = blocks[id];
      ++h.by_entries;
      h.holders = holders;
      h.bytes = bytes;
    });
  }
  for (const auto& [id, h] : blocks)
    if (h.by_entries >= h.holders) b += h.bytes;
  return b;
}

}  // namespace chimera::server
