// parse_chat_request: what it accepts and how it reads it (every golden conversation sent as a
// request encodes to DeepSeek's prompt), and every refusal by field.
#include "server/chat_request.h"

#include <gtest/gtest.h>

#include <string>

#include "../chat/golden_cases.h"
#include "dsv4/chat.h"
#include "server/expect_refused.h"

namespace dsv4::server {
namespace {

ChatRequest accept(const std::string& body) {
  auto parsed = parse_chat_request(body, {4096, 640});
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    ADD_FAILURE() << body << ": " << bad->message;
    return {};
  }
  return std::get<ChatRequest>(parsed);
}

TEST(ChatRequestTest, EncodesEveryGoldenConversationAsDeepSeeksEncoderDoes) {
  const format::OrderedJson golden = testing::chat_golden();
  for (const auto& c : golden["encode"]) {
    if (c["messages"].back()["role"] == "assistant") continue;  // no request ends so
    SCOPED_TRACE(c["name"].get<std::string>());
    format::OrderedJson body = {{"messages", c["messages"]}, {"max_tokens", 1}};
    if (!c["tools"].empty()) body["tools"] = c["tools"];
    if (c["thinking"].get<bool>()) body["chat_template_kwargs"] = {{"thinking", true}};
    if (!c["reasoning_effort"].is_null()) body["reasoning_effort"] = c["reasoning_effort"];
    const ChatRequest request = accept(body.dump());
    Result<std::string> prompt = encode_chat(request.conversation);
    ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
    EXPECT_EQ(*prompt, c["prompt"].get<std::string>());
  }
}

TEST(ChatRequestTest, ReadsTheSwitchesAndSamplingFields) {
  const ChatRequest request =
      accept(R"({"messages": [{"role": "user", "content": "hi", "name": "u"}],
      "max_completion_tokens": 9, "temperature": 0, "seed": 3, "model": "m", "stream": false,
      "n": 1, "logprobs": false, "tool_choice": "auto", "parallel_tool_calls": true,
      "response_format": {"type": "text"}, "thinking": {"type": "enabled"},
      "chat_template_kwargs": {"enable_thinking": true}, "reasoning_effort": "xhigh",
      "stop": ["\n\n", "END"]})");
  EXPECT_EQ(request.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(request.logprobs, -1);  // "logprobs": false
  EXPECT_EQ(accept(R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true,
                       "top_logprobs": 3})")
                .logprobs,
            3);
  EXPECT_EQ(request.conversation.thinking, ThinkingMode::kThinking);
  EXPECT_EQ(request.conversation.effort, ReasoningEffort::kMax);
  EXPECT_FALSE(request.conversation.forced_tool.has_value());  // "auto"
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}])";
  EXPECT_EQ(accept(R"({"messages": [{"role": "user", "content": "hi"}], )" + tools +
                   R"(, "tool_choice": "required"})")
                .conversation.forced_tool,
            "");
  EXPECT_EQ(accept(R"({"messages": [{"role": "user", "content": "hi"}], )" + tools +
                   R"(, "tool_choice": {"type": "function", "function": {"name": "f"}}})")
                .conversation.forced_tool,
            "f");
  EXPECT_TRUE(accept(R"({"messages": [{"role": "user", "content": "hi"}], )" + tools +
                     R"(, "tool_choice": "none"})")
                  .conversation.no_tool_calls);
  EXPECT_EQ(request.sampling.max_tokens, 9);
  EXPECT_EQ(request.sampling.temperature, 0.0f);
  EXPECT_EQ(request.sampling.seed, 3u);
  EXPECT_FALSE(request.stream.enabled);
  const ChatRequest streamed = accept(R"({"messages": [{"role": "user", "content": "hi"}],
      "stream": true, "stream_options": {"include_usage": true}})");
  EXPECT_TRUE(streamed.stream.enabled);
  EXPECT_TRUE(streamed.stream.include_usage);
  const ChatRequest plain = accept(R"({"messages": [{"role": "user", "content": ""}],
      "reasoning_effort": "low"})");
  EXPECT_EQ(plain.conversation.thinking, ThinkingMode::kChat);  // off unless asked
  EXPECT_EQ(plain.conversation.effort, ReasoningEffort::kHigh);
  EXPECT_EQ(plain.sampling.max_tokens, 16);
  EXPECT_EQ(plain.sampling.temperature, 1.0f);
}

