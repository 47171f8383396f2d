// The byte-level alphabet against its definition (GPT-2's bytes_to_unicode), written out here
// independently: printable Latin-1 stands for itself, the 68 others take U+0100.. in order.
#include "tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "testing/random.h"

namespace dsv4::tokenizer {
namespace {

TEST(ByteLevelTest, EveryByteHasItsOwnCharacter) {
  std::set<std::string> seen;
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    const std::string c = bytes_to_chars(std::string(1, static_cast<char>(b)));
    EXPECT_TRUE(seen.insert(c).second) << "byte " << b;
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    // U+0000..U+00FF in UTF-8: one byte below 0x80, else C2/C3 + one.
    std::string expected;
    if (printable) {
      expected = b < 0x80 ? std::string(1, static_cast<char>(b))
                          : std::string{static_cast<char>(0xC0 | (b >> 6)),
                                        static_cast<char>(0x80 | (b & 0x3F))};
    } else {
      const int cp = 256 + shifted++;
      expected = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
    EXPECT_EQ(c, expected) << "byte " << b;
  }
  EXPECT_EQ(shifted, 68);
  EXPECT_EQ(bytes_to_chars(" "), "\xC4\xA0");   // 'Ġ', the space of GPT-2 vocabularies
  EXPECT_EQ(bytes_to_chars("\n"), "\xC4\x8A");  // 'Ċ'
}

TEST(ByteLevelTest, RandomBytesComeBack) {
  testing::SeededRng rng;
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(static_cast<size_t>(rng.uniform_int(0, 64)), '\0');
    for (char& b : bytes) b = static_cast<char>(rng.uniform_int(0, 255));
    const Result<std::string> back = chars_to_bytes(bytes_to_chars(bytes));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, bytes);
  }
}

TEST(ByteLevelTest, RefusesACharacterThatStandsForNoByte) {
  const Result<std::string> bytes = chars_to_bytes("ok\xE4\xB8\xAD");  // '中'
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("stands for no byte"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::tokenizer
