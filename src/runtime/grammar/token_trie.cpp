// Preorder trie construction: sort the tokens by bytes; each token then adds
// nodes for the bytes past its longest common prefix with the previous one,
// and the nodes deeper than that prefix are closed (their skip set).
// Tokens longer than 65535 bytes are left out (depth is 16-bit; no real
// vocabulary comes close).
#include "runtime/grammar/token_trie.h"

#include <algorithm>

namespace chimera::runtime::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes) {
  std::vector<int32_t> order;
  for (size_t i = 0; i < token_bytes.size(); ++i) {
    if (!token_bytes[i].empty() && token_bytes[i].size() < 65536) order.push_back((int32_t)i);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes[(size_t)a] < token_bytes[(size_t)b] || (token_bytes[(size_t)a] == token_bytes[(size_t)b] && a < b);
  });
  std::vector<uint32_t> open;  // node index at each depth of the current path
  std::vector<std::vector<int32_t>> node_tokens;
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = token_bytes[(size_t)id];
    size_t lcp = 0;
    if (prev) {
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    }
    while (open.size() > lcp) {
      nodes_[open.back()].skip = (uint32_t)nodes_.size();
      open.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      open.push_back((uint32_t)nodes_.size());
      nodes_.push_back({0, 0, (uint16_t)(d + 1), (uint8_t)s[d]});
      node_tokens.emplace_back();
    }
    node_tokens[open.back()].push_back(id);
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  while (!open.empty()) {
    nodes_[open.back()].skip = (uint32_t)nodes_.size();
    open.pop_back();
  }
  for (size_t i = 0; i < node_tokens.size(); ++i) {
    nodes_[i].tok_begin = (uint32_t)tokens_.size();
    tokens_.insert(tokens_.end(), node_tokens[i].begin(), node_tokens[i].end());
  }
  nodes_.push_back({(uint32_t)nodes_.size() + 1, (uint32_t)tokens_.size(), 0, 0});  // sentinel
}

}  // namespace chimera::runtime::grammar
