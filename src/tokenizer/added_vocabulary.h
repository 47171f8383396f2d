// tokenizer.json's "added_tokens" (special tokens such as <｜begin▁of▁sentence｜>, and plain
// added ones), found in the text before anything else runs, as tokenizers' AddedVocabulary
// finds them:
//   - ids: a token whose content the model's vocabulary (or an earlier added token) has takes
//     that id; the others take vocab_size, vocab_size + 1, ... in file order. tokenizers ignores
//     the file's "id" fields; we refuse a file whose ids disagree, naming the token.
//   - two passes: first the tokens with normalized = false are cut out of the whole text, then
//     those with normalized = true out of what remains (after the normalizer, which here is
//     always the identity). Within a pass the leftmost match wins, the longest at that place,
//     and the search goes on after it.
//   - lstrip / rstrip: the match also takes the whitespace (Unicode White_Space) before / after
//     it, within its piece of text. single_word is refused (it needs Rust regex's Unicode \w).
//   - special only matters for decoding with special tokens skipped, which we do not offer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dsv4/status.h"
#include "format/json.h"
#include "tokenizer/bpe_model.h"

namespace dsv4::tokenizer {

class AddedVocabulary {
 public:
  // `list` is the added_tokens value (null: none).
  static Result<AddedVocabulary> from_json(const format::Json& list, const BpeModel& model);

  // A stretch [begin, end) of the text: an added token's (id set) or text for the pre-tokenizer.
  struct Segment {
    size_t begin, end;
    std::optional<int64_t> id;
  };
  // `text` cut into segments, in order.
  std::vector<Segment> split(std::string_view text) const;

  const std::string* content_of(int64_t id) const;  // nullptr for an id that is not added
  std::optional<int64_t> id_of(std::string_view content) const;

 private:
  struct Token {
    int64_t id;
    std::string content;
    bool lstrip = false, rstrip = false;
  };
  // The tokens of one pass (indices into tokens_) by first byte, longest first, so that the
  // first that matches at a place is the longest there.
  struct Pass {
    std::vector<size_t> by_first_byte[256];
  };
  const Token* longest_at(const Pass& pass, std::string_view text, size_t at) const;
  void split_pass(const Pass& pass, std::string_view text, size_t offset,
                  std::vector<Segment>& out) const;

  std::vector<Token> tokens_;  // distinct contents, file order
  std::unordered_map<std::string, size_t> index_of_content_;
  std::unordered_map<int64_t, size_t> index_of_id_;
  Pass raw_, normalized_;
};

}  // namespace dsv4::tokenizer
