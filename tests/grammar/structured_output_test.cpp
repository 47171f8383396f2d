// The public side (dsv4/structured_output.h) on a real tokenizer.json (the small test one: all
// 256 bytes and a few merges): token-level walks under a compiled format end at eos with text
// that parses and matches; eos is allowed exactly when the text is complete; what the compiler
// does not support is refused by name.
#include "dsv4/structured_output.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "dsv4/tokenizer.h"
#include "format/json.h"
#include "testing/random.h"
#include "testing/source_dir.h"

namespace dsv4 {
namespace {

constexpr int64_t kVocab = 300;  // past the tokenizer's ids: those are never allowed

const Tokenizer& small_tokenizer() {
  static const Tokenizer t =
      Tokenizer::load(testing::source_path("tests/tokenizer/fixtures/small_tokenizer.json"))
          .value();
  return t;
}

bool allowed(const std::vector<uint32_t>& bits, int64_t t) {
  return (bits[static_cast<size_t>(t / 32)] >> (t % 32)) & 1;
}

// A random reply under `c`: ends when eos is drawn; empty optional when it runs past 4000 tokens.
std::optional<std::string> random_reply(const TokenConstraint& c, int64_t eos,
                                        testing::SeededRng& rng) {
  std::unique_ptr<TokenConstraintState> s = c.start();
  std::vector<int64_t> ids;
  std::vector<uint32_t> bits((kVocab + 31) / 32);
  for (int step = 0; step < 4000; ++step) {
    s->allowed_tokens(bits);
    std::vector<int64_t> options;
    for (int64_t t = 0; t < kVocab; ++t) {
      if (allowed(bits, t)) options.push_back(t);
    }
    EXPECT_FALSE(options.empty());
    if (options.empty()) return std::nullopt;
    // eos half the time it is allowed; past 40 tokens prefer the closing bytes.
    int64_t pick =
        options[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(options.size()) - 1))];
    if (allowed(bits, eos) && rng.uniform(0, 1) < 0.5) pick = eos;
    if (step > 40) {
      for (const char closing : {'"', '}', ']'}) {
        const std::optional<int64_t> id = small_tokenizer().token_id(std::string(1, closing));
        if (id && allowed(bits, *id) && rng.uniform(0, 1) < 0.5) pick = *id;
      }
    }
    EXPECT_TRUE(s->advance(pick));
    if (pick == eos) return small_tokenizer().decode(ids).value();
    ids.push_back(pick);
  }
  return std::nullopt;
}

TEST(StructuredOutputTest, RepliesEndAtEosAndMatch) {
  testing::SeededRng rng;
  const Tokenizer& tok = small_tokenizer();
  const int64_t eos = *tok.token_id("<｜User｜>");
  const ConstraintVocabulary vocab = ConstraintVocabulary::build(tok, kVocab, eos);
  const auto schema = vocab.compile({OutputFormat::Kind::kJsonSchema,
                                     R"({"type": "object", "properties": {"a": {"type": "array",
                                        "items": {"enum": ["x", 2]}, "maxItems": 3},
                                        "b": {"type": "boolean"}}, "required": ["a", "b"],
                                        "additionalProperties": false})"});
  ASSERT_TRUE(schema.ok()) << schema.status().to_string();
  const auto object = vocab.compile({OutputFormat::Kind::kJsonObject, ""});
  ASSERT_TRUE(object.ok());
  const auto regex = vocab.compile({OutputFormat::Kind::kRegex, "(yes|no), [0-9]{2,3}!"});
  ASSERT_TRUE(regex.ok());
  int n_done = 0;
  for (int i = 0; i < 30; ++i) {
    if (auto text = random_reply(**schema, eos, rng)) {
      ++n_done;
      const format::Json doc = format::Json::parse(*text);
      EXPECT_TRUE(doc.is_object() && doc.size() == 2 && doc["a"].is_array() &&
                  doc["a"].size() <= 3 && doc["b"].is_boolean())
          << *text;
      for (const format::Json& x : doc["a"]) EXPECT_TRUE(x == "x" || x == 2) << *text;
    }
    if (auto text = random_reply(**object, eos, rng)) {
      EXPECT_TRUE(format::Json::accept(*text) && format::Json::parse(*text).is_object()) << *text;
    }
    if (auto text = random_reply(**regex, eos, rng)) {
      EXPECT_TRUE(std::regex_match(*text, std::regex("(yes|no), [0-9]{2,3}!"))) << *text;
    }
  }
  EXPECT_GE(n_done, 20);
}

TEST(StructuredOutputTest, EosOnlyWhenComplete) {
  const Tokenizer& tok = small_tokenizer();
  const int64_t eos = *tok.token_id("<｜User｜>");
  const ConstraintVocabulary vocab = ConstraintVocabulary::build(tok, kVocab, eos);
  const auto c = vocab.compile({OutputFormat::Kind::kRegex, "ab?"});
  ASSERT_TRUE(c.ok());
  auto s = (*c)->start();
  std::vector<uint32_t> bits((kVocab + 31) / 32);
  s->allowed_tokens(bits);
  EXPECT_FALSE(allowed(bits, eos));
  EXPECT_FALSE(s->advance(eos));
  EXPECT_FALSE(s->advance(*tok.token_id("b")));
  ASSERT_TRUE(s->advance(*tok.token_id("a")));
  s->allowed_tokens(bits);
  EXPECT_TRUE(allowed(bits, eos));
  EXPECT_TRUE(allowed(bits, *tok.token_id("b")));
  EXPECT_FALSE(allowed(bits, *tok.token_id("a")));
  EXPECT_FALSE(allowed(bits, *tok.token_id("<｜begin▁of▁sentence｜>")));
  EXPECT_FALSE(allowed(bits, kVocab - 1));
}

TEST(StructuredOutputTest, UnsupportedIsRefusedByName) {
  const ConstraintVocabulary vocab = ConstraintVocabulary::build(small_tokenizer(), kVocab, 1);
  const auto c = vocab.compile(
      {OutputFormat::Kind::kJsonSchema,
       R"({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}})"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("\"maximum\" at #/properties/n"), std::string::npos)
      << c.status().to_string();
  EXPECT_EQ(vocab.compile({OutputFormat::Kind::kJsonSchema, "{"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(vocab.compile({OutputFormat::Kind::kRegex, "a(?=b)"}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dsv4
