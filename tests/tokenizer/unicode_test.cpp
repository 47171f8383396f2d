// The Unicode 16.0 property tables and their two-stage lookup: the lookup against a binary
// search of the generated ranges for every code point, and characters whose properties are
// read off the Unicode Character Database by hand (several assigned only in 15.0-16.0, which
// older tables, such as PCRE2 10.42's 14.0, call unassigned).
#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace dsv4::tokenizer::unicode {
namespace {

GeneralCategory category_by_search(char32_t cp) {
  const auto it = std::upper_bound(kCategoryRanges.begin(), kCategoryRanges.end(), cp,
                                   [](char32_t c, const CategoryRange& r) { return c < r.first; });
  if (it == kCategoryRanges.begin() || std::prev(it)->last < cp) return GeneralCategory::kCn;
  return std::prev(it)->category;
}

TEST(UnicodeTest, TablesAreSortedAndDisjoint) {
  EXPECT_EQ(std::string(kVersion), "16.0.0");
  for (size_t i = 1; i < kCategoryRanges.size(); ++i) {
    EXPECT_LE(kCategoryRanges[i].first, kCategoryRanges[i].last);
    EXPECT_GT(kCategoryRanges[i].first, kCategoryRanges[i - 1].last) << "range " << i;
  }
  EXPECT_LE(kCategoryRanges.back().last, kMaxCodePoint);
}

TEST(UnicodeTest, LookupAgreesWithTheRangesEverywhere) {
  const PropertyTable& table = PropertyTable::get();
  size_t n_white = 0;
  for (char32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
    ASSERT_EQ(table.category(cp), category_by_search(cp)) << std::hex << "U+" << uint32_t{cp};
    n_white += table.white_space(cp);
  }
  size_t n_listed = 0;
  for (const CodePointRange& r : kWhiteSpaceRanges) n_listed += r.last - r.first + 1;
  EXPECT_EQ(n_white, n_listed);
  EXPECT_EQ(n_white, 25u);  // White_Space has had 25 members since Unicode 6.3
}

TEST(UnicodeTest, KnowsCharactersFromTheDatabase) {
  const PropertyTable& t = PropertyTable::get();
  using enum GeneralCategory;
  EXPECT_EQ(t.category(U'A'), kLu);
  EXPECT_EQ(t.category(U'7'), kNd);
  EXPECT_EQ(t.category(0x0378), kCn);  // unassigned in Greek
  EXPECT_EQ(t.category(0xD800), kCs);
  EXPECT_EQ(t.category(0xE000), kCo);
  EXPECT_EQ(t.category(0x180E), kCf);  // Mongolian vowel separator: not White_Space
  EXPECT_FALSE(t.white_space(0x180E));
  EXPECT_TRUE(t.white_space(0x0085));
  EXPECT_TRUE(t.white_space(0x3000));
  // Unicode 15.0
  EXPECT_EQ(t.category(0x1FAE8), kSo);  // shaking face
  EXPECT_EQ(t.category(0x1FA77), kSo);  // pink heart
  EXPECT_EQ(t.category(0x11F00), kMn);  // Kawi sign candrabindu
  EXPECT_EQ(t.category(0x0CF3), kMc);   // Kannada sign combining anusvara above right
  EXPECT_EQ(t.category(0x31350), kLo);  // CJK Extension H
  EXPECT_EQ(t.category(0x1E4D0), kLo);  // Nag Mundari
  // Unicode 15.1
  EXPECT_EQ(t.category(0x2EBF0), kLo);  // CJK Extension I
  // Unicode 16.0
  EXPECT_EQ(t.category(0x105C0), kLo);  // Todhri
  EXPECT_EQ(t.category(0x16D40), kLm);  // Kirat Rai
  EXPECT_EQ(t.category(0x1CC00), kSo);  // Symbols for Legacy Computing Supplement
}

}  // namespace
}  // namespace dsv4::tokenizer::unicode
