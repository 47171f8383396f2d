// dsv4::Tokenizer on a small byte-level BPE tokenizer.json built here (DeepSeek's structure:
// digit and word Splits, then ByteLevel; added special tokens). Expected ids are worked out by
// hand in the comments from the merge ranks, not by running the code under test.
#include "dsv4/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "format/json.h"
#include "testing/random.h"
#include "testing/source_dir.h"
#include "testing/temp_dir.h"

namespace dsv4 {
namespace {

using format::Json;
using Ids = std::vector<int64_t>;

constexpr const char* kBos = "<｜begin▁of▁sentence｜>";
constexpr const char* kUser = "<｜User｜>";

// tests/tokenizer/fixtures/small_tokenizer.json (scripts/make_small_tokenizer.py writes it).
// Byte b is token id b (its byte-level character); the merges, in rank order, make
//   256 "he" (h e)   257 "ll" (l l)   258 "hell" (he ll)   259 "hello" (hell o)
//   260 "Ġw" (Ġ w)   261 "or" (o r)   262 "Ġwor" (Ġw or)   263 "12" (1 2)
//   264 "bc" (b c)   265 "ab" (a b)
// and the added tokens are 266 <｜begin▁of▁sentence｜> and 267 <｜User｜>.
Json small_tokenizer() {
  std::ifstream in(testing::source_path("tests/tokenizer/fixtures/small_tokenizer.json"));
  EXPECT_TRUE(in.good());
  return Json::parse(in);
}

Tokenizer load(const Json& json) {
  Result<Tokenizer> tok = Tokenizer::parse(json.dump(), "tokenizer.json");
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return std::move(tok).value();
}

Ids encode(const Tokenizer& tok, const std::string& text) {
  Result<Ids> ids = tok.encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : Ids{};
}

TEST(TokenizerTest, MergesByRankWithinEachPiece) {
  const Tokenizer tok = load(small_tokenizer());
  // "hello" | " world" (the word Split); " world" is "Ġworld" after ByteLevel.
  // hello: (h,e) r0 -> he l l o; (l,l) r1 -> he ll o; (he,ll) r2; (hell,o) r3 -> [259].
  // Ġworld: (Ġ,w) r4 -> Ġw o r l d; (o,r) r5; (Ġw,or) r6 -> Ġwor l d -> [262, 'l', 'd'].
  EXPECT_EQ(encode(tok, "hello world"), (Ids{259, 262, 'l', 'd'}));
  // The lower rank first: (b,c) r8 beats (a,b) r9, so "abc" is a | bc, never ab | c.
  EXPECT_EQ(encode(tok, "abc"), (Ids{'a', 264}));
}

TEST(TokenizerTest, SplitsNeverMergeAcrossPieces) {
  const Tokenizer tok = load(small_tokenizer());
  // Digits in runs of at most three: "123" | "45"; (1,2) r7 -> [263, '3'], then '4', '5'.
  EXPECT_EQ(encode(tok, "12345"), (Ids{263, '3', '4', '5'}));
  // "h" | "e" would merge as one piece; a digit between them cuts: h | 1 | e.
  EXPECT_EQ(encode(tok, "h1e"), (Ids{'h', '1', 'e'}));
  // "é" is a letter piece (bytes C3 A9, each its own byte-level character, ids 195, 169);
  // "\n" a whitespace piece (byte 10).
  EXPECT_EQ(encode(tok, "\xC3\xA9\n"), (Ids{195, 169, 10}));
}

TEST(TokenizerTest, AddedTokensMatchLiterallyFirst) {
  const Tokenizer tok = load(small_tokenizer());
  EXPECT_EQ(encode(tok, std::string(kBos) + kUser + "abc"), (Ids{266, 267, 'a', 264}));
  // Text on both sides of an added token is encoded on its own.
  EXPECT_EQ(encode(tok, std::string("he") + kUser + "llo"), (Ids{256, 267, 257, 'o'}));
  EXPECT_EQ(tok.token_id(kBos), 266);
  EXPECT_EQ(tok.token_id("hello"), 259);
  EXPECT_FALSE(tok.token_id("nope").has_value());
}

Json added_token(int64_t id, const std::string& content, bool strip, bool normalized) {
  return {{"id", id},        {"content", content},       {"single_word", false},  {"lstrip", strip},
          {"rstrip", strip}, {"normalized", normalized}, {"special", !normalized}};
}

TEST(TokenizerTest, AddedTokensStripAndMatchInTwoPasses) {
  Json json = small_tokenizer();
  json["added_tokens"].push_back(added_token(268, "<m>", true, false));
  json["added_tokens"].push_back(added_token(269, "x<m", false, true));
  const Tokenizer tok = load(json);
  // lstrip and rstrip take the spaces around <m> into it; without them each space is the
  // byte-level Ġ, id 32.
  EXPECT_EQ(encode(tok, "a  <m>  b"), (Ids{'a', 268, 'b'}));
  EXPECT_EQ(encode(tok, "a  <｜User｜>"), (Ids{'a', 32, 32, 267}));
  // "x<m" (normalized) starts further left than "<m>", but the tokens with normalized = false
  // are cut out first, leaving "x".
  EXPECT_EQ(encode(tok, "x<m>"), (Ids{'x', 268}));
  EXPECT_EQ(encode(tok, "x<mz"), (Ids{269, 'z'}));
}

TEST(TokenizerTest, DecodesACutCharacterAsReplacement) {
  const Tokenizer tok = load(small_tokenizer());
  // "é" is bytes C3 A9 (ids 195, 169); its first byte alone is not UTF-8.
  EXPECT_EQ(tok.decode({'a', 195}).value(), "a\xEF\xBF\xBD");
  EXPECT_EQ(tok.decode({195, 169}).value(), "\xC3\xA9");
}

TEST(TokenizerTest, DecodesWhatItEncodes) {
  const Tokenizer tok = load(small_tokenizer());
  const std::vector<std::string> parts = {"hello",
                                          " world",
                                          "abc",
                                          "12345",
                                          " ",
                                          "\n",
                                          "\t",
                                          "\xC3\xA9",
                                          "\xE4\xB8\xAD\xE6\x96\x87",  // 中文
                                          "\xF0\x9F\x98\x80",          // 😀
                                          "!?",
                                          "  ",
                                          kBos,
                                          kUser,
                                          "x"};
  testing::SeededRng rng;
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    const int n = static_cast<int>(rng.uniform_int(0, 12));
    for (int i = 0; i < n; ++i) {
      text +=
          parts[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(parts.size()) - 1))];
    }
    const Ids ids = encode(tok, text);
    const Result<std::string> back = tok.decode(ids);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, text);
  }
}

