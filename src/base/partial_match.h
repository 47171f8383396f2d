// Streaming text past a pattern that may arrive in pieces (a chat reply's markers, a request's
// stop strings): how much of the text's end must be held back because the next piece may
// complete the pattern there.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace dsv4 {

// The length of the longest end of `text` that `pattern` starts with, shorter than the pattern (a
// whole occurrence is find()'s to see). 0 for an empty pattern.
inline size_t partial_match_at_end(std::string_view text, std::string_view pattern) {
  if (pattern.empty()) return 0;
  for (size_t n = std::min(text.size(), pattern.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == pattern.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace dsv4
