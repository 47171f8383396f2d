#include "grammar/matcher.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace dsv4::grammar {

int32_t StackPool::push(int32_t state, int32_t below) {
  const auto [it, added] = ids_.emplace(key(state, below), static_cast<int32_t>(entries_.size()));
  if (added) entries_.push_back({state, below});
  return it->second;
}

void StackPool::rewind(size_t mark) {
  for (size_t i = mark; i < entries_.size(); ++i) {
    ids_.erase(key(entries_[i].state, entries_[i].below));
  }
  entries_.resize(mark);
}

void Stepper::close(StackPool& pool, int32_t stack, StackSet& out) {
  seen_.clear();
  expand(pool, stack, out);
  std::sort(out.stacks.begin(), out.stacks.end());
}

void Stepper::expand(StackPool& pool, int32_t stack, StackSet& out) {
  todo_.assign(1, stack);
  while (!todo_.empty()) {
    const int32_t s = todo_.back();
    todo_.pop_back();
    if (s == StackPool::kEmpty) {
      out.accepted = true;
      continue;
    }
    if (s == StackPool::kOpenBottom) {
      out.popped_open = true;
      continue;
    }
    if (std::find(seen_.begin(), seen_.end(), s) != seen_.end()) continue;
    seen_.push_back(s);
    const Grammar::State& st = g_.states[static_cast<size_t>(pool.top(s))];
    if (st.byte_begin != st.byte_end) out.stacks.push_back(s);
    const int32_t below = pool.below(s);
    for (int32_t c = st.call_begin; c < st.call_end; ++c) {
      const Grammar::CallEdge& e = g_.call_edges[static_cast<size_t>(c)];
      todo_.push_back(
          pool.push(g_.rule_start[static_cast<size_t>(e.rule)], pool.push(e.to, below)));
    }
    if (st.final) todo_.push_back(below);
  }
}

void Stepper::step(StackPool& pool, const StackSet& in, uint8_t byte, StackSet& out) {
  out.clear();
  seen_.clear();
  for (const int32_t s : in.stacks) {
    const int32_t to = g_.next(pool.top(s), byte);
    if (to >= 0) expand(pool, pool.push(to, pool.below(s)), out);
  }
  std::sort(out.stacks.begin(), out.stacks.end());
}

Matcher::Matcher(const Grammar& grammar) : stepper_(grammar) {
  stepper_.close(
      pool_, pool_.push(grammar.rule_start[static_cast<size_t>(grammar.root)], StackPool::kEmpty),
      set_);
}

bool Matcher::advance(std::string_view bytes) {
  StackSet at = set_;
  for (size_t i = 0; i < bytes.size(); ++i) {
    stepper_.step(pool_, at, static_cast<uint8_t>(bytes[i]), next_);
    // Past the document's end no byte may follow.
    if (next_.stacks.empty() && !(next_.accepted && i + 1 == bytes.size())) return false;
    std::swap(at, next_);
  }
  if (history_.size() == kMaxRollback) history_.pop_front();
  history_.push_back(std::move(set_));
  set_ = std::move(at);
  if (pool_.size() > kMaxPool) compact();
  return true;
}

void Matcher::rollback(size_t n) {
  DSV4_CHECK(n <= history_.size(), "rolling back %zu advances, %zu kept", n, history_.size());
  if (n == 0) return;
  set_ = std::move(history_[history_.size() - n]);
  history_.resize(history_.size() - n);
}

void Matcher::compact() {
  StackPool fresh;
  std::unordered_map<int32_t, int32_t> moved;
  // Copies a stack, its lower frames first (iteratively: stacks can be deep).
  auto copy = [&](int32_t s) {
    std::vector<int32_t> frames;
    while (s >= 0 && !moved.count(s)) {
      frames.push_back(s);
      s = pool_.below(s);
    }
    int32_t below = s >= 0 ? moved[s] : s;
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      below = fresh.push(pool_.top(*it), below);
      moved[*it] = below;
    }
    return below;
  };
  auto copy_set = [&](StackSet& set) {
    for (int32_t& s : set.stacks) s = copy(s);
    std::sort(set.stacks.begin(), set.stacks.end());
  };
  copy_set(set_);
  for (StackSet& set : history_) copy_set(set);  // the sets rollback() may return to
  pool_ = std::move(fresh);
}

}  // namespace dsv4::grammar