TEST(TokenizerTest, TemplateAddsItsSpecialTokens) {
  Json json = small_tokenizer();
  json["post_processor"] = Json::parse(R"({
      "type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [266], "tokens": ["<s>"]},
                         "</s>": {"id": "</s>", "ids": [267], "tokens": ["</s>"]}}})");
  EXPECT_EQ(encode(load(json), "hello"), (Ids{266, 259, 267}));
}

// An id the tokenizer does not have would come out of every encode and fail every decode.
TEST(TokenizerTest, RefusesATemplateIdItDoesNotHave) {
  for (const Json& id : {Json(-1), Json(299), Json(std::numeric_limits<uint64_t>::max())}) {
    SCOPED_TRACE(id.dump());
    Json json = small_tokenizer();
    json["post_processor"] = Json::parse(R"({
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {"<s>": {"id": "<s>", "tokens": ["<s>"]}}})");
    json["post_processor"]["special_tokens"]["<s>"]["ids"] = {id};
    const Result<Tokenizer> tok = Tokenizer::parse(json.dump(), "tokenizer.json");
    ASSERT_FALSE(tok.ok());
    const std::string expected = "post_processor.special_tokens[\"<s>\"].ids: " + id.dump() +
                                 " is not a token of this tokenizer";
    EXPECT_NE(tok.status().message().find(expected), std::string::npos) << tok.status().message();
  }
}

TEST(TokenizerTest, RefusesUnknownIdsWhenDecoding) {
  const Tokenizer tok = load(small_tokenizer());
  for (int64_t bad : {int64_t{-1}, int64_t{299}, int64_t{1} << 40}) {
    const Result<std::string> text = tok.decode({'a', bad});
    ASSERT_FALSE(text.ok());
    EXPECT_NE(text.status().message().find("token id " + std::to_string(bad)), std::string::npos)
        << text.status().message();
  }
}

