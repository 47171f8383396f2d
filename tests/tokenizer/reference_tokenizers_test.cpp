// dsv4::Tokenizer against Hugging Face tokenizers 0.23.2 on three tokenizer.json files whose
// Split patterns use the regex syntax and Unicode classes differently (DeepSeek-V3's, which V3.x
// and V4 share: three Splits with \p{N}{1,3}, a CJK range, \p{L}\p{M}\p{P}\p{S}; Llama 3's: one
// Split with (?i:'s|...) and \s+(?!\S); GPT-4o's: \p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M} classes, Removed
// with invert), over two corpora: fixtures/corpus.jsonl (232 texts of every kind) and
// fixtures/unicode16_corpus.jsonl (every character assigned in Unicode 15.0-16.0, block by
// block, in context, and random texts of all classes; scripts/make_unicode_corpus.mjs). The
// reference ids are fixtures/<name>_reference.jsonl and <name>_unicode16_reference.jsonl, written
// by scripts/tokenizer_reference.py with tokenizers 0.23.2; each names the sha256 of the
// tokenizer.json it was made with, which scripts/fetch_reference_tokenizers.sh checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reference_tokenizer.h"

namespace dsv4 {
namespace {

using format::Json;
using Ids = std::vector<int64_t>;

struct Reference {
  const char* env;      // names the tokenizer.json
  const char* fixture;  // fixtures/<fixture>.jsonl holds the reference ids
  const char* corpus;   // fixtures/<corpus>.jsonl holds the texts
};

class ReferenceTokenizersTest : public ::testing::TestWithParam<Reference> {};

TEST_P(ReferenceTokenizersTest, MatchesHuggingFaceTokenizers) {
  const Reference& ref = GetParam();
  const Tokenizer* tok = testing::reference_tokenizer(ref.env);
  if (tok == nullptr) {
    GTEST_SKIP() << ref.env << " does not name the tokenizer.json (see "
                 << "scripts/fetch_reference_tokenizers.sh), so it is not checked";
  }
  const std::string dir = "tests/tokenizer/fixtures/";
  const std::vector<Json> expected = testing::read_json_lines(dir + ref.fixture + ".jsonl");
  const std::vector<Json> corpus = testing::read_json_lines(dir + ref.corpus + ".jsonl");
  ASSERT_FALSE(expected.empty()) << ref.fixture;
  ASSERT_TRUE(expected[0].contains("meta"));
  ASSERT_EQ(expected.size(), corpus.size() + 1) << "the reference is of another corpus";
  size_t n_differ = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const Json& line = expected[i + 1];
    const std::string text = line["text"].get<std::string>();
    ASSERT_EQ(text, corpus[i].get<std::string>()) << "line " << i + 1;
    SCOPED_TRACE(std::string(ref.corpus) + " line " + std::to_string(i + 1) + ": " +
                 Json(text).dump());
    const Result<Ids> ids = tok->encode(text, false);
    const Result<Ids> ids_special = tok->encode(text, true);
    ASSERT_TRUE(ids.ok() && ids_special.ok()) << ids.status().to_string();
    EXPECT_EQ(*ids, line["ids"].get<Ids>());
    EXPECT_EQ(*ids_special, line["ids_special"].get<Ids>());
    const Result<std::string> decoded = tok->decode(*ids);
    ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
    EXPECT_EQ(*decoded, line["decoded"].get<std::string>());
    n_differ += *ids != line["ids"].get<Ids>();
  }
  EXPECT_EQ(n_differ, 0u) << "of " << corpus.size() << " texts";
}

INSTANTIATE_TEST_SUITE_P(
    Files, ReferenceTokenizersTest,
    ::testing::Values(
        Reference{"DSV4_DEEPSEEK_TOKENIZER", "deepseek_reference", "corpus"},
        Reference{"DSV4_DEEPSEEK_TOKENIZER", "deepseek_unicode16_reference", "unicode16_corpus"},
        Reference{"DSV4_LLAMA3_TOKENIZER", "llama3_reference", "corpus"},
        Reference{"DSV4_LLAMA3_TOKENIZER", "llama3_unicode16_reference", "unicode16_corpus"},
        Reference{"DSV4_GPT4O_TOKENIZER", "gpt4o_reference", "corpus"},
        Reference{"DSV4_GPT4O_TOKENIZER", "gpt4o_unicode16_reference", "unicode16_corpus"}),
    [](const ::testing::TestParamInfo<Reference>& param) {
      return std::string(param.param.fixture);
    });

}  // namespace
}  // namespace dsv4