// continue_final_message (with add_generation_prompt false, or alone): the last message, an
// assistant's text, becomes the prefill.
// What LangChain, the Vercel AI SDK and LiteLLM send: content as text parts (joined by newlines,
// as vLLM joins them), and OpenAI's "developer" role, the system message of its newer models.
TEST(ChatRequestTest, ReadsTextPartsAndTheDeveloperRole) {
  const ChatRequest parts = accept(R"({"messages": [
      {"role": "developer", "content": [{"type": "text", "text": "be brief"}]},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": [{"type": "text", "text": "c"}]},
      {"role": "user", "content": "d"}]})");
  const ChatRequest plain = accept(R"({"messages": [
      {"role": "system", "content": "be brief"}, {"role": "user", "content": "a\nb"},
      {"role": "assistant", "content": "c"}, {"role": "user", "content": "d"}]})");
  EXPECT_EQ(encode_chat(parts.conversation).value(), encode_chat(plain.conversation).value());
  const ChatRequest tool = accept(R"({"messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "tool_calls": [{"id": "1", "type": "function",
       "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "1", "content": [{"type": "text", "text": "42"}]}]})");
  EXPECT_EQ(tool.conversation.messages.back().content, "42");
}

TEST(ChatRequestTest, ContinueFinalMessageMakesItThePrefill) {
  const std::string messages = R"("messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": "Sure,"}])";
  for (const std::string switches :
       {R"("continue_final_message": true)",
        R"("continue_final_message": true, "add_generation_prompt": false)"}) {
    const ChatRequest request = accept("{" + messages + ", " + switches + "}");
    EXPECT_EQ(request.conversation.prefill, "Sure,");
    ASSERT_EQ(request.conversation.messages.size(), 1u);
    EXPECT_EQ(request.conversation.messages[0].content, "x");
  }
  EXPECT_EQ(accept(R"({"messages": [{"role": "user", "content": "x"}],
                       "add_generation_prompt": true})")
                .conversation.prefill,
            "");
}

