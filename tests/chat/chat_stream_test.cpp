// ChatStream: DeepSeek's golden replies (tests/chat/golden, the "parse" cases) fed a character
// at a time and whole: the reasoning and content deltas, with finish() on parse_chat_reply's
// reading, concatenate to that reading; markers are never sent, and a marker's start is held;
// an opening (a prefill) is read but never sent.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "chat/dsml.h"
#include "dsv4/chat.h"
#include "format/json.h"
#include "testing/source_dir.h"
#include "tokenizer/utf8.h"

namespace dsv4 {
namespace {

// The deltas of `pieces` and finish()'s rest, joined; finish()'s reply is the whole text's
// (the prefill's and the pieces').
ChatDelta stream(const std::vector<std::string>& pieces, ThinkingMode thinking, bool finished,
                 const std::string& prefill = "") {
  Conversation conversation;
  conversation.thinking = thinking;
  conversation.prefill = prefill;
  ChatStream s(conversation);
  ChatDelta joined;
  std::string text = prefill;
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

// A prefill's text, even the part held as a marker's possible start, is never sent; the
// prefill and the deltas make the reply's content, also where the prefill starts a tool-call
// block that parses or breaks.
TEST(ChatStreamTest, APrefillIsReadButNeverSent) {
  Conversation conversation;
  conversation.prefill = "Sure:\n";
  ChatStream s(conversation);
  EXPECT_EQ(s.add("\nfirst").content, "\nfirst");  // the prefill's "\n" was held, not sent
  EXPECT_EQ(s.finish(true).reply.content, "Sure:\n\nfirst");
  const std::string call =
      "_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  for (const std::string prefill : {"Sure:\n", "a\n\n<｜DSML｜tool", "plain"}) {
    SCOPED_TRACE(prefill);
    for (const std::vector<std::string>& pieces :
         {std::vector<std::string>{"\n", "x", "\n\n", "y"}, {"_calls>"}, {call}, {}}) {
      const ChatDelta got = stream(pieces, ThinkingMode::kChat, true, prefill);
      std::string whole = prefill;
      for (const std::string& piece : pieces) whole += piece;
      const ChatReply reply = read_chat_reply(whole, true, ThinkingMode::kChat);
      if (reply.tool_calls.empty()) {
        EXPECT_EQ(prefill + got.content, reply.content);
      } else {  // the prefill opened the tool-call block: the reply's content is inside it
        EXPECT_TRUE(prefill.starts_with(reply.content)) << reply.content;
        EXPECT_EQ(got.content, "");
      }
    }
  }
}

// A forced tool call's start is not the client's: where the block breaks, the whole text goes
// out as content, as the non-streamed answer holds it.
TEST(ChatStreamTest, AForcedToolCallsStartIsSentOnlyWhereItBreaks) {
  Conversation conversation;
  conversation.forced_tool = "f";
  const std::string opening = reply_opening(conversation);
  ChatStream broken(conversation);
  EXPECT_EQ(broken.add("oops").content, "");
  EXPECT_EQ(broken.finish(true).rest.content, opening + "oops");
  const Result<std::string> block = chat::render_tool_calls({ToolCall{"", "f", "{}"}});
  ASSERT_TRUE(block.ok() && block->starts_with(opening)) << opening;
  ChatStream parsed(conversation);
  EXPECT_EQ(parsed.add(block->substr(opening.size())).content, "");
  const ChatStream::End end = parsed.finish(true);
  EXPECT_EQ(end.rest.content, "");
  ASSERT_EQ(end.reply.tool_calls.size(), 1u);
  EXPECT_EQ(end.reply.tool_calls[0].name, "f");
}

}  // namespace
}  // namespace dsv4
