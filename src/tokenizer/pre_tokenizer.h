// tokenizer.json's "pre_tokenizer": the text is cut into pieces before BPE, which never merges
// across a cut. Supported steps, applied in order to every piece so far (a Sequence lists them):
//   Split {pattern: {Regex | String}, behavior: Isolated | Removed, invert: false}
//     Isolated keeps each match and each stretch between matches as a piece; Removed drops
//     the matches.
//   ByteLevel {add_prefix_space, use_regex}: (with use_regex, first the GPT-2 split) every
//     piece becomes the byte-level characters of its bytes (byte_level.h).
// Anything else is refused by name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dsv4/status.h"
#include "format/json.h"
#include "tokenizer/regex.h"

namespace dsv4::tokenizer {

class PreTokenizer {
 public:
  // `pre` is the pre_tokenizer value (null: the whole text is one piece).
  static Result<PreTokenizer> from_json(const format::Json& pre);
  Result<std::vector<std::string>> split(std::string_view text) const;
  // Whether pieces come out as byte-level characters (the decoder must then map them back).
  bool byte_level() const;

 private:
  struct Step {
    enum class Kind { kSplit, kByteLevel } kind;
    Regex pattern;  // kSplit (and kByteLevel with use_regex: the GPT-2 pattern)
    bool remove_matches = false;
    bool use_regex = false;
    bool add_prefix_space = false;
  };
  static Status add_steps(const format::Json& pre, const std::string& where,
                          std::vector<Step>& steps);
  std::vector<Step> steps_;
};

}  // namespace dsv4::tokenizer
