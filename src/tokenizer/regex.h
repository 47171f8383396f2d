// The regexes of tokenizer.json's Split pre-tokenizers, matched as Hugging Face tokenizers'
// Oniguruma matches them: a backtracking matcher of our own (regex_compiler.cpp says which
// syntax it reads, and refuses the rest by name) whose Unicode classes (\p{L}, \p{N}, \s, ...)
// come from the Unicode 16.0 tables of unicode.h, the version tokenizers 0.23's Oniguruma has.
// A system regex library would bring its own, older tables (Debian's PCRE2 10.42 has 14.0), and
// split every character assigned since differently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dsv4/status.h"

namespace dsv4::tokenizer {

struct RegexProgram;

class Regex {
 public:
  // `literal`: the pattern is a plain string, not a regular expression.
  static Result<Regex> compile(const std::string& pattern, bool literal);
  // The matches of `text`, left to right, as [begin, end) byte offsets, the way the onig crate's
  // find_iter yields them: after a match the search resumes at its end; an empty match is kept
  // unless it ends where the previous match ended, in which case the search steps one character
  // on. Text that is not valid UTF-8 is an error, and so is a pattern that backtracks more
  // than kMaxStepsPerByte steps a byte of text (as Oniguruma's retry limit stops it).
  Result<std::vector<std::pair<size_t, size_t>>> find_all(std::string_view text) const;

  static constexpr size_t kMaxStepsPerByte = 1000;

 private:
  std::shared_ptr<const RegexProgram> program_;  // immutable once compiled; copies share it
};

}  // namespace dsv4::tokenizer
