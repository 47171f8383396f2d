// The BPE model of a Hugging Face tokenizer.json ("model": {"type": "BPE", ...}): a vocabulary
// of token strings and a ranked list of merges. A pre-tokenized piece starts as its characters;
// the adjacent pair of lowest merge rank is joined everywhere (left to right) until no pair has
// a rank; each final symbol is one id.
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

  // Appends the ids of one piece (a string of vocabulary characters); a symbol outside the
  // vocabulary is the unknown token when the model has one, else an error.
  Status encode_piece(std::string_view piece, std::vector<int64_t>& ids) const;

  const std::string* token_of(int64_t id) const;  // nullptr for an id the vocabulary lacks
  std::optional<int64_t> id_of(std::string_view token) const;
  int64_t id_bound() const { return id_bound_; }  // every id is below it

 private:
  struct PairHash {
    size_t operator()(const std::pair<std::string, std::string>& p) const {
      return std::hash<std::string>()(p.first) * 31 + std::hash<std::string>()(p.second);
    }
  };
  std::optional<int> rank_of(const std::string& left, const std::string& right) const;

  std::unordered_map<std::string, int64_t> id_of_token_;
  std::unordered_map<int64_t, std::string> token_of_id_;
  std::unordered_map<std::pair<std::string, std::string>, int, PairHash> merge_rank_;
  std::optional<int64_t> unk_id_;
  bool ignore_merges_ = false;
  int64_t id_bound_ = 0;
};

}  // namespace dsv4::tokenizer