struct BadTokenizer {
  const char* label;
  const char* patch;  // JSON merged into small_tokenizer() (null erases a key)
  std::string expected;
};

TEST(TokenizerTest, RefusesWhatItDoesNotImplementByName) {
  const std::vector<BadTokenizer> cases = {
      {"normalizer", R"({"normalizer": {"type": "NFC"}})", "normalizer"},
      {"model type", R"({"model": {"type": "WordPiece"}})", "model.type must be \"BPE\""},
      {"dropout", R"({"model": {"dropout": 0.5}})", "model.dropout = 0.5 is not supported"},
      {"byte fallback", R"({"model": {"byte_fallback": true}})", "model.byte_fallback"},
      {"merge of unknown", R"({"model": {"merges": ["h e", "q z"]}})", "model.merges[1] needs \"q"},
      {"bad merge", R"({"model": {"merges": ["he"]}})", "model.merges[0] is neither"},
      {"split behaviour",
       R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"},
                             "behavior": "Glued", "invert": false}})",
       "pre_tokenizer.behavior \"Glued\" is not supported"},
      {"split invert",
       R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"},
                             "behavior": "Isolated"}})",
       "pre_tokenizer.invert must be true or false"},
      {"oniguruma \\w", R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"},
                                            "behavior": "Isolated", "invert": false}})",
       "\\w is not supported"},
      {"bad regex",
       R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(("},
                             "behavior": "Isolated", "invert": false}})",
       "does not compile"},
      {"pre type", R"({"pre_tokenizer": {"type": "Metaspace"}})", "\"Metaspace\" is not supported"},
      {"decoder", R"({"decoder": {"type": "WordPiece"}})", "decoder"},
      {"single word",
       R"({"added_tokens": [{"id": 266, "content": "x", "single_word": true, "lstrip": false,
                             "rstrip": false, "normalized": false, "special": true}]})",
       "added_tokens[0].single_word true is not supported"},
      {"added flags", R"({"added_tokens": [{"id": 266, "content": "x"}]})",
       "added_tokens[0].single_word must be true or false"},
      // tokenizers gives a token the vocabulary has its vocabulary id, and the others the ids
      // after the vocabulary in file order, whatever the file says.
      {"added id of vocab",
       R"({"added_tokens": [{"id": 97, "content": "b", "single_word": false, "lstrip": false,
                             "rstrip": false, "normalized": false, "special": true}]})",
       "added_tokens[0] \"b\" has id 97 in the file, but tokenizers gives it 98"},
      {"added id past vocab",
       R"({"added_tokens": [{"id": 300, "content": "xyz", "single_word": false, "lstrip": false,
                             "rstrip": false, "normalized": false, "special": true}]})",
       "added_tokens[0] \"xyz\" has id 300 in the file, but tokenizers gives it 266"},
      {"wrong json type", R"({"model": {"fuse_unk": "yes"}})", "type must be boolean"},
      {"padding", R"({"padding": {"strategy": {"Fixed": 8}}})", "padding"},
      {"truncation", R"({"truncation": {"max_length": 8}})", "truncation"},
  };
  for (const BadTokenizer& bad : cases) {
    SCOPED_TRACE(bad.label);
    Json json = small_tokenizer();
    json.merge_patch(Json::parse(bad.patch));
    const Result<Tokenizer> tok = Tokenizer::parse(json.dump(), "tokenizer.json");
    ASSERT_FALSE(tok.ok());
    EXPECT_NE(tok.status().message().find(bad.expected), std::string::npos)
        << tok.status().message();
    EXPECT_EQ(tok.status().message().rfind("tokenizer.json: ", 0), 0u) << tok.status().message();
  }
}

TEST(TokenizerTest, LoadNamesTheFile) {
  testing::TempDir dir;
  const Result<Tokenizer> missing = Tokenizer::load(dir.file("tokenizer.json"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tokenizer.json"), std::string::npos);
  const Result<Tokenizer> garbage = Tokenizer::parse("{\"model\": ", "tok.json");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("tok.json"), std::string::npos);
}

}  // namespace
}  // namespace dsv4
