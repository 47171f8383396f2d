// Prefix caching: the attention states of sequences that ran, kept so that a later prompt that
// begins with the same tokens continues from a copy instead of computing them again (a chat's
// next turn, a system prompt or document sent again, a retry). DeepSeek-V4's state at a position
// is not a list of per-token rows that any prefix can share - the window, the compressors'
// unpooled rows and their entries describe one position only - so a state is kept for an exact
// token sequence and serves the prompts that begin with it (model/cache_copy.h).
//
// Which states are worth keeping is the batch's choice (runtime/batch.h); this is the store: a
// byte budget, least recently used out first. One thread uses it (the scheduler's worker).
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <vector>

#include "model/deepseek_v4.h"

namespace dsv4::runtime {

class PrefixCache {
 public:
  struct Entry {
    std::vector<int64_t> tokens;  // the state is after these, in order
    model::SequenceCache state;   // compact (model::snapshot_cache)
    int64_t bytes = 0;
  };

  // At most capacity_bytes of states on the model's device; 0 keeps none.
  explicit PrefixCache(int64_t capacity_bytes);

  bool enabled() const { return capacity_ > 0; }
  // What one pass over the entries finds for a prompt:
  struct Match {
    // The entry of the most tokens that begins the prompt and is shorter than it (a step needs
    // at least one new token to draw the next from); nullptr when none. Marked used.
    const Entry* kept = nullptr;
    // The most tokens the prompt shares with the start of a kept state's tokens (where it
    // branches off them).
    int64_t common = 0;
  };
  Match match(std::span<const int64_t> prompt);
  // Whether the state after exactly `tokens` is kept; marks it used.
  bool contains(std::span<const int64_t> tokens);
  // Keeps the state after `tokens`, dropping the least recently used entries to make room; a
  // state larger than the whole capacity is not kept.
  void insert(std::vector<int64_t> tokens, model::SequenceCache state);
  // Drops every entry (their device memory is wanted for a sequence).
  void clear();

  int64_t bytes() const { return bytes_; }
  size_t size() const { return entries_.size(); }

 private:
  void touch(std::list<Entry>::iterator it);

  int64_t capacity_;
  int64_t bytes_ = 0;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace dsv4::runtime
