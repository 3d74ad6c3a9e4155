// The byte strings of a vocabulary's tokens as a trie stored in depth-first
// preorder: node i's subtree is [i, skip[i]), its depth is depth[i] (1 for
// the first byte), and the tokens whose bytes end at node i are
// tokens[tok_begin[i], tok_begin[i+1]). A mask walks the nodes in order,
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
  TokenTrie() = default;
  // token_bytes[id] = the bytes token id stands for ("" = never in the trie).
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  size_t n_nodes() const { return byte_.size(); }
  size_t max_depth() const { return max_depth_; }

  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> skip_;
  std::vector<uint32_t> tok_begin_;  // n_nodes + 1
  std::vector<int32_t> tokens_;

 private:
  size_t max_depth_ = 0;
};

}  // namespace chimera::runtime::grammar
