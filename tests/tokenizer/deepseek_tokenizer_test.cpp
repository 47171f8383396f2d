// dsv4::Tokenizer on DeepSeek's own tokenizer.json (DeepSeek-V3's; V3.x and V4 share its
// vocabulary, merges and pre-tokenizer), which is not committed: DSV4_DEEPSEEK_TOKENIZER names it,
// and the tests skip without it. Its ids against Hugging Face tokenizers':
// reference_tokenizers_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reference_tokenizer.h"

namespace dsv4 {
namespace {

using format::Json;
using Ids = std::vector<int64_t>;

constexpr const char* kEnv = "DSV4_DEEPSEEK_TOKENIZER";

const Tokenizer* deepseek() { return testing::reference_tokenizer(kEnv); }

#define DSV4_NEED_DEEPSEEK(tok)                                                  \
  const Tokenizer* tok = deepseek();                                             \
  if (tok == nullptr) {                                                          \
    GTEST_SKIP() << kEnv                                                         \
                 << " does not name DeepSeek's tokenizer.json (e.g. a V3 or V4 " \
                    "checkpoint's), so it is not checked";                       \
  }

Ids encode(const Tokenizer& tok, const std::string& text, bool add_special_tokens = false) {
  Result<Ids> ids = tok.encode(text, add_special_tokens);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : Ids{};
}

TEST(DeepseekTokenizerTest, KnowsItsSpecialTokens) {
  DSV4_NEED_DEEPSEEK(tok);
  EXPECT_EQ(tok->token_id("<｜begin▁of▁sentence｜>"), 0);
  EXPECT_EQ(tok->token_id("<｜end▁of▁sentence｜>"), 1);
  EXPECT_EQ(tok->token_id("<｜User｜>"), 128803);
  EXPECT_EQ(tok->token_id("<｜Assistant｜>"), 128804);
  EXPECT_EQ(tok->token_id("<｜tool▁calls▁begin｜>"), 128806);
}

// Worked out from the file: "Hello" is vocabulary id 19923 and "!" id 3; " world" is one
// piece (an optional non-letter, then letters) whose byte-level form "Ġworld" is id 2058.
TEST(DeepseekTokenizerTest, EncodesAsTheMergesImply) {
  DSV4_NEED_DEEPSEEK(tok);
  EXPECT_EQ(encode(*tok, "Hello!"), (Ids{19923, 3}));
  EXPECT_EQ(encode(*tok, "Hello world"), (Ids{19923, 2058}));
  // The post_processor is ByteLevel: adding special tokens adds none (transformers' BOS comes
  // from tokenizer_config.json, not from this file).
  EXPECT_EQ(encode(*tok, "Hello!", true), (Ids{19923, 3}));
}

// What dsv4 generate --prompt does: special tokens written in the prompt become their ids, the
// text between them is encoded on its own, and the output decodes back to the prompt.
TEST(DeepseekTokenizerTest, EncodesAPromptAsGenerateWrites) {
  DSV4_NEED_DEEPSEEK(tok);
  const std::string prompt = "<｜begin▁of▁sentence｜><｜User｜>Hello!<｜Assistant｜>";
  const Ids ids = encode(*tok, prompt, true);
  EXPECT_EQ(ids, (Ids{0, 128803, 19923, 3, 128804}));
  const Result<std::string> back = tok->decode(ids);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, prompt);
}

TEST(DeepseekTokenizerTest, EveryCorpusTextDecodesToItself) {
  DSV4_NEED_DEEPSEEK(tok);
  for (const Json& line : testing::read_json_lines("tests/tokenizer/fixtures/corpus.jsonl")) {
    const std::string text = line.get<std::string>();
    const Result<std::string> back = tok->decode(encode(*tok, text));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, text);
  }
}

}  // namespace
}  // namespace dsv4
