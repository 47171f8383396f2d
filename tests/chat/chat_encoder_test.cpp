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
  ASSERT_GE(golden["encode_json"].size(), 6u);
  for (const char* section : {"encode", "encode_json"}) {
    for (const auto& c : golden[section]) {
      SCOPED_TRACE(c["name"].get<std::string>());
      Result<std::string> prompt = encode_chat(testing::golden_conversation(c));
      ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
      EXPECT_EQ(*prompt, c["prompt"].get<std::string>());
    }
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
  EXPECT_NE(bad_schema.status().message().find(
                "tools[0]: not JSON as Python reads it: Expecting ',' delimiter at byte 12"),
            std::string::npos)
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

// A forced tool call: the prompt ends where the encoder would have written that call (checked
// against the conversation with the call in it), and the reply read after the opening is the
// call; a forced call needs chat mode, tools, and the named one among them.
TEST(ChatEncoderTest, AForcedToolCallOpensTheReplyAsTheCallWouldBeWritten) {
  Conversation chat;
  chat.messages = {{ChatRole::kUser, "weather in Lima?", "", {}, ""}};
  chat.tools = {R"({"name": "get_weather", "description": "d", "parameters": {"type": "object"}})",
                R"({"name": "search", "description": "s", "parameters": {"type": "object"}})"};
  Conversation answered = chat;
  answered.messages.push_back({ChatRole::kAssistant,
                               "",
                               "",
                               {{"c1", "get_weather", R"({"city": "Lima", "days": 3})"}},
                               ""});
  const std::string written = encode_chat(answered).value();
  for (const std::string forced : {"get_weather", ""}) {
    SCOPED_TRACE("forced \"" + forced + "\"");
    chat.forced_tool = forced;
    const std::string prompt = encode_chat(chat).value();
    EXPECT_TRUE(prompt.ends_with(reply_opening(chat)));
    ASSERT_TRUE(written.starts_with(prompt)) << prompt << "\n" << written;
    ASSERT_TRUE(written.ends_with(kEndOfSentence));
    const std::string generated =
        written.substr(prompt.size(), written.size() - prompt.size() - kEndOfSentence.size());
    const ChatReply reply =
        read_chat_reply(reply_opening(chat) + generated, true, ThinkingMode::kChat);
    ASSERT_EQ(reply.tool_calls.size(), 1u);
    EXPECT_EQ(reply.tool_calls[0].name, "get_weather");
    EXPECT_EQ(format::parse_json(reply.tool_calls[0].arguments, "a").value(),
              format::parse_json(R"({"city": "Lima", "days": 3})", "b").value());
    EXPECT_EQ(reply.content, "");
  }
  chat.forced_tool = "get_time";
  EXPECT_NE(encode_chat(chat).status().message().find("\"get_time\" is not among the tools"),
            std::string::npos);
  chat.forced_tool = "search";
  chat.thinking = ThinkingMode::kThinking;
  EXPECT_NE(encode_chat(chat).status().message().find("needs thinking off"), std::string::npos);
  chat.thinking = ThinkingMode::kChat;
  chat.tools.clear();
  EXPECT_NE(encode_chat(chat).status().message().find("needs tools"), std::string::npos);
}

// A prefill ends the prompt right after the opened assistant turn, and the reply read after it
// is the continuation; it needs chat mode, no forced tool and a user's turn before it.
TEST(ChatEncoderTest, APrefillOpensTheReplyAndIsNotPartOfItsAnswer) {
  Conversation chat;
  chat.messages = {{ChatRole::kUser, "hi", "", {}, ""}};
  const std::string opened = encode_chat(chat).value();
  chat.prefill = "Hello";
  EXPECT_EQ(encode_chat(chat).value(), opened + "Hello");
  EXPECT_EQ(reply_opening(chat), "Hello");
  const ChatReply reply = read_reply(chat, " there", true);
  EXPECT_EQ(reply.content, " there");
  EXPECT_EQ(read_reply(chat, "", false).content, "");

  Conversation thinking = chat;
  thinking.thinking = ThinkingMode::kThinking;
  EXPECT_NE(encode_chat(thinking).status().message().find("a prefill needs thinking off"),
            std::string::npos);
  Conversation forced = chat;
  forced.tools = {R"({"name": "f", "parameters": {"type": "object"}})"};
  forced.forced_tool = "f";
  EXPECT_NE(encode_chat(forced).status().message().find("a prefill and a forced tool call"),
            std::string::npos);
  Conversation answered = chat;
  answered.messages.push_back({ChatRole::kAssistant, "done", "", {}, ""});
  EXPECT_NE(encode_chat(answered).status().message().find("continues the reply to a user's"),
            std::string::npos);
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
