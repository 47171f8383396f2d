// The regex compiler against std::regex (ECMAScript, whole match) on random strings: an
// independent implementation of the same syntax.
#include "grammar/regex.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar_testing.h"

namespace dsv4::grammar {
namespace {

using testing::matches;

struct Case {
  const char* pattern;
  const char* alphabet;  // random strings are drawn from these characters
};

// ASCII patterns (std::regex works on bytes, so it agrees with UTF-8 matching only there).
const Case kCases[] = {
    {"abc", "abc"},
    {"a|bc|", "abc"},
    {"(ab)*c?", "abc"},
    {"a+b{2,3}", "ab"},
    {"[a-c]{2}x?", "abcx"},
    {"[^ab]+", "abc\n"},
    {"\\d{1,3}(\\.\\d+)?", "0123.a"},
    {"\\w+@\\w+\\.com", "ab_@.com"},
    {"(?:x|y){0,4}z", "xyz"},
    {"a.c", "abc\n"},
    {"[\\s]*\\S", " \ta\n"},
    {"(a|ab)(c|bcd)(d*)", "abcd"},
    {"\\(\\)\\[\\]\\{\\}\\.\\*", "()[]{}.*"},
    {"[-a]+[a-]", "a-b"},
    {"(a{2}){2,}", "a"},
    {"x*?y+?", "xy"},
    {"[0-9]{4}-[01][0-9]", "0129-"},
    {"\\D+\\W?\\S*", "a1_ -\n"},
    {"[\\n\\t\\r\\f\\v]+\\n?", "\n\t\r\f\va"},
};

std::string random_string(dsv4::testing::SeededRng& rng, const std::string& alphabet) {
  const int64_t n = rng.uniform_int(0, 8);
  std::string s;
  for (int64_t i = 0; i < n; ++i) {
    s += alphabet[static_cast<size_t>(
        rng.uniform_int(0, static_cast<int64_t>(alphabet.size()) - 1))];
  }
  return s;
}

// `check(case, grammar, std::regex)` on each case, its pattern compiled both ways.
template <typename Check>
void for_each_case(Check check) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.pattern);
    Result<Grammar> g = regex_grammar(c.pattern);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    check(c, *g, std::regex(c.pattern, std::regex::ECMAScript));
  }
}

TEST(RegexTest, AgreesWithStdRegexOnRandomStrings) {
  dsv4::testing::SeededRng rng;
  for_each_case([&](const Case& c, const Grammar& g, const std::regex& reference) {
    for (int i = 0; i < 400; ++i) {
      const std::string s = random_string(rng, c.alphabet);
      EXPECT_EQ(matches(g, s), std::regex_match(s, reference)) << "\"" << s << "\"";
    }
  });
}

TEST(RegexTest, RandomWalksMatchStdRegex) {
  dsv4::testing::SeededRng rng;
  for_each_case([&](const Case&, const Grammar& g, const std::regex& reference) {
    for (int i = 0; i < 50; ++i) {
      std::string s;
      if (!testing::random_document(g, rng, s)) continue;
      // std::regex reads bytes: it agrees with code point matching on ASCII only.
      if (std::any_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) >= 0x80; })) {
        continue;
      }
      EXPECT_TRUE(std::regex_match(s, reference)) << "\"" << s << "\"";
    }
  });
}

TEST(RegexTest, MatchesUtf8ByCodepoint) {
  Result<Grammar> g = regex_grammar("[а-я]+.é");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE(matches(*g, "привет€é"));
  EXPECT_TRUE(matches(*g, "яxé"));
  EXPECT_FALSE(matches(*g, "ёxé"));         // U+0451 is past я (U+044F)
  EXPECT_FALSE(matches(*g, "я\xE2\x82é"));  // a cut character is no character
  EXPECT_FALSE(matches(*g, "я\né"));
  Result<Grammar> any = regex_grammar("[^a]");
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(matches(*any, "\xF0\x9F\x98\x80"));  // U+1F600
  EXPECT_FALSE(matches(*any, "\xED\xA0\x80"));     // a surrogate is not UTF-8
  EXPECT_FALSE(matches(*any, "\xC0\xAF"));         // overlong
}

