// Prefix cache: snapshots of sequence states keyed by the exact token prefix
// they hold, so a request whose prompt starts with tokens already processed
// (a multi-turn chat, a shared system prompt) restores the state instead of
// prefilling those tokens again.
//
// Two kinds of entry, chosen per snapshot from SequenceState::has_recurrent():
//  * truncatable (KV-only state): any common prefix with the request is usable
//    (restore = copy_from + truncate to the match length);
//  * checkpoint (state with recurrent layers): a recurrent state holds no
//    per-position history, so the entry is usable only as a whole, when its
//    tokens are a prefix of the request. The engine stores such checkpoints at
//    turn boundaries and every N prompt tokens.
// Entries are compact: a snapshot's n_ctx equals the tokens it holds. Their
// KV blocks are shared (copy on write) with the states they were taken from,
// with states restored from them and with each other, so bytes() counts what
// the cache alone keeps alive: each block held only by entries once, plus
// the entries' recurrent states; a block a live sequence also holds is that
// sequence's (the engine budgets it through the sequence's reservation).
// Memory is bounded by the owner (the engine evicts least-recently-used
// entries against its budget).
// Every entry belongs to a scope (an opaque string; the server's API key +
// cache_salt partition): lookups, coverage and de-duplication only ever see
// entries of the caller's scope; eviction is global LRU.
// Invariants: entry.tokens.size() == entry.state->n_past(); a truncatable entry
// is never a prefix of another truncatable entry of its scope (the shorter one
// is dropped); not thread-safe (only the engine loop uses it).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "layers/state.h"

namespace chimera::server {

class PrefixCache {
 public:
  struct Hit {
    const layers::SequenceState* state = nullptr;  // restore source (valid until the next insert/evict)
    int64_t n_tokens = 0;                          // usable prefix length
    bool truncate = false;                         // restore needs truncate(n_tokens)
  };

  // Longest usable cached prefix of tokens[0..max_len). Marks the entry used.
  Hit lookup(const std::string& scope, std::span<const int32_t> tokens, int64_t max_len);
  // True when inserting a snapshot of `tokens` would add nothing (an entry
  // already covers it), so the caller can skip making the copy.
  bool covers(const std::string& scope, std::span<const int32_t> tokens, bool truncatable) const;
  // Adds a compact snapshot whose n_past() == tokens.size().
  void insert(const std::string& scope, std::vector<int32_t> tokens, std::unique_ptr<layers::SequenceState> state);
  // Drops the least recently used entry; false when empty.
  bool evict_lru();
  void clear();
  // Bytes kept alive only by the cache (see above): a block counts when every
  // holder of it is an entry. Recomputed on each call (a walk over the
  // entries' block tables), since sharing changes as sequences end.
  size_t bytes() const;
  size_t entries() const { return entries_.size(); }

 private:
  struct Entry {
    std::string scope;
    std::vector<int32_t> tokens;
    std::unique_ptr<layers::SequenceState> state;
    bool truncatable = true;
    uint64_t last_used = 0;
  };
  void erase(std::list<Entry>::iterator it);

  std::list<Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace chimera::server
