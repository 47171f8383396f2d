// parse_chat_reply against DeepSeek's own parser (tests/chat/golden), then what it does beyond
// it (replies cut short) and each malformed reply it refuses.
#include <gtest/gtest.h>

#include "dsv4/chat.h"
#include "golden_cases.h"

namespace dsv4 {
namespace {

ChatReply parse_ok(std::string_view text, ThinkingMode thinking) {
  Result<ChatReply> reply = parse_chat_reply(text, thinking);
  EXPECT_TRUE(reply.ok()) << reply.status().to_string();
  return reply.ok() ? *reply : ChatReply{};
}

void expect_refused(std::string_view text, ThinkingMode thinking, const std::string& message) {
  Result<ChatReply> reply = parse_chat_reply(text, thinking);
  ASSERT_FALSE(reply.ok()) << text;
  EXPECT_NE(reply.status().message().find(message), std::string::npos)
      << reply.status().to_string();
}

TEST(ChatReplyTest, MatchesDeepSeeksParserOnEveryGoldenCase) {
  const format::OrderedJson golden = testing::chat_golden();
  ASSERT_GE(golden["parse"].size(), 8u);
  for (const auto& c : golden["parse"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ChatReply reply =
        parse_ok(c["text"].get<std::string>(),
                 c["thinking"].get<bool>() ? ThinkingMode::kThinking : ThinkingMode::kChat);
    const format::OrderedJson& want = c["reply"];
    EXPECT_EQ(reply.reasoning_content, want["reasoning_content"].get<std::string>());
    EXPECT_EQ(reply.content, want["content"].get<std::string>());
    ASSERT_EQ(reply.tool_calls.size(), want["tool_calls"].size());
    for (size_t i = 0; i < reply.tool_calls.size(); ++i) {
      const ToolCall call = testing::golden_tool_call(want["tool_calls"][i]);
      EXPECT_EQ(reply.tool_calls[i].name, call.name);
      EXPECT_EQ(reply.tool_calls[i].arguments, call.arguments);
    }
  }
}

TEST(ChatReplyTest, RoundTripsTheToolCallsTheEncoderWrites) {
  const format::OrderedJson golden = testing::chat_golden();
  for (const auto& c : golden["encode"]) {
    const Conversation chat = testing::golden_conversation(c);
    const ChatMessage& last = chat.messages.back();
    if (last.role != ChatRole::kAssistant) continue;
    // The last assistant turn of the prompt is a finished reply, as the model would write it.
    const std::string prompt = c["prompt"].get<std::string>();
    const std::string opened = chat.thinking == ThinkingMode::kThinking ? "<｜Assistant｜><think>"
                                                                        : "<｜Assistant｜></think>";
    const size_t start = prompt.rfind(opened);
    ASSERT_NE(start, std::string::npos);
    const ChatReply reply =
        parse_ok(std::string_view(prompt).substr(start + opened.size()), chat.thinking);
    EXPECT_EQ(reply.content, last.content);
    if (chat.thinking == ThinkingMode::kThinking) {
      EXPECT_EQ(reply.reasoning_content, last.reasoning_content);
    }
  }
}

TEST(ChatReplyTest, ReadsRepliesCutShort) {
  EXPECT_EQ(parse_ok("still thinking", ThinkingMode::kThinking).reasoning_content,
            "still thinking");
  const ChatReply partial = parse_ok("done</think>The ans", ThinkingMode::kThinking);
  EXPECT_EQ(partial.reasoning_content, "done");
  EXPECT_EQ(partial.content, "The ans");
  EXPECT_EQ(parse_ok("plain", ThinkingMode::kChat).content, "plain");
  expect_refused("x\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n", ThinkingMode::kChat,
                 "tool calls: expected");
}

TEST(ChatReplyTest, RefusesMalformedReplies) {
  const ThinkingMode chat = ThinkingMode::kChat;
  expect_refused("no close<｜end▁of▁sentence｜>", ThinkingMode::kThinking, "without closing");
  expect_refused("\n\n<｜DSML｜tool_calls>\n</｜DSML｜tool_calls></think>", ThinkingMode::kThinking,
                 "before the reasoning was closed");
  expect_refused("a<｜end▁of▁sentence｜>b", chat, "unexpected text at byte 1");
  expect_refused("a<think>b<｜end▁of▁sentence｜>", chat,
                 "special token <think> inside the content");
  expect_refused("r<｜begin▁of▁sentence｜></think>c", ThinkingMode::kThinking,
                 "inside the reasoning");
  const std::string block = "\n\n<｜DSML｜tool_calls>\n";
  const std::string invoke = "<｜DSML｜invoke name=\"f\">\n";
  const std::string p = "<｜DSML｜parameter name=\"a\" string=\"true\">1</｜DSML｜parameter>\n";
  const std::string close = "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  EXPECT_EQ(parse_ok(block + invoke + p + close, chat).tool_calls[0].arguments, "{\"a\": \"1\"}");
  expect_refused(block + invoke + p + p + close, chat, "parameter \"a\" given twice");
  expect_refused(block + "<｜DSML｜invoke nam=\"f\">\n" + p + close, chat, "name=");
  expect_refused(block + invoke +
                     "<｜DSML｜parameter name=\"a\" string=\"maybe\">1</｜DSML｜parameter>\n" +
                     close,
                 chat, "string=\"true\" or string=\"false\"");
  expect_refused(block + invoke + p + close + "trailing", chat, "unexpected text");
  expect_refused(block + "junk" + invoke + p + close, chat, "expected \">\\n\"");
}

}  // namespace
}  // namespace dsv4
