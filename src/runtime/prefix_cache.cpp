#include "runtime/prefix_cache.h"

#include <algorithm>
#include <utility>

#include "model/cache_copy.h"

namespace dsv4::runtime {
namespace {

bool begins_with(std::span<const int64_t> sequence, const std::vector<int64_t>& prefix) {
  return prefix.size() <= sequence.size() &&
         std::equal(prefix.begin(), prefix.end(), sequence.begin());
}

}  // namespace

PrefixCache::PrefixCache(int64_t capacity_bytes)
    : capacity_(std::max<int64_t>(capacity_bytes, 0)) {}

void PrefixCache::touch(std::list<Entry>::iterator it) {
  entries_.splice(entries_.begin(), entries_, it);
}

PrefixCache::Match PrefixCache::match(std::span<const int64_t> prompt) {
  auto best = entries_.end();
  size_t longest = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const size_t n = std::min(it->tokens.size(), prompt.size());
    const auto differ = std::mismatch(it->tokens.begin(), it->tokens.begin() + static_cast<long>(n),
                                      prompt.begin());
    const auto common = static_cast<size_t>(differ.first - it->tokens.begin());
    longest = std::max(longest, common);
    const bool begins_prompt = common == it->tokens.size() && common < prompt.size();
    if (begins_prompt && (best == entries_.end() || common > best->tokens.size())) best = it;
  }
  Match found{nullptr, static_cast<int64_t>(longest)};
  if (best != entries_.end()) {
    touch(best);
    found.kept = &entries_.front();
  }
  return found;
}

bool PrefixCache::contains(std::span<const int64_t> tokens) {
  const auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) {
    return e.tokens.size() == tokens.size() && begins_with(tokens, e.tokens);
  });
  if (it == entries_.end()) return false;
  touch(it);
  return true;
}

void PrefixCache::insert(std::vector<int64_t> tokens, model::SequenceCache state) {
  const int64_t bytes = model::cache_bytes(state);
  if (bytes > capacity_) return;
  entries_.remove_if([&](const Entry& e) {
    const bool same = e.tokens == tokens;
    if (same) bytes_ -= e.bytes;
    return same;
  });
  while (bytes_ + bytes > capacity_) {
    bytes_ -= entries_.back().bytes;
    entries_.pop_back();
  }
  entries_.push_front(Entry{std::move(tokens), std::move(state), bytes});
  bytes_ += bytes;
}

void PrefixCache::clear() {
  entries_.clear();
  bytes_ = 0;
}

}  // namespace dsv4::runtime