TEST(ChatRequestTest, RefusesEachBadFieldByName) {
  const std::string user = R"("messages": [{"role": "user", "content": "x"}])";
  const struct {
    std::string body;
    const char* param;
    const char* message;
  } cases[] = {
      {"{}", "messages", "messages is required"},
      {"{" + user + R"(, "continue_final_message": true})", "messages[0]",
       "continue_final_message needs the last message to be an assistant's text"},
      {R"({"messages": [{"role": "assistant", "content": "x"}], "continue_final_message": true})",
       "messages[0]", "after another message"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y",
          "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}],
          "continue_final_message": true})",
       "messages[1]", "an assistant's text"},
      {"{" + user + R"(, "add_generation_prompt": false})", "add_generation_prompt",
       "must be the opposite of continue_final_message"},
      {"{" + user + R"(, "continue_final_message": 1})", "continue_final_message",
       "continue_final_message must be true or false, got 1"},
      {R"({"messages": []})", "messages", "non-empty array"},
      {R"({"messages": ["hi"]})", "messages[0]", "messages[0] must be an object"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role", "messages[0].role is required"},
      {R"({"messages": [{"role": "critic", "content": "x"}]})", "messages[0].role",
       "role \"critic\" is not supported"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content", "is required"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
       "messages[0].content[0].type", "content part type \"image_url\" is not supported"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
       "messages[0].content[0].text", "is required"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content",
       "messages[0].content must be a string"},
      {"{" + user + R"(, "tools": [{"type": "function", "function": {"name": "f",
          "parameters": "{}"}}]})",
       "tools[0].function.parameters", "tools[0].function.parameters must be an object"},
      {R"({"messages": [{"role": "user", "content": "x", "extra": 1}]})", "messages[0].extra",
       "unknown field \"messages[0].extra\""},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]})",
       "messages[1].role", "the last message must be the user's or a tool's"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant",
          "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f"}}]},
          {"role": "tool", "tool_call_id": "a", "content": "r"}]})",
       "messages[1].tool_calls[0].function.arguments", "is required"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant",
          "tool_calls": [{"type": "code", "function": {"name": "f", "arguments": "{}"}}]},
          {"role": "user", "content": "y"}]})",
       "messages[1].tool_calls[0].type", "must be \"function\""},
      {R"({"messages": [{"role": "tool", "content": "r"}]})", "messages[0].tool_call_id",
       "is required"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant",
          "reasoning_content": 5}, {"role": "user", "content": "y"}]})",
       "messages[1].reasoning_content", "must be a string"},
      {"{" + user + R"(, "tools": {}})", "tools", "tools must be an array"},
      {"{" + user + R"(, "tools": [{"type": "retrieval"}]})", "tools[0].type",
       "must be \"function\""},
      {"{" + user + R"(, "tools": [{"type": "function", "function": {"description": "d"}}]})",
       "tools[0].function.name", "is required"},
      {"{" + user + R"(, "thinking": {"type": "on"}})", "thinking.type", "\"enabled\" or"},
      {"{" + user + R"(, "thinking": true})", "thinking", "must be an object"},
      {"{" + user + R"(, "thinking": {"type": "enabled"}, "chat_template_kwargs":
          {"thinking": false}})",
       "chat_template_kwargs.thinking", "contradicts thinking.type"},
      {"{" + user + R"(, "chat_template_kwargs": {"thinking": "yes"}})",
       "chat_template_kwargs.thinking", "true or false"},
      {"{" + user + R"(, "chat_template_kwargs": {"add_generation_prompt": false}})",
       "chat_template_kwargs.add_generation_prompt", "unknown field"},
      {"{" + user + R"(, "reasoning_effort": "none"})", "reasoning_effort", "got \"none\""},
      {"{" + user + R"(, "max_tokens": 5000})", "max_tokens", "in [0, 4096]"},
      {"{" + user + R"(, "max_completion_tokens": 5000})", "max_completion_tokens", "in [0, 4096]"},
      {"{" + user + R"(, "max_tokens": 1, "max_completion_tokens": 1})", "max_completion_tokens",
       "not both"},
      {"{" + user + R"(, "stream": "true"})", "stream", "stream must be true or false"},
      {"{" + user + R"(, "stream": false, "stream_options": {"include_usage": true}})",
       "stream_options", "only allowed with stream true"},
      {"{" + user + R"(, "stream": true, "stream_options": {"include_usage": "y"}})",
       "stream_options.include_usage", "true or false"},
      {"{" + user + R"(, "n": 17})", "n", "got 17"},
      {"{" + user + R"(, "stop": ["x", 1]})", "stop", "stop[1] must be a string, got 1"},
      {"{" + user + R"(, "top_logprobs": 2})", "top_logprobs", "needs logprobs true"},
      {"{" + user + R"(, "logprobs": true, "top_logprobs": 21})", "top_logprobs", "got 21"},
      {"{" + user + R"(, "logprobs": 1})", "logprobs", "logprobs must be true or false, got 1"},
      {"{" + user + R"(, "tool_choice": "any"})", "tool_choice", "got \"any\""},
      {"{" + user + R"(, "tool_choice": {"type": "function", "function": {}}})",
       "tool_choice.function.name", "is required"},
      {"{" + user + R"(, "parallel_tool_calls": false})", "parallel_tool_calls", "not supported"},
      {"{" + user +
           R"(, "response_format": {"type": "json_object"}, "thinking": {"type": "enabled"}})",
       "response_format", "with thinking is not supported"},
      {"{" + user + R"(, "presence_penalty": 2.5})", "presence_penalty", "in [-2.0, 2.0], got 2.5"},
      {"{" + user + R"(, "functions": []})", "functions", "unknown field \"functions\""},
      {"{" + user + R"(, "model": 3})", "model", "model must be a string"},
      {"[]", "", "must be a JSON object"},
      {"{not json", "", "request body: invalid JSON"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    expect_refused(parse_chat_request(c.body, {4096, 640}), c.param, c.message);
  }
}

}  // namespace
}  // namespace dsv4::server
