// ChatStream: DeepSeek's golden replies (tests/chat/golden, the "parse" cases) fed a character
// at a time and whole: the reasoning and content deltas, with finish() on parse_chat_reply's
// reading, concatenate to that reading; markers are never sent, and a marker's start is held.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dsv4/chat.h"
#include "format/json.h"
#include "testing/source_dir.h"
#include "tokenizer/utf8.h"

namespace dsv4 {
namespace {

// The deltas of `pieces` and finish()'s rest, joined; finish()'s reply is the whole text's.
ChatDelta stream(const std::vector<std::string>& pieces, ThinkingMode thinking, bool finished) {
  ChatStream s(thinking);
  ChatDelta joined;
  std::string text;
  for (const std::string& piece : pieces) {
    const ChatDelta d = s.add(piece);
    joined.reasoning_content += d.reasoning_content;
    joined.content += d.content;
    text += piece;
  }
  const auto [reply, rest] = s.finish(finished);
  const ChatReply whole = read_chat_reply(text, finished, thinking);
  EXPECT_EQ(reply.reasoning_content, whole.reasoning_content);
  EXPECT_EQ(reply.content, whole.content);
  joined.reasoning_content += rest.reasoning_content;
  joined.content += rest.content;
  return joined;
}

std::vector<std::string> characters(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = tokenizer::utf8_length(text, i);
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

TEST(ChatStreamTest, GoldenRepliesStreamToTheirParse) {
  const format::Json cases =
      format::parse_json(
          [] {
            std::ifstream in(testing::source_path("tests/chat/golden/chat_cases.json"));
            return std::string(std::istreambuf_iterator<char>(in), {});
          }(),
          "chat_cases.json")
          .value()["parse"];
  ASSERT_FALSE(cases.empty());
  for (const format::Json& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::string text = c["text"].get<std::string>();
    const bool finished = text.ends_with(kEndOfSentence);
    if (finished) text.resize(text.size() - kEndOfSentence.size());  // the eos token's
    const ThinkingMode thinking =
        c["thinking"].get<bool>() ? ThinkingMode::kThinking : ThinkingMode::kChat;
    for (const std::vector<std::string>& pieces : {characters(text), {text}}) {
      const ChatDelta got = stream(pieces, thinking, finished);
      EXPECT_EQ(got.reasoning_content, c["reply"]["reasoning_content"].get<std::string>());
      EXPECT_EQ(got.content, c["reply"]["content"].get<std::string>());
    }
  }
}

TEST(ChatStreamTest, HoldsAMarkersStartAndNeverSendsAMarker) {
  ChatStream s(ThinkingMode::kThinking);
  EXPECT_EQ(s.add("plan</th").reasoning_content, "plan");
  const ChatDelta both = s.add("ink>Hi\n");
  EXPECT_EQ(both.reasoning_content, "");
  EXPECT_EQ(both.content, "Hi");             // "\n" may start "\n\n<｜DSML｜tool_calls"
  EXPECT_EQ(s.add("\nx").content, "\n\nx");  // it did not
  EXPECT_EQ(s.add("\n\n").content, "");
  const ChatDelta calls = s.add("<｜DSML｜tool_calls>\n<｜DSML｜invoke");
  EXPECT_EQ(calls.content, "");
  EXPECT_EQ(calls.reasoning_content, "");
  ChatStream chat(ThinkingMode::kChat);
  EXPECT_EQ(chat.add("a</think>b").content, "a</think>b");  // no reasoning to end in chat mode
}

// The format broke after reasoning went out: the rest comes as content, nothing is lost but the
// </think> that was read as the end of reasoning.
TEST(ChatStreamTest, AReplyThatBreaksTheFormatLosesNoText) {
  const std::vector<std::string> pieces = {"think", "ing</think>an", "swer<think>more"};
  const ChatDelta got = stream(pieces, ThinkingMode::kThinking, false);
  EXPECT_EQ(got.reasoning_content, "thinking");
  EXPECT_EQ(got.content, "answer<think>more");
  // In chat mode the stream is exactly the whole answer's content.
  const ChatDelta chat = stream({"a<think>", "b"}, ThinkingMode::kChat, true);
  EXPECT_EQ(chat.reasoning_content, "");
  EXPECT_EQ(chat.content, "a<think>b");
}

}  // namespace
}  // namespace dsv4