// \s is ECMA-262's WhiteSpace and LineTerminator: tab, LF, VT, FF, CR, U+FEFF, U+2028, U+2029
// and the Space_Separator (Zs) characters of Unicode 16, listed here by hand; \S the rest. U+0085
// and U+180E, white space elsewhere or once, are not.
TEST(RegexTest, SpaceIsEcmaScriptWhiteSpace) {
  const std::vector<std::pair<uint32_t, uint32_t>> spaces = {
      {0x9, 0xD},       {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
      {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  auto utf8 = [](uint32_t cp) {
    if (cp < 0x80) return std::string(1, static_cast<char>(cp));
    const int n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    std::string s(static_cast<size_t>(n), '\0');
    for (int i = n - 1; i > 0; --i, cp >>= 6) {
      s[static_cast<size_t>(i)] = static_cast<char>(0x80 | (cp & 0x3F));  // 10xxxxxx
    }
    s[0] = static_cast<char>(((0xFF00 >> n) & 0xFF) | cp);  // 110xxxxx, 1110xxxx or 11110xxx
    return s;
  };
  Result<Grammar> space = regex_grammar("\\s");
  Result<Grammar> other = regex_grammar("\\S");
  ASSERT_TRUE(space.ok() && other.ok());
  for (uint32_t cp = 0; cp <= 0x10FFFF; cp += cp < 0x10000 ? 1 : 0x1001) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const bool is_space = std::any_of(spaces.begin(), spaces.end(), [&](const auto& r) {
      return cp >= r.first && cp <= r.second;
    });
    const std::string text = utf8(cp);
    EXPECT_EQ(matches(*space, text), is_space) << std::hex << cp;
    EXPECT_EQ(matches(*other, text), !is_space) << std::hex << cp;
  }
}

// `pattern` as the one rule of a grammar.
Result<Grammar> pattern_grammar(std::string_view pattern, TextEncoding encoding, RegexMatch match) {
  DSV4_ASSIGN_OR_RETURN(Expr e, regex_expr(pattern, encoding, match));
  GrammarBuilder b;
  const int32_t r = b.add_rule("pattern");
  b.define(r, std::move(e));
  return b.build(r);
}

TEST(RegexTest, JsonStringEncodingEscapes) {
  Result<Grammar> g = pattern_grammar("a\"\\\\\\n.", TextEncoding::kJsonString, RegexMatch::kWhole);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE(matches(*g, "a\\\"\\\\\\nx"));
  EXPECT_TRUE(matches(*g, "a\\\"\\\\\\n\\t"));
  EXPECT_FALSE(matches(*g, "a\"\\\\\\nx"));     // a raw quote would end the string
  EXPECT_FALSE(matches(*g, "a\\\"\\\\\\n\t"));  // a raw tab is not allowed in JSON
}

TEST(RegexTest, SearchSemanticsUnlessAnchored) {
  for (const auto& [match, text, expected] :
       std::vector<std::tuple<RegexMatch, const char*, bool>>{{RegexMatch::kSearch, "xxabyy", true},
                                                              {RegexMatch::kWhole, "xxabyy", false},
                                                              {RegexMatch::kWhole, "ab", true}}) {
    Result<Grammar> g = pattern_grammar("ab", TextEncoding::kRaw, match);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(matches(*g, text), expected) << text;
  }
  Result<Grammar> g = pattern_grammar("^ab$", TextEncoding::kRaw, RegexMatch::kSearch);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(matches(*g, "ab"));
  EXPECT_FALSE(matches(*g, "xab"));
}

TEST(RegexTest, RefusesWhatNoAutomatonMatchesByName) {
  for (const auto& [pattern, named] : std::vector<std::pair<const char*, const char*>>{
           {"(a)\\1", "backreferences"},
           {"a(?=b)", "lookaround"},
           {"a(?<!b)", "lookaround"},
           {"\\bword", "word boundaries"},
           {"\\p{L}", "Unicode property"},
           {"a^b", "anchor"},
           {"a{2000}", "repeat count"},
           {"(ab", "missing ')'"},
           {"ab)", "unbalanced"},
           {"[ab", "missing ']'"},
           {"*a", "nothing to repeat"},
           {"a**", "quantifier after a quantifier"},
           {"[z-a]", "out of order"},
           {"\\q", "unknown escape"},
       }) {
    Result<Grammar> g = regex_grammar(pattern);
    ASSERT_FALSE(g.ok()) << pattern;
    EXPECT_NE(g.status().message().find(named), std::string::npos) << g.status().to_string();
  }
}

}  // namespace
}  // namespace dsv4::grammar
