// A compiled PCRE2 pattern in UTF mode with Unicode properties (\p{L}, \p{N}, ...), the regex
// dialect tokenizer.json's Split patterns are written in (Oniguruma in Hugging Face tokenizers;
// PCRE2 reads the same syntax for these patterns: classes, properties, lookahead).
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
  // The non-empty, non-overlapping matches of `text`, left to right, as [begin, end) byte
  // offsets. Text that is not valid UTF-8 is an error.
  Result<std::vector<std::pair<size_t, size_t>>> find_all(std::string_view text) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;  // immutable once compiled; copies share it
};

}  // namespace dsv4::tokenizer
