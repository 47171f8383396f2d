// The Split patterns' matcher: Oniguruma's reading of the syntax tokenizer.json patterns use,
// worked out by hand from Oniguruma's documentation (doc/RE) and the onig crate's find_iter;
// the Unicode classes of version 16.0; the refusal of what it does not implement; a search that
// would backtrack without end stopping with an error. The DeepSeek, Llama 3 and GPT-4o patterns
// are checked against Hugging Face tokenizers itself in reference_tokenizers_test.cpp.
#include "tokenizer/regex.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dsv4::tokenizer {
namespace {

using Texts = std::vector<std::string>;

Texts matches(const std::string& pattern, const std::string& text) {
  Result<Regex> re = Regex::compile(pattern, false);
  EXPECT_TRUE(re.ok()) << re.status().to_string();
  if (!re.ok()) return {};
  auto found = re->find_all(text);
  EXPECT_TRUE(found.ok()) << found.status().to_string();
  if (!found.ok()) return {};
  Texts out;
  for (const auto& [begin, end] : *found) out.push_back(text.substr(begin, end - begin));
  return out;
}

std::string refusal(const std::string& pattern) {
  Result<Regex> re = Regex::compile(pattern, false);
  EXPECT_FALSE(re.ok()) << pattern;
  return re.ok() ? std::string() : re.status().to_string();
}

TEST(RegexTest, AlternationAndRepetitionInOnigurumasOrder) {
  EXPECT_EQ(matches("a|ab", "abab"), (Texts{"a", "a"}));  // leftmost alternative, not longest
  EXPECT_EQ(matches("ab|a", "abab"), (Texts{"ab", "ab"}));
  EXPECT_EQ(matches("a{2,3}", "aaaaaaa"), (Texts{"aaa", "aaa"}));
  EXPECT_EQ(matches("a{2,3}?", "aaaaa"), (Texts{"aa", "aa"}));
  EXPECT_EQ(matches("a{,2}b", "aaab"), (Texts{"aab"}));
  EXPECT_EQ(matches("a{2}", "aaaaa"), (Texts{"aa", "aa"}));
  EXPECT_EQ(matches("a{x}", "a{x}"), (Texts{"a{x}"}));  // not an interval: '{' is a literal
  EXPECT_EQ(matches("x*?y", "xxy"), (Texts{"xxy"}));
  EXPECT_EQ(matches("(?:ab)+|c", "ababcab"), (Texts{"abab", "c", "ab"}));
  EXPECT_EQ(matches("\\s+(?!\\S)|\\s+", "a   b  "), (Texts{"  ", " ", "  "}));
  EXPECT_EQ(matches("a(?=b)", "acab"), (Texts{"a"}));
  EXPECT_EQ(matches(".+", "ab\ncd"), (Texts{"ab", "cd"}));  // '.' stops at a newline
  EXPECT_EQ(matches("[]a]+", "]a]b"), (Texts{"]a]"}));      // ']' first is a member
  EXPECT_EQ(matches("[a-c-]+", "a-cd"), (Texts{"a-c"}));
  EXPECT_EQ(matches("\\x{1F600}|\\u00e9|\\x41", "😀éA"), (Texts{"😀", "é", "A"}));
}

TEST(RegexTest, UnicodeClassesAreVersion16) {
  // U+1FAE8 (Unicode 15.0) is So, so " ?[\p{P}\p{S}]+" takes the space with it (the issue's
  // example); U+31350 (CJK Extension H) is a letter, U+11F00 (Kawi) a mark.
  EXPECT_EQ(matches(" ?[\\p{P}\\p{S}]+|\\p{L}+| ", "I feel \U0001FAE8 today"),
            (Texts{"I", " ", "feel", " \U0001FAE8", " ", "today"}));
  EXPECT_EQ(matches("[\\p{L}\\p{M}]+", "a\U00031350\U00011F00b c"),
            (Texts{"a\U00031350\U00011F00b", "c"}));
  EXPECT_EQ(matches("\\p{^L}+", "ab12cd"), (Texts{"12"}));
  EXPECT_EQ(matches("\\P{L}+", "ab12cd"), (Texts{"12"}));
  EXPECT_EQ(matches("[^\\P{N}]+", "a١٢b"), (Texts{"١٢"}));  // Arabic-Indic digits are Nd
  EXPECT_EQ(matches("\\p{Lu}\\p{Ll}+|\\p{Nd}", "Hello 7"), (Texts{"Hello", "7"}));
  EXPECT_EQ(matches("\\d+", "x٣4"), (Texts{"٣4"}));
  EXPECT_EQ(matches("\\p{Other_Symbol}", "\U0001CC00"), (Texts{"\U0001CC00"}));
  // \s is White_Space: U+180E is not (since Unicode 6.3), U+0085 is.
  EXPECT_EQ(matches("\\s", "\u180E\u0085"), (Texts{"\u0085"}));
}

TEST(RegexTest, IgnoreCaseOverAsciiFoldsAsOnigurumaDoes) {
  // Llama 3's contractions: (?i) makes 's match 'S, and 'ſ (U+017F folds to s); K (U+212A,
  // Kelvin) folds to k.
  EXPECT_EQ(matches("(?i:'s|'t)", "it's IT'S it'ſ IT'T"), (Texts{"'s", "'S", "'ſ", "'T"}));
  EXPECT_EQ(matches("(?i:k)+", "kK\u212A"), (Texts{"kK\u212A"}));
  EXPECT_EQ(matches("(?i:a)b", "Ab AB"), (Texts{"Ab"}));  // the flag ends with the group
}

TEST(RegexTest, RefusesWhatItDoesNotReadAsOnigurumaDoes) {
  EXPECT_NE(refusal("\\w+").find("\\w is not supported"), std::string::npos);
  EXPECT_NE(refusal("\\bx").find("\\b is not supported"), std::string::npos);
  EXPECT_NE(refusal("(?<=a)b").find("lookbehind"), std::string::npos);
  EXPECT_NE(refusal("a++").find("possessive"), std::string::npos);
  EXPECT_NE(refusal("^a").find("anchor"), std::string::npos);
  EXPECT_NE(refusal("(?i:ss)").find("multi-character fold"), std::string::npos);
  EXPECT_NE(refusal("(?i:é)").find("beyond ASCII"), std::string::npos);
  EXPECT_NE(refusal("(?i)a").find("without ':'"), std::string::npos);
  EXPECT_NE(refusal("\\p{Han}").find("\\p{Han}"), std::string::npos);
  EXPECT_NE(refusal("[[:alpha:]]").find("nested class"), std::string::npos);
  EXPECT_NE(refusal("(a*)*").find("can match empty"), std::string::npos);
  EXPECT_NE(refusal("((").find("does not compile at offset"), std::string::npos);
  EXPECT_NE(refusal("a)").find("unmatched )"), std::string::npos);
  EXPECT_NE(refusal("[z-a]").find("range out of order"), std::string::npos);
  EXPECT_NE(refusal("*a").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(refusal("a{3,2}").find("m < n"), std::string::npos);
  EXPECT_NE(refusal("a{50000}{50000}").find("quantifier on a quantifier"), std::string::npos);
  EXPECT_NE(refusal("(?:a{1000}){1000}").find("instructions"), std::string::npos);
}

// A counted repeat of what emits nothing (an empty group, a{0}) is that nothing once; nested,
// copying it the counts' product of times would not finish.
TEST(RegexTest, NestedCountsOfNothingCompileAtOnce) {
  EXPECT_EQ(matches("(?:(?:){100000}){100000}b", "ab"), (Texts{"b"}));
  EXPECT_EQ(matches("(?:(?:a{0}){0,100000}){100000}b", "ab"), (Texts{"b"}));
}

TEST(RegexTest, EndlessBacktrackingIsAnErrorNotAHang) {
  Result<Regex> re = Regex::compile("(?:a|a)*b", false);
  ASSERT_TRUE(re.ok()) << re.status().to_string();
  const auto found = re->find_all(std::string(40, 'a'));
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().to_string().find("backtracks more than"), std::string::npos);
}

TEST(RegexTest, RefusesTextThatIsNotUtf8) {
  Result<Regex> re = Regex::compile("a", false);
  ASSERT_TRUE(re.ok());
  EXPECT_FALSE(re->find_all("a\xFF").ok());
}

}  // namespace
}  // namespace dsv4::tokenizer
