// The byte strings of a vocabulary's tokens as a trie stored in depth-first
// preorder: node i's subtree is [i, skip), its depth is 1 for the first byte,
// and the tokens whose bytes end at node i are tokens[tok_begin of i,
// tok_begin of i + 1). A mask walks the nodes in order,
// stepping the grammar state once per node and jumping to skip[i] when a byte
// is rejected, so a rejected prefix prunes every token that starts with it.
// Tokens with no bytes (control tokens, unused ids) are not in the trie.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chimera::runtime::grammar {

class TokenTrie {
 public:
  // One node: 12 bytes, so the walk reads a single array.
  struct Node {
    uint32_t skip;       // first node after this subtree
    uint32_t tok_begin;  // tokens ending here: tokens[tok_begin, next node's tok_begin)
    uint16_t depth;      // 1 for a first byte
    uint8_t byte;
  };

  TokenTrie() = default;
  // token_bytes[id] = the bytes token id stands for ("" = never in the trie).
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  size_t n_nodes() const { return nodes_.empty() ? 0 : nodes_.size() - 1; }
  size_t max_depth() const { return max_depth_; }
  // n_nodes() + 1 entries: the last is a sentinel holding the end of tokens().
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> tokens_;
  size_t max_depth_ = 0;
};

}  // namespace chimera::runtime::grammar
