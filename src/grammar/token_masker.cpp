#include "grammar/token_masker.h"

#include <algorithm>

namespace dsv4::grammar {

TrieWalker::TrieWalker(const Grammar& grammar, const TokenTrie& trie)
    : trie_(trie), stepper_(grammar), next_(trie.max_token_bytes() + 1) {}

void TrieWalker::walk(StackPool& pool, int32_t node, const StackSet& set,
                      std::span<uint32_t> bits, std::vector<int32_t>* open_returns) {
  walk_from(pool, node, set, 0, bits, open_returns);
}

void TrieWalker::walk_from(StackPool& pool, int32_t node, const StackSet& set, size_t depth,
                           std::span<uint32_t> bits, std::vector<int32_t>* open_returns) {
  const TokenTrie::Node& n = trie_.node(node);
  StackSet& next = next_[depth];
  for (int32_t i = n.child_begin; i < n.child_end; ++i) {
    const int32_t child = trie_.child_node(i);
    stepper_.step(pool, set, trie_.child_byte(i), next);
    if (!next.stacks.empty() || next.accepted) trie_.set_tokens(child, bits);
    if (next.popped_open && open_returns != nullptr) open_returns->push_back(child);
    if (!next.stacks.empty()) walk_from(pool, child, next, depth + 1, bits, open_returns);
  }
}

std::shared_ptr<const TokenMasker::Entry> TokenMasker::entry(int32_t state) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto found = entries_.find(state);
  if (found != entries_.end()) return found->second;
  auto e = std::make_shared<Entry>();
  e->bits.assign(words(), 0);
  StackPool pool;
  StackSet start;
  start.stacks.push_back(pool.push(state, StackPool::kOpenBottom));
  TrieWalker(grammar_, trie_).walk(pool, TokenTrie::kRoot, start, e->bits, &e->open_returns);
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_.emplace(state, e);
  return e;
}

void SequenceMasker::fill(Matcher& matcher, std::span<uint32_t> bits) {
  std::fill(bits.begin(), bits.end(), 0u);
  StackPool& pool = matcher.pool();
  const size_t mark = pool.mark();  // the look-ahead's stacks go again at the end
  StackSet below;
  for (const int32_t s : matcher.set().stacks) {
    const std::shared_ptr<const TokenMasker::Entry> e = masker_.entry(pool.top(s));
    for (size_t w = 0; w < bits.size(); ++w) bits[w] |= e->bits[w];
    if (e->open_returns.empty()) continue;
    // Where the top rule returns, this stack's own lower frames go on.
    below.clear();
    stepper_.close(pool, pool.below(s), below);
    for (const int32_t node : e->open_returns) {
      if (!below.stacks.empty() || below.accepted) masker_.trie().set_tokens(node, bits);
      if (!below.stacks.empty()) walker_.walk(pool, node, below, bits, nullptr);
    }
  }
  pool.rewind(mark);
}

}  // namespace dsv4::grammar
