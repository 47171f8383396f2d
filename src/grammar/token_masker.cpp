#include "grammar/token_masker.h"

#include <algorithm>

namespace dsv4::grammar {

TrieWalker::TrieWalker(const Grammar& grammar, const TokenTrie& trie)
    : trie_(trie), stepper_(grammar), next_(trie.max_token_bytes() + 1) {}

void TrieWalker::walk(StackPool& pool, int32_t node, const StackSet& set, std::span<uint32_t> bits,
                      std::vector<int32_t>* open_returns) {
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

namespace {

// The shape of everything `state` can reach (see SharedMaskCache): states numbered in the order
// a breadth-first search meets them, each written as its end flag, byte edges and calls.
std::string reachable_shape(const Grammar& g, int32_t state) {
  std::unordered_map<int32_t, int32_t> id;
  std::vector<int32_t> order = {state};
  id.emplace(state, 0);
  auto number = [&](int32_t s) {
    const auto [it, added] = id.emplace(s, static_cast<int32_t>(order.size()));
    if (added) order.push_back(s);
    return it->second;
  };
  std::string shape;
  auto put = [&](int32_t v) { shape.append(reinterpret_cast<const char*>(&v), sizeof v); };
  for (size_t i = 0; i < order.size(); ++i) {
    const Grammar::State& st = g.states[static_cast<size_t>(order[i])];
    put(st.final ? -1 : -2);
    for (int32_t e = st.byte_begin; e < st.byte_end; ++e) {
      const Grammar::ByteEdge& edge = g.byte_edges[static_cast<size_t>(e)];
      put(edge.lo | (edge.hi << 8));
      put(number(edge.to));
    }
    put(-3);
    for (int32_t c = st.call_begin; c < st.call_end; ++c) {
      const Grammar::CallEdge& call = g.call_edges[static_cast<size_t>(c)];
      put(number(g.rule_start[static_cast<size_t>(call.rule)]));
      put(number(call.to));
    }
    put(-4);
  }
  return shape;
}

}  // namespace

std::shared_ptr<const MaskEntry> SharedMaskCache::find(const std::string& shape) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto found = entries_.find(shape);
  return found == entries_.end() ? nullptr : found->second;
}

void SharedMaskCache::insert(const std::string& shape, std::shared_ptr<const MaskEntry> entry) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_.emplace(shape, std::move(entry));
}

std::shared_ptr<const TokenMasker::Entry> TokenMasker::walk(int32_t state) const {
  auto e = std::make_shared<Entry>();
  e->bits.assign(words(), 0);
  StackPool pool;
  StackSet start;
  start.stacks.push_back(pool.push(state, StackPool::kOpenBottom));
  TrieWalker(grammar_, trie_).walk(pool, TokenTrie::kRoot, start, e->bits, &e->open_returns);
  return e;
}

std::shared_ptr<const TokenMasker::Entry> TokenMasker::entry(int32_t state) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto found = entries_.find(state);
  if (found != entries_.end()) return found->second;
  std::shared_ptr<const Entry> e;
  if (shared_ != nullptr) {
    const std::string shape = reachable_shape(grammar_, state);
    e = shared_->find(shape);
    if (e == nullptr) {
      e = walk(state);
      shared_->insert(shape, e);
    }
  } else {
    e = walk(state);
  }
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
