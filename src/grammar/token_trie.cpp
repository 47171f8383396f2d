#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace dsv4::grammar {

TokenTrie::TokenTrie(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  std::vector<int32_t> sorted;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (bytes_[id].empty()) continue;
    sorted.push_back(static_cast<int32_t>(id));
    max_token_bytes_ = std::max(max_token_bytes_, bytes_[id].size());
  }
  std::sort(sorted.begin(), sorted.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  build(sorted, 0);
}

// The node for the tokens `sorted` (all sharing their first `depth` bytes, ascending).
int32_t TokenTrie::build(std::span<const int32_t> sorted, size_t depth) {
  const auto n = static_cast<int32_t>(nodes_.size());
  nodes_.push_back({});
  auto length = [&](int32_t id) { return bytes_[static_cast<size_t>(id)].size(); };
  size_t i = 0;
  const auto token_begin = static_cast<int32_t>(token_ids_.size());
  while (i < sorted.size() && length(sorted[i]) == depth) token_ids_.push_back(sorted[i++]);
  const auto token_end = static_cast<int32_t>(token_ids_.size());
  std::vector<std::pair<uint8_t, int32_t>> children;
  while (i < sorted.size()) {
    const auto byte = static_cast<uint8_t>(bytes_[static_cast<size_t>(sorted[i])][depth]);
    size_t j = i;
    while (j < sorted.size() &&
           static_cast<uint8_t>(bytes_[static_cast<size_t>(sorted[j])][depth]) == byte) {
      ++j;
    }
    children.emplace_back(byte, build(sorted.subspan(i, j - i), depth + 1));
    i = j;
  }
  Node& node = nodes_[static_cast<size_t>(n)];
  node.token_begin = token_begin;
  node.token_end = token_end;
  node.child_begin = static_cast<int32_t>(child_bytes_.size());
  for (const auto& [byte, child] : children) {
    child_bytes_.push_back(byte);
    child_nodes_.push_back(child);
  }
  node.child_end = static_cast<int32_t>(child_bytes_.size());
  return n;
}

void TokenTrie::set_tokens(int32_t n, std::span<uint32_t> bits) const {
  const Node& node = nodes_[static_cast<size_t>(n)];
  for (int32_t i = node.token_begin; i < node.token_end; ++i) {
    const auto id = static_cast<uint32_t>(token_ids_[static_cast<size_t>(i)]);
    bits[id >> 5] |= 1u << (id & 31);
  }
}

}  // namespace dsv4::grammar
