// encode_chat against DeepSeek's own encoder (tests/chat/golden), byte for byte, and its
// refusals; tokenize_chat_prompt adds no post-processor tokens.
#include <gtest/gtest.h>

#include <fstream>

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

TEST(ChatEncoderTest, TokenizesThePromptWithoutThePostProcessorsTokens) {
  // The small test tokenizer knows the begin-of-sentence token (id 266); a post-processor that
  // puts it first, as DeepSeek's tokenizer.json may, must not double the one the prompt holds.
  std::ifstream in(testing::source_path("tests/tokenizer/fixtures/small_tokenizer.json"));
  format::OrderedJson json = format::OrderedJson::parse(in);
  json["post_processor"] = format::OrderedJson::parse(R"({
      "type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<｜begin▁of▁sentence｜>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}}],
      "special_tokens": {"<｜begin▁of▁sentence｜>": {"id": "<｜begin▁of▁sentence｜>",
                                                      "ids": [266],
                                                      "tokens": ["<｜begin▁of▁sentence｜>"]}}})");
  Result<Tokenizer> tokenizer = Tokenizer::parse(json.dump(), "tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  ASSERT_EQ(tokenizer->encode("hello").value(), (std::vector<int64_t>{266, 259}));
  EXPECT_EQ(tokenize_chat_prompt(*tokenizer, "<｜begin▁of▁sentence｜>hello").value(),
            (std::vector<int64_t>{266, 259}));
  // What the prompt holds twice, the model sees twice: nothing is stripped.
  EXPECT_EQ(tokenize_chat_prompt(*tokenizer, "<｜begin▁of▁sentence｜><｜begin▁of▁sentence｜>hello")
                .value(),
            (std::vector<int64_t>{266, 266, 259}));
}

}  // namespace
}  // namespace dsv4
