// Where a sequence stands in a grammar (grammar/grammar.h): a set of stacks of states. The top
// of a stack is the state of the rule being read; below it, where each calling rule goes on once
// the rule above returns. More than one stack while the text so far is ambiguous (anyOf over
// objects that start alike), one most of the time.
//
// Stacks are hash-consed in a StackPool: a stack is an id, equal stacks have equal ids, and
// pushing or popping is O(1) whatever the depth (a graph-structured stack, as GLR parsers keep
// one). A set is thus a short sorted vector of ints.
#pragma once

#include <cstdint>
#include <deque>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace dsv4::grammar {

class StackPool {
 public:
  static constexpr int32_t kEmpty = -1;       // below the root rule: the document is complete
  static constexpr int32_t kOpenBottom = -2;  // a context not known (masks computed ahead)

  // The stack with `state` on top of `below`.
  int32_t push(int32_t state, int32_t below);
  int32_t top(int32_t stack) const { return entries_[static_cast<size_t>(stack)].state; }
  int32_t below(int32_t stack) const { return entries_[static_cast<size_t>(stack)].below; }
  size_t size() const { return entries_.size(); }
  // Stacks made after a mark can be dropped again (a mask's look-ahead) once nothing refers to
  // them.
  size_t mark() const { return entries_.size(); }
  void rewind(size_t mark);

 private:
  struct Entry {
    int32_t state, below;
  };
  static uint64_t key(int32_t state, int32_t below) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) |
           static_cast<uint32_t>(below);
  }
  std::vector<Entry> entries_;
  std::unordered_map<uint64_t, int32_t> ids_;
};

// Stacks whose top states read a byte next, after every call and return that reads nothing.
struct StackSet {
  std::vector<int32_t> stacks;
  bool accepted = false;     // a stack returned from the root rule: the text may end here
  bool popped_open = false;  // a stack returned into kOpenBottom
  bool alive() const { return !stacks.empty() || accepted || popped_open; }
  void clear() {
    stacks.clear();
    accepted = popped_open = false;
  }
};

// Steps sets of stacks through bytes. Holds scratch space only; one per thread.
class Stepper {
 public:
  explicit Stepper(const Grammar& grammar) : g_(grammar) {}
  // `stack` expanded through calls and returns into `out` (added to what it holds).
  void close(StackPool& pool, int32_t stack, StackSet& out);
  // `in` after reading `byte`, into `out` (cleared first).
  void step(StackPool& pool, const StackSet& in, uint8_t byte, StackSet& out);
  const Grammar& grammar() const { return g_; }

 private:
  // close() without clearing seen_ or sorting: step() expands many stacks into one set.
  void expand(StackPool& pool, int32_t stack, StackSet& out);

  const Grammar& g_;
  std::vector<int32_t> todo_, seen_;
};

// One sequence's position: starts at the root rule, moves over bytes.
class Matcher {
 public:
  // The most advances rollback() can undo.
  static constexpr size_t kMaxRollback = 8;

  explicit Matcher(const Grammar& grammar);
  // Reads `bytes` (none: a step that reads nothing, which rollback() counts too); false when
  // they do not continue any document (nothing changes then).
  bool advance(std::string_view bytes);
  // Undoes the last n successful advances (n <= kMaxRollback, and no more than were made). The
  // pool may keep stacks they made; the set, and so every mask and advance after, is as before.
  void rollback(size_t n);
  // Whether the text so far is a whole document.
  bool accepted() const { return set_.accepted; }
  const StackSet& set() const { return set_; }
  StackPool& pool() { return pool_; }
  const Grammar& grammar() const { return stepper_.grammar(); }

 private:
  // Copies the live stacks into a fresh pool once the pool has grown past kMaxPool entries.
  void compact();
  static constexpr size_t kMaxPool = size_t{1} << 20;

  StackPool pool_;
  Stepper stepper_;
  StackSet set_, next_;
  std::deque<StackSet> history_;  // the sets before the last advances, oldest first
};

}  // namespace dsv4::grammar
