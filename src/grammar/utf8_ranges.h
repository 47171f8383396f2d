// Sets of Unicode code points as byte-level expressions: the automaton reads UTF-8 bytes, while
// a regex class or a JSON string's characters speak of code points.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace dsv4::grammar {

struct CodepointRange {
  uint32_t lo, hi;  // inclusive
};

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Sorted, merged, surrogates (U+D800..U+DFFF, not encodable in UTF-8) removed.
std::vector<CodepointRange> normalize(std::vector<CodepointRange> ranges);
// Everything in [0, kMaxCodepoint] that `ranges` (normalized) leaves out, surrogates excluded.
std::vector<CodepointRange> complement(const std::vector<CodepointRange>& ranges);
// The UTF-8 encodings of exactly the code points in `ranges` (normalized), as an alternation of
// byte-range sequences (the split Rust's regex-syntax Utf8Sequences makes: each sequence's bytes
// vary independently in their ranges).
Expr utf8_expr(const std::vector<CodepointRange>& ranges);
// The UTF-8 bytes of one code point.
std::string utf8_encode(uint32_t codepoint);

}  // namespace dsv4::grammar
