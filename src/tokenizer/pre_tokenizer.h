// tokenizer.json's "pre_tokenizer": the text is cut into pieces before BPE, which never merges
// across a cut. Supported steps, applied in order to every piece so far (a Sequence lists them),
// as Hugging Face tokenizers defines them:
//   Split {pattern: {Regex | String}, behavior, invert}
//     The piece is covered by the pattern's matches and the stretches between them (with
//     invert, the stretches count as the matches and the matches as the stretches). Then
//       Isolated            every match and every stretch is a piece
//       Removed             the stretches are the pieces; matches are dropped
//       MergedWithPrevious  a match joins the stretch before it
//       MergedWithNext      a match joins the stretch after it
//       Contiguous          adjacent matches join each other, adjacent stretches likewise
//     and empty pieces are dropped.
//   ByteLevel {add_prefix_space, use_regex, trim_offsets}: a piece not starting with ' ' gets
//     one in front (add_prefix_space), is split by GPT-2's pattern (use_regex), and becomes the
//     byte-level characters of its bytes (byte_level.h). trim_offsets concerns offsets only.
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
  // Whether pieces come out as byte-level characters.
  bool byte_level() const;

 private:
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    enum class Kind { kSplit, kByteLevel } kind;
    Regex pattern;  // kSplit (and kByteLevel with use_regex: the GPT-2 pattern)
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool use_regex = false;
    bool add_prefix_space = false;
  };
  static Status add_steps(const format::Json& pre, const std::string& where,
                          std::vector<Step>& steps);
  static Status split_piece(const Step& step, const std::string& piece,
                            std::vector<std::string>& out);
  std::vector<Step> steps_;
};

}  // namespace dsv4::tokenizer
