// The BPE model of a Hugging Face tokenizer.json ("model": {"type": "BPE", ...}): a vocabulary
// of token strings and a ranked list of merges, applied as tokenizers' Word::merge_all does.
// A pre-tokenized piece starts as the ids of its characters; of all adjacent pairs that have a
// merge, the one of lowest rank (leftmost among equals) is joined, and its new neighbours are
// considered in turn, until no pair has a merge.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dsv4/status.h"
#include "format/json.h"

namespace dsv4::tokenizer {

class BpeModel {
 public:
  // Refuses what it does not implement (dropout, byte fallback, subword prefixes or suffixes)
  // and merges whose parts or result are not in the vocabulary, naming the field.
  static Result<BpeModel> from_json(const format::Json& model);

  // Appends the ids of one piece (a string of vocabulary characters). A character outside the
  // vocabulary is the unknown token when the model has one (runs of them fused into one with
  // fuse_unk); without one it is an error here, where tokenizers would drop it silently.
  Status encode_piece(std::string_view piece, std::vector<int64_t>& ids) const;

  const std::string* token_of(int64_t id) const;  // nullptr for an id the vocabulary lacks
  std::optional<int64_t> id_of(std::string_view token) const;
  size_t vocab_size() const { return id_of_token_.size(); }

 private:
  struct Merge {
    int rank;
    int64_t result;  // the id of the joined token
  };
  static uint64_t pair_key(int64_t left, int64_t right) {
    return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
  }
  // The merges by pair_key(left id, right id), in an open-addressing table (linear probing,
  // at most half full): encoding looks a pair up for every symbol it joins, and a node-based map
  // costs a cache miss or two per lookup where this costs one.
  class MergeTable {
   public:
    void insert(uint64_t key, Merge merge);  // a key inserted again takes the new merge
    const Merge* find(uint64_t key) const;

   private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};  // no pair of ids < 2^32 has this key
    size_t slot(uint64_t key) const;
    void grow();
    std::vector<uint64_t> keys_;
    std::vector<Merge> merges_;
    size_t size_ = 0;
  };
  // Lookups by std::string_view without building a std::string.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  const Merge* merge_of(int64_t left, int64_t right) const;
  Status initial_symbols(std::string_view piece, std::vector<int64_t>& symbols) const;

  std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>> id_of_token_;
  std::unordered_map<int64_t, std::string> token_of_id_;
  MergeTable merges_;
  // The id of each one-character token below U+0800 (-1: none), which covers the byte-level
  // alphabet: a piece's first symbols without a hash lookup each.
  std::vector<int64_t> char_id_;
  std::optional<int64_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace dsv4::tokenizer
