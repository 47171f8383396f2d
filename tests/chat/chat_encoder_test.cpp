// encode_chat against DeepSeek's own encoder (tests/chat/golden), byte for byte, and its
// refusals; tokenize_chat_prompt keeps one begin-of-sentence token.
#include <gtest/gtest.h>

#include "dsv4/chat.h"
#include "golden_cases.h"

namespace dsv4 {
namespace {

TEST(ChatEncoderTest, MatchesDeepSeeksEncoderOnEveryGoldenCase) {
  const format::OrderedJson golden = testing::chat_golden();
  ASSERT_GE(golden["encode"].size(), 28u);
  for (const auto& c : golden["encode"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    Result<std::string> prompt = encode_chat(testing::golden_conversation(c));
    ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
    EXPECT_EQ(*prompt, c["prompt"].get<std::string>());
  }
}

TEST(ChatEncoderTest, OpensTheAssistantTurnAfterTheLastUserMessage) {
  Conversation chat;
  chat.messages = {{ChatRole::kUser, "1+1=?", "", {}, ""}};
  EXPECT_EQ(encode_chat(chat).value(),
            "<｜begin▁of▁sentence｜><｜User｜>1+1=?<｜Assistant｜></think>");
  chat.thinking = ThinkingMode::kThinking;
  EXPECT_EQ(encode_chat(chat).value(),
            "<｜begin▁of▁sentence｜><｜User｜>1+1=?<｜Assistant｜><think>");
}

TEST(ChatEncoderTest, RefusesToolSchemasAndArgumentsThatAreNotJsonObjects) {
  Conversation chat;
  chat.messages = {{ChatRole::kUser, "hi", "", {}, ""}};
  chat.tools = {"{\"name\": \"f\""};
  Result<std::string> bad_schema = encode_chat(chat);
  ASSERT_FALSE(bad_schema.ok());
  EXPECT_NE(bad_schema.status().message().find("tools[0]: invalid JSON"), std::string::npos)
      << bad_schema.status().to_string();

  chat.tools.clear();
  chat.messages.push_back({ChatRole::kAssistant, "", "", {{"c", "f", "[1, 2]"}}, ""});
  Result<std::string> bad_arguments = encode_chat(chat);
  ASSERT_FALSE(bad_arguments.ok());
  EXPECT_NE(bad_arguments.status().message().find(
                "tool call \"f\": arguments must be a JSON object, got [1, 2]"),
            std::string::npos)
      << bad_arguments.status().to_string();
}

TEST(ChatEncoderTest, TokenizesThePromptWithOneBeginOfSentence) {
  // The small test tokenizer knows the begin-of-sentence token (id 266) and has no
  // post-processor; one that adds the token itself is simulated by writing it twice.
  Result<Tokenizer> tokenizer =
      Tokenizer::load(testing::source_path("tests/tokenizer/fixtures/small_tokenizer.json"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  Result<std::vector<int64_t>> once =
      tokenize_chat_prompt(*tokenizer, "<｜begin▁of▁sentence｜>hello");
  ASSERT_TRUE(once.ok()) << once.status().to_string();
  EXPECT_EQ(*once, (std::vector<int64_t>{266, 259}));
  EXPECT_EQ(tokenize_chat_prompt(*tokenizer, "<｜begin▁of▁sentence｜><｜begin▁of▁sentence｜>hello")
                .value(),
            *once);
}

}  // namespace
}  // namespace dsv4
