// The vocabulary as a trie over the bytes each token writes, so that the tokens a grammar state
// allows are found by walking the automaton and the trie together: a byte that the automaton
// refuses cuts off every token under it at once.
//
// Dimension letters: V vocab.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dsv4::grammar {

class TokenTrie {
 public:
  struct Node {
    int32_t child_begin, child_end;  // into child_bytes / child_nodes, by ascending byte
    int32_t token_begin, token_end;  // into token_ids: the tokens whose bytes end here
  };

  // token_bytes[id]: the bytes token id writes, [V]; empty for a token that is never allowed
  // (special tokens such as eos, ids the tokenizer lacks).
  explicit TokenTrie(std::vector<std::string> token_bytes);

  int64_t vocab_size() const { return static_cast<int64_t>(bytes_.size()); }
  const std::string& bytes(int64_t id) const { return bytes_[static_cast<size_t>(id)]; }
  static constexpr int32_t kRoot = 0;
  const Node& node(int32_t n) const { return nodes_[static_cast<size_t>(n)]; }
  size_t n_nodes() const { return nodes_.size(); }
  uint8_t child_byte(int32_t i) const { return child_bytes_[static_cast<size_t>(i)]; }
  int32_t child_node(int32_t i) const { return child_nodes_[static_cast<size_t>(i)]; }
  // Sets the bits of the tokens that end at node n.
  void set_tokens(int32_t n, std::span<uint32_t> bits) const;
  size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  int32_t build(std::span<const int32_t> sorted, size_t depth);

  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<uint8_t> child_bytes_;
  std::vector<int32_t> child_nodes_;
  std::vector<int32_t> token_ids_;
  size_t max_token_bytes_ = 0;
};

}  // namespace dsv4::grammar
