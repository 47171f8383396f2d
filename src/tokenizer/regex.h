// A compiled PCRE2 pattern in UTF mode with Unicode properties (\p{L}, \p{N}, ...), standing in
// for the Oniguruma regexes Hugging Face tokenizers compiles tokenizer.json's Split patterns
// with. The two engines read these patterns alike (classes, properties, lookahead, leftmost
// alternation) except for the shorthand classes, whose Unicode members differ:
//   \s  Oniguruma: White_Space (U+0009-000D, 0020, 0085, 00A0, 1680, 2000-200A, 2028, 2029,
//       202F, 205F, 3000). PCRE2 also counts U+180E (through \h). We write \s and \S out as
//       that list, so the pattern means what it means to Oniguruma.
//   \w \W \b \B \h \H  differ more (Oniguruma's \h is a hex digit) and are refused by name; no
//       tokenizer we target uses them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dsv4/status.h"

namespace dsv4::tokenizer {

class Regex {
 public:
  // `literal`: the pattern is a plain string, not a regular expression.
  static Result<Regex> compile(const std::string& pattern, bool literal);
  // The matches of `text`, left to right, as [begin, end) byte offsets, the way the onig crate's
  // find_iter yields them: after a match the search resumes at its end; an empty match is kept
  // unless it ends where the previous match ended, in which case the search steps one character
  // on. Text that is not valid UTF-8 is an error.
  Result<std::vector<std::pair<size_t, size_t>>> find_all(std::string_view text) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;  // immutable once compiled; copies share it
};

}  // namespace dsv4::tokenizer
