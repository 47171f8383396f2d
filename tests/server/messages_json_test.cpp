// The Messages API's response pieces (server/messages_json.h): the content blocks of a reply in
// each mode, the stop reason and stop sequence for each way a reply ends (tool_choice "none"'s
// stop where a call would begin is an end of turn, not a stop sequence), and the error shapes.
#include "server/messages_json.h"

#include <gtest/gtest.h>

#include <string>

namespace dsv4::server {
namespace {

using format::Json;

TEST(MessagesJsonTest, ContentBlocksFollowTheReply) {
  const ChatReply reply{"plan", "answer", {{"", "f", R"({"x": [1, 2]})"}}};
  EXPECT_EQ(message_content_json(reply, ThinkingMode::kThinking, "7").value(),
            Json::parse(R"([{"type": "thinking", "thinking": "plan", "signature": ""},
                            {"type": "text", "text": "answer"},
                            {"type": "tool_use", "id": "toolu_7_0", "name": "f",
                             "input": {"x": [1, 2]}}])"));
  // Tool calls alone: no empty text block; nothing at all: one.
  EXPECT_EQ(message_content_json({"", "", reply.tool_calls}, ThinkingMode::kChat, "7").value(),
            Json::parse(R"([{"type": "tool_use", "id": "toolu_7_0", "name": "f",
                             "input": {"x": [1, 2]}}])"));
  EXPECT_EQ(message_content_json({}, ThinkingMode::kChat, "7").value(),
            Json::parse(R"([{"type": "text", "text": ""}])"));
  EXPECT_FALSE(message_content_json({"", "", {{"", "f", "[1]"}}}, ThinkingMode::kChat, "7").ok());
}

TEST(MessagesJsonTest, StopReasonsAndSequences) {
  Generation at_eos, cut;
  at_eos.stopped_at_eos = true;
  const ChatReply text{"", "hi", {}}, calls{"", "", {{"", "f", "{}"}}};
  const std::string marker(tool_calls_marker());
  EXPECT_STREQ(stop_reason(text, at_eos, ""), "end_turn");
  EXPECT_STREQ(stop_reason(text, cut, ""), "max_tokens");
  EXPECT_STREQ(stop_reason(text, cut, "END"), "stop_sequence");
  EXPECT_STREQ(stop_reason(text, cut, marker), "end_turn");
  EXPECT_STREQ(stop_reason(calls, at_eos, ""), "tool_use");
  EXPECT_EQ(stop_sequence_json("END"), "END");
  EXPECT_TRUE(stop_sequence_json("").is_null());
  EXPECT_TRUE(stop_sequence_json(marker).is_null());
}

TEST(MessagesJsonTest, ErrorTypesFollowTheStatus) {
  for (const auto& [status, type] : {std::pair{400, "invalid_request_error"},
                                     {401, "authentication_error"},
                                     {404, "not_found_error"},
                                     {413, "request_too_large"},
                                     {503, "overloaded_error"},
                                     {500, "api_error"}}) {
    EXPECT_EQ(messages_error_json(status, "m"),
              Json({{"type", "error"}, {"error", {{"type", type}, {"message", "m"}}}}))
        << status;
  }
}

}  // namespace
}  // namespace dsv4::server
