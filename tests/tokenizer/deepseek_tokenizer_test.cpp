// dsv4::Tokenizer on DeepSeek's own tokenizer.json (DeepSeek-V3's; V3.x and V4 share its
// vocabulary, merges and pre-tokenizer), which is not committed: DSV4_DEEPSEEK_TOKENIZER names it,
// and the tests skip without it. The reference ids come from Hugging Face tokenizers
// (scripts/tokenizer_reference.py over fixtures/corpus.jsonl, written to
// fixtures/deepseek_reference.jsonl); that comparison skips while the file is absent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "dsv4/tokenizer.h"
#include "format/json.h"
#include "testing/source_dir.h"

namespace dsv4 {
namespace {

using format::Json;
using Ids = std::vector<int64_t>;

constexpr const char* kEnv = "DSV4_DEEPSEEK_TOKENIZER";

// The tokenizer, loaded once for all tests (it takes about a second); null without the file.
const Tokenizer* deepseek() {
  static const std::unique_ptr<const Result<Tokenizer>> loaded = []() {
    const char* path = std::getenv(kEnv);
    if (path == nullptr || *path == '\0') return std::unique_ptr<const Result<Tokenizer>>();
    return std::make_unique<const Result<Tokenizer>>(Tokenizer::load(path));
  }();
  if (loaded == nullptr) return nullptr;
  EXPECT_TRUE(loaded->ok()) << loaded->status().to_string();
  return loaded->ok() ? &loaded->value() : nullptr;
}

#define DSV4_NEED_DEEPSEEK(tok)                                                  \
  const Tokenizer* tok = deepseek();                                             \
  if (tok == nullptr) {                                                          \
    GTEST_SKIP() << kEnv                                                         \
                 << " does not name DeepSeek's tokenizer.json (e.g. a V3 or V4 " \
                    "checkpoint's), so it is not checked";                       \
  }

std::vector<Json> read_lines(const std::string& relative) {
  std::vector<Json> lines;
  std::ifstream in(testing::source_path(relative));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(Json::parse(line));
  }
  return lines;
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
  for (const Json& line : read_lines("tests/tokenizer/fixtures/corpus.jsonl")) {
    const std::string text = line.get<std::string>();
    const Result<std::string> back = tok->decode(encode(*tok, text));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, text);
  }
}

TEST(DeepseekTokenizerTest, MatchesHuggingFaceTokenizers) {
  DSV4_NEED_DEEPSEEK(tok);
  const std::vector<Json> reference =
      read_lines("tests/tokenizer/fixtures/deepseek_reference.jsonl");
  if (reference.empty()) {
    GTEST_SKIP() << "tests/tokenizer/fixtures/deepseek_reference.jsonl is absent: write it with "
                    "scripts/tokenizer_reference.py (needs Python's tokenizers)";
  }
  const std::vector<Json> corpus = read_lines("tests/tokenizer/fixtures/corpus.jsonl");
  ASSERT_TRUE(reference[0].contains("meta"));
  ASSERT_EQ(reference.size(), corpus.size() + 1) << "the reference is of another corpus";
  for (size_t i = 0; i < corpus.size(); ++i) {
    const Json& ref = reference[i + 1];
    const std::string text = ref["text"].get<std::string>();
    ASSERT_EQ(text, corpus[i].get<std::string>()) << "line " << i + 1;
    SCOPED_TRACE("corpus line " + std::to_string(i + 1) + ": " + Json(text).dump());
    const Ids ids = encode(*tok, text);
    EXPECT_EQ(ids, ref["ids"].get<Ids>());
    EXPECT_EQ(encode(*tok, text, true), ref["ids_special"].get<Ids>());
    const Result<std::string> decoded = tok->decode(ids);
    ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
    EXPECT_EQ(*decoded, ref["decoded"].get<std::string>());
  }
}

}  // namespace
}  // namespace dsv4
