// PreTokenizer's Split behaviours and its regex dialect, against the cases Hugging Face
// tokenizers' own tests (pre_tokenizers/split.rs) give: the pattern finds words and punctuation,
// and with invert the spaces between them are what the behaviour acts on.
#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dsv4::tokenizer {
namespace {

using format::Json;
using Pieces = std::vector<std::string>;

Pieces split(const std::string& behavior, bool invert, const std::string& pattern,
             const std::string& text) {
  Json pre = {{"type", "Split"},
              {"pattern", {{"Regex", pattern}}},
              {"behavior", behavior},
              {"invert", invert}};
  Result<PreTokenizer> tok = PreTokenizer::from_json(pre);
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  if (!tok.ok()) return {};
  Result<Pieces> pieces = tok->split(text);
  EXPECT_TRUE(pieces.ok()) << pieces.status().to_string();
  return pieces.ok() ? *pieces : Pieces{};
}

TEST(PreTokenizerTest, SplitBehavioursAsTokenizersDefinesThem) {
  const std::string words = "[A-Za-z]+|[^A-Za-z\\s]+", text = "How are you doing?";
  EXPECT_EQ(split("Removed", true, words, text), (Pieces{"How", "are", "you", "doing", "?"}));
  EXPECT_EQ(split("Isolated", true, words, text),
            (Pieces{"How", " ", "are", " ", "you", " ", "doing", "?"}));
  EXPECT_EQ(split("MergedWithPrevious", true, words, text),
            (Pieces{"How ", "are ", "you ", "doing", "?"}));
  EXPECT_EQ(split("MergedWithNext", true, words, text),
            (Pieces{"How", " are", " you", " doing", "?"}));
  // The non-matches "doing" and "?" are adjacent, so Contiguous joins them.
  EXPECT_EQ(split("Contiguous", true, words, text),
            (Pieces{"How", " ", "are", " ", "you", " ", "doing?"}));
  // Without invert, Removed drops the matches themselves.
  EXPECT_EQ(split("Removed", false, " ", "a b  c"), (Pieces{"a", "b", "c"}));
}

TEST(PreTokenizerTest, EmptyMatchesAreSteppedOverAsOnigDoes) {
  // x* matches empty before "a", "b" and at the end, and "xx" in between: the pieces are the
  // stretches between, and no empty piece survives.
  EXPECT_EQ(split("Isolated", false, "x*", "axxb"), (Pieces{"a", "xx", "b"}));
  EXPECT_EQ(split("Removed", false, "x*", "axxb"), (Pieces{"a", "b"}));
}

TEST(PreTokenizerTest, WhiteSpaceIsOnigurumasNotPcre2s) {
  // U+180E (Mongolian vowel separator) is not White_Space since Unicode 6.3; PCRE2's \s still
  // matches it, Oniguruma's does not. U+3000 is White_Space in both.
  EXPECT_EQ(split("Removed", false, "\\s+", "a\u180Eb c\u3000d"), (Pieces{"a\u180Eb", "c", "d"}));
  EXPECT_EQ(split("Removed", false, "\\S+", "a\u180Eb c"), (Pieces{" "}));
  EXPECT_EQ(split("Isolated", false, "[^\\s]+", "x\u2028y"), (Pieces{"x", "\u2028", "y"}));
}

}  // namespace
}  // namespace dsv4::tokenizer
