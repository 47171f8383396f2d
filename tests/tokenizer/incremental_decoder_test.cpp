// IncrementalDecoder on the small tokenizer (tests/tokenizer/fixtures), whose ids 0-255 are the
// 256 bytes: characters split across tokens are held until whole, bytes that never make one
// come out as decode()'s U+FFFD, and the pieces always concatenate to decode() of all the ids.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dsv4/tokenizer.h"
#include "testing/source_dir.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace dsv4 {
namespace {

Tokenizer small_tokenizer() {
  return Tokenizer::load(testing::source_path("tests/tokenizer/fixtures/small_tokenizer.json"))
      .value();
}

// The pieces of `ids`, one per add() and the last from finish().
std::vector<std::string> pieces(const Tokenizer& tokenizer, const std::vector<int64_t>& ids) {
  IncrementalDecoder decoder(tokenizer);
  std::vector<std::string> out;
  for (const int64_t id : ids) out.push_back(decoder.add(id).value());
  out.push_back(decoder.finish().value());
  return out;
}

// The id of each byte of `text` (no merges).
std::vector<int64_t> byte_ids(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int64_t> ids;
  for (const char c : text) {
    const std::optional<int64_t> id = tokenizer.token_id(tokenizer::bytes_to_chars({&c, 1}));
    EXPECT_TRUE(id.has_value());
    ids.push_back(id.value_or(0));
  }
  return ids;
}

TEST(IncrementalDecoderTest, HoldsACharacterUntilItsLastByte) {
  const Tokenizer tokenizer = small_tokenizer();
  // "a€b" byte by byte: € is E2 82 AC.
  EXPECT_EQ(pieces(tokenizer, byte_ids(tokenizer,
                                       "a\xE2\x82\xAC"
                                       "b")),
            (std::vector<std::string>{"a", "", "", "\xE2\x82\xAC", "b", ""}));
  // Cut short after two of its bytes: one U+FFFD at the end, as decode() gives.
  EXPECT_EQ(pieces(tokenizer, byte_ids(tokenizer, "a\xE2\x82")),
            (std::vector<std::string>{"a", "", "", "\xEF\xBF\xBD"}));
  // A stray continuation byte is U+FFFD for good once the next character is whole.
  EXPECT_EQ(pieces(tokenizer, byte_ids(tokenizer, "\x82z")),
            (std::vector<std::string>{"", "\xEF\xBF\xBDz", ""}));
  // Merged and added tokens go out whole.
  const std::vector<int64_t> hello = tokenizer.encode("<｜User｜>hello world", false).value();
  std::string joined;
  for (const std::string& piece : pieces(tokenizer, hello)) joined += piece;
  EXPECT_EQ(joined, "<｜User｜>hello world");
}

TEST(IncrementalDecoderTest, RandomIdsConcatenateToDecodeInValidPieces) {
  const Tokenizer tokenizer = small_tokenizer();
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> ids(std::uniform_int_distribution<size_t>(0, 40)(rng));
    for (int64_t& id : ids) id = std::uniform_int_distribution<int64_t>(0, 267)(rng);
    std::string joined;
    for (const std::string& piece : pieces(tokenizer, ids)) {
      EXPECT_EQ(tokenizer::to_valid_utf8(piece), piece) << "a piece splits a character";
      joined += piece;
    }
    EXPECT_EQ(joined, tokenizer.decode(ids).value()) << "trial " << trial;
  }
}

TEST(IncrementalDecoderTest, AnUnknownIdIsAnError) {
  const Tokenizer tokenizer = small_tokenizer();
  IncrementalDecoder decoder(tokenizer);
  const Result<std::string> bad = decoder.add(600);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("600"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace dsv4
