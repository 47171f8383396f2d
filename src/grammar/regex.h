// Regular expressions to byte-level expressions: the practical subset structured outputs meet
// (vLLM's guided regex, JSON Schema's `pattern`): literals, `.`, classes with ranges and
// negation, \d \w \s and their negations, escapes (\n \t \xHH \uHHHH ...), groups (capturing,
// (?:...) and named, all matched alike), alternation and the quantifiers * + ? {m} {m,} {m,n}
// (lazy ones too: laziness changes which match a search picks, not which strings match).
// Anchors ^ and $ only at the pattern's ends. Backreferences, lookaround, word boundaries and
// Unicode property classes are refused by name: no finite automaton matches the first two.
#pragma once

#include <string_view>

#include "dsv4/status.h"
#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"

namespace dsv4::grammar {

// How the characters a pattern matches are written out.
enum class TextEncoding {
  kRaw,         // as their UTF-8 bytes (a regex response format)
  kJsonString,  // as inside a JSON string: `"`, `\` and control characters escaped
  // As kJsonString, and ｜ (U+FF5C, which every DSML tag holds) as \uff5c: a JSON value inside a
  // DSML tool call (chat/tool_call_grammar.h) then never holds a tag.
  kDsmlJsonString,
};

// Which strings match: the whole string (vLLM's regex, as outlines compiles it), or any string
// that contains a match (JSON Schema's `pattern`, ECMA-262's search) unless ^ / $ pin its ends.
enum class RegexMatch { kWhole, kSearch };

// The longest repeat count `{m,n}` may give.
constexpr int32_t kMaxRegexRepeat = 1000;

Result<Expr> regex_expr(std::string_view pattern, TextEncoding encoding, RegexMatch match);
// The characters of `ranges` (normalized) as `encoding` writes them, one character each.
Expr chars_expr(const std::vector<CodepointRange>& ranges, TextEncoding encoding);

}  // namespace dsv4::grammar
