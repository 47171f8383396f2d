// The tokens a sequence may draw next, as a bit mask over the vocabulary.
//
// A token is allowed when the automaton can read all its bytes from some stack of the
// sequence's set (grammar/matcher.h). Walking the vocabulary's trie against the automaton finds
// them all, but the whole trie is ~10^5 tokens: too slow to walk at every step. Most of a mask
// does not depend on the whole stack, though, only on its top state: a token that stays inside
// the top rule (most of a string's body, a number's digits) is allowed or not whatever called
// that rule. So, per top state and once per grammar (TokenMasker, shared by the sequences of a
// constraint), the trie is walked from that state alone over an unknown bottom
// (StackPool::kOpenBottom), giving
//   - the tokens allowed whatever lies below (context-independent), and
//   - the trie nodes where the rule returns into the unknown (the closing `"` of a string).
// At a step, a sequence (SequenceMasker) takes the cached mask of each of its stacks' tops and
// walks only the subtrees under those return nodes with the stacks' real lower frames: for a
// string body that is the few thousand tokens that start with `"`, not the whole vocabulary.
// xgrammar splits tokens into context-independent and -dependent ones the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace dsv4::grammar {

// Walks the trie against sets of stacks (scratch per thread).
class TrieWalker {
 public:
  TrieWalker(const Grammar& grammar, const TokenTrie& trie);
  // Sets the bits of every token under trie node `node` whose remaining bytes `set` can read
  // (the bytes from the root to `node` already read). Where a stack returns into kOpenBottom,
  // the node reached is appended to `open_returns` (when given).
  void walk(StackPool& pool, int32_t node, const StackSet& set, std::span<uint32_t> bits,
            std::vector<int32_t>* open_returns);

 private:
  void walk_from(StackPool& pool, int32_t node, const StackSet& set, size_t depth,
                 std::span<uint32_t> bits, std::vector<int32_t>* open_returns);

  const TokenTrie& trie_;
  Stepper stepper_;
  std::vector<StackSet> next_;  // one per trie depth
};

struct MaskEntry {
  std::vector<uint32_t> bits;         // [ceil(V / 32)] tokens allowed in any context
  std::vector<int32_t> open_returns;  // trie nodes where the state's rule returned
};

// Entries by the shape of what a state can reach (its states' byte edges, calls and ends, in
// the order a breadth-first search meets them), across every grammar of one vocabulary: the
// states of a free string, a number or any JSON value have the same shape in every schema, so
// their walks (a string body's reads the whole trie: tens of ms) are done once per vocabulary.
// Thread-safe.
class SharedMaskCache {
 public:
  // Entries kept at most (each a bit per token): past this the cache starts over.
  static constexpr size_t kMaxEntries = 1024;
  std::shared_ptr<const MaskEntry> find(const std::string& shape);
  void insert(const std::string& shape, std::shared_ptr<const MaskEntry> entry);

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const MaskEntry>> entries_;  // under mutex_
};

// What a top state allows whatever lies below it (see above); shared, thread-safe.
class TokenMasker {
 public:
  using Entry = MaskEntry;
  // Entries kept at most (each a bit per token): past this the cache starts over.
  static constexpr size_t kMaxEntries = 1024;

  // `shared` (may be null) also serves and keeps the entries, by shape.
  TokenMasker(const Grammar& grammar, const TokenTrie& trie, SharedMaskCache* shared = nullptr)
      : grammar_(grammar), trie_(trie), shared_(shared) {}
  std::shared_ptr<const Entry> entry(int32_t state);
  const Grammar& grammar() const { return grammar_; }
  const TokenTrie& trie() const { return trie_; }
  size_t words() const { return static_cast<size_t>((trie_.vocab_size() + 31) / 32); }

 private:
  std::shared_ptr<const Entry> walk(int32_t state) const;

  const Grammar& grammar_;
  const TokenTrie& trie_;
  SharedMaskCache* shared_;
  std::mutex mutex_;
  std::unordered_map<int32_t, std::shared_ptr<const Entry>> entries_;  // under mutex_
};

// One sequence's masks.
class SequenceMasker {
 public:
  explicit SequenceMasker(TokenMasker& masker)
      : masker_(masker), stepper_(masker.grammar()), walker_(masker.grammar(), masker.trie()) {}
  // The tokens `matcher` may read next into `bits` [ceil(V / 32)] (cleared first). The eos
  // token is the caller's: allowed exactly when matcher.accepted().
  void fill(Matcher& matcher, std::span<uint32_t> bits);

 private:
  TokenMasker& masker_;
  Stepper stepper_;
  TrieWalker walker_;
};

}  // namespace dsv4::grammar
