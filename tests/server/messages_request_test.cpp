// parse_messages_request (Anthropic's Messages API): every golden conversation, rewritten the way
// Anthropic's API carries it (system apart, reasoning as thinking blocks, tool calls as tool_use
// blocks with an input object, tool results as tool_result blocks of a user message, tools as
// {name, description, input_schema}), encodes to DeepSeek's prompt; the fields it reads; every
// refusal by field; count_tokens' body.
#include "server/messages_request.h"

#include <gtest/gtest.h>

#include <string>

#include "../chat/golden_cases.h"
#include "dsv4/chat.h"
#include "server/expect_refused.h"

namespace dsv4::server {
namespace {

using format::OrderedJson;

MessagesRequest accept(const std::string& body) {
  auto parsed = parse_messages_request(body, {4096, 640});
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    ADD_FAILURE() << body << ": " << bad->message;
    return {};
  }
  return std::get<MessagesRequest>(parsed);
}

// An OpenAI assistant message as Anthropic's content blocks.
OrderedJson assistant_blocks(const OrderedJson& m) {
  OrderedJson blocks = OrderedJson::array();
  const std::string reasoning = testing::string_or_empty(m, "reasoning_content");
  const std::string content = testing::string_or_empty(m, "content");
  if (!reasoning.empty()) {
    blocks.push_back({{"type", "thinking"}, {"thinking", reasoning}, {"signature", "s"}});
  }
  if (!content.empty()) blocks.push_back({{"type", "text"}, {"text", content}});
  for (const OrderedJson& call : m.value("tool_calls", OrderedJson::array())) {
    blocks.push_back({{"type", "tool_use"},
                      {"id", call["id"]},
                      {"name", call["function"]["name"]},
                      {"input", format::parse_ordered_json(
                                    call["function"]["arguments"].get<std::string>(), "arguments")
                                    .value()}});
  }
  return blocks;
}

// The golden case's OpenAI request as an Anthropic one, or null when Anthropic's API cannot
// carry it: a system message after the first, tool arguments that are not a JSON object, a tool
// schema whose keys are not in Anthropic's order.
OrderedJson as_anthropic(const OrderedJson& c) {
  OrderedJson body = {{"max_tokens", 1}};
  OrderedJson messages = OrderedJson::array();
  for (size_t i = 0; i < c["messages"].size(); ++i) {
    const OrderedJson& m = c["messages"][i];
    const std::string role = m["role"].get<std::string>();
    if (role == "system") {
      if (i != 0) return nullptr;
      body["system"] = m["content"];
    } else if (role == "user") {
      messages.push_back({{"role", "user"}, {"content", m["content"]}});
    } else if (role == "tool") {
      const OrderedJson result = {
          {"type", "tool_result"}, {"tool_use_id", m["tool_call_id"]}, {"content", m["content"]}};
      // Consecutive results are one user message, as Anthropic's API wants them.
      if (!messages.empty() && messages.back()["content"].is_array() &&
          messages.back()["content"].back()["type"] == "tool_result") {
        messages.back()["content"].push_back(result);
      } else {
        messages.push_back({{"role", "user"}, {"content", OrderedJson::array({result})}});
      }
    } else {
      for (const OrderedJson& call : m.value("tool_calls", OrderedJson::array())) {
        auto args = format::parse_ordered_json(call["function"]["arguments"].get<std::string>(),
                                               "arguments");
        if (!args.ok() || !args->is_object()) return nullptr;
      }
      messages.push_back({{"role", "assistant"}, {"content", assistant_blocks(m)}});
    }
  }
  body["messages"] = messages;
  for (const OrderedJson& tool : c["tools"]) {
    const OrderedJson& f = tool["function"];
    if (f.begin().key() != "name") return nullptr;
    body["tools"].push_back({{"name", f["name"]},
                             {"description", f["description"]},
                             {"input_schema", f["parameters"]}});
  }
  if (c["thinking"].get<bool>()) body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
  return body;
}

TEST(MessagesRequestTest, EncodesEveryGoldenConversationAsDeepSeeksEncoderDoes) {
  const OrderedJson golden = testing::chat_golden();
  int n_tested = 0;
  for (const auto& c : golden["encode"]) {
    // Anthropic's API has no reasoning effort; its last message is the user's.
    if (c["messages"].back()["role"] == "assistant" || !c["reasoning_effort"].is_null()) continue;
    const OrderedJson body = as_anthropic(c);
    if (body.is_null()) continue;
    SCOPED_TRACE(c["name"].get<std::string>() + ": " + body.dump());
    const MessagesRequest request = accept(body.dump());
    Result<std::string> prompt = encode_chat(request.conversation);
    ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
    EXPECT_EQ(*prompt, c["prompt"].get<std::string>());
    ++n_tested;
  }
  EXPECT_GE(n_tested, 15) << "most golden conversations carry over";
}

TEST(MessagesRequestTest, ReadsTheSamplingAndSwitches) {
  const MessagesRequest r = accept(R"({"model": "claude", "max_tokens": 9,
      "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
      "messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                {"type": "text", "text": "b"}]}],
      "temperature": 0, "top_p": 0.5, "top_k": 7, "stop_sequences": ["END"], "stream": true,
      "metadata": {"user_id": "u"}, "tool_choice": {"type": "auto"},
      "thinking": {"type": "enabled", "budget_tokens": 2000}})");
  EXPECT_EQ(r.sampling.max_tokens, 9);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"END"}));
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.conversation.thinking, ThinkingMode::kThinking);
  EXPECT_FALSE(r.conversation.forced_tool.has_value());  // "auto"
  const std::string asks = R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
      "tools": [{"name": "f", "input_schema": {}}], "tool_choice": )";
  EXPECT_EQ(accept(asks + R"({"type": "any"}})").conversation.forced_tool, "");
  EXPECT_EQ(accept(asks + R"({"type": "tool", "name": "f"}})").conversation.forced_tool, "f");
  EXPECT_TRUE(accept(asks + R"({"type": "none"}})").conversation.no_tool_calls);
  ASSERT_EQ(r.conversation.messages.size(), 3u);
  EXPECT_EQ(r.conversation.messages[0].role, ChatRole::kSystem);
  EXPECT_EQ(r.conversation.messages[0].content, "be brief");
  EXPECT_EQ(r.conversation.messages[2].content, "b");

  const MessagesRequest plain = accept(R"({"max_tokens": 3, "messages": [
      {"role": "user", "content": "x"},
      {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "opaque"},
                                        {"type": "text", "text": "y"}]},
      {"role": "user", "content": "z"}], "thinking": {"type": "disabled"}})");
  EXPECT_EQ(plain.conversation.thinking, ThinkingMode::kChat);
  EXPECT_EQ(plain.conversation.messages[1].content, "y");
  EXPECT_EQ(plain.sampling.temperature, 1.0f);
  EXPECT_FALSE(plain.stream);
  // More than the context (the server cuts it once it knows the prompt's length).
  EXPECT_EQ(accept(R"({"max_tokens": 32000, "messages": [{"role": "user", "content": "x"}]})")
                .sampling.max_tokens,
            32000);
}

// A final assistant message is the prefill the reply continues; the prompt ends with it.
// Anthropic takes more stop_sequences than OpenAI's 4 stop strings: up to 64 here.
TEST(MessagesRequestTest, TakesUpTo64StopSequences) {
  std::string list;
  for (int i = 0; i < 65; ++i) list += (i == 0 ? "\"s" : ", \"s") + std::to_string(i) + "\"";
  const auto body = [&](int n) {
    const std::string first = list.substr(0, list.find(", \"s" + std::to_string(n) + "\""));
    return R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
               "stop_sequences": [)" +
           (n == 65 ? list : first) + "]}";
  };
  EXPECT_EQ(accept(body(5)).stop.size(), 5u);
  EXPECT_EQ(accept(body(64)).stop.size(), 64u);
  expect_refused(parse_messages_request(body(65), {4096, 640}), "stop_sequences",
                 "65 strings; at most 64");
}

TEST(MessagesRequestTest, AFinalAssistantMessageIsThePrefill) {
  const MessagesRequest r = accept(R"({"max_tokens": 5, "messages": [
      {"role": "user", "content": "Name a colour."},
      {"role": "assistant", "content": [{"type": "text", "text": "The colour is"}]}]})");
  EXPECT_EQ(r.conversation.prefill, "The colour is");
  ASSERT_EQ(r.conversation.messages.size(), 1u);
  Result<std::string> prompt = encode_chat(r.conversation);
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  EXPECT_TRUE(prompt->ends_with("Name a colour.<｜Assistant｜></think>The colour is")) << *prompt;
}

TEST(MessagesRequestTest, RefusesEachBadFieldByName) {
  const std::string user = R"("max_tokens": 5, "messages": [{"role": "user", "content": "x"}])";
  const struct {
    std::string body;
    const char* param;
    const char* message;
  } cases[] = {
      {R"({"messages": [{"role": "user", "content": "x"}]})", "max_tokens", "is required"},
      {R"({"max_tokens": 5})", "messages", "messages is required"},
      {R"({"max_tokens": -1, "messages": [{"role": "user", "content": "x"}]})", "max_tokens",
       "got -1"},
      {R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})", "messages[0].role",
       "role \"system\" is not supported (user, assistant)"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"},
          {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
          "input": {}}]}]})",
       "messages[1].content", "a final assistant message (a prefill) must hold text only"},
      {R"({"max_tokens": 5, "messages": [{"role": "assistant", "content": "Sure,"}]})",
       "messages[0].role", "needs a user message before it"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"},
          {"role": "assistant", "content": "y"}, {"role": "assistant", "content": "Sure,"}]})",
       "messages[1].content", "no text or tool result for the model to answer"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": []}]})", "messages[0].content",
       "no text or tool result for the model to answer"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image",
          "source": {}}]}]})",
       "messages[0].content[0].type",
       "a user content block of type \"image\" is not supported (text, tool_result)"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result",
          "content": "r"}]}]})",
       "messages[0].content[0].tool_use_id", "is required"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result",
          "tool_use_id": "a", "content": [{"type": "image"}]}]}]})",
       "messages[0].content[0].content[0].type", "of type \"image\" is not supported"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}, {"role": "assistant",
          "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]},
          {"role": "user", "content": "y"}]})",
       "messages[1].content[0].input", "must be an object"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x", "name": "n"}]})",
       "messages[0].name", "unknown field"},
      {"{" + user + R"(, "system": 5})", "system", "must be a string or an array"},
      {"{" + user + R"(, "tools": [{"type": "web_search_20250305", "name": "s"}]})",
       "tools[0].type", "tool type \"web_search_20250305\" is not supported"},
      {"{" + user + R"(, "tools": [{"name": "f"}]})", "tools[0].input_schema", "is required"},
      {"{" + user + R"(, "tool_choice": {"type": "required"}})", "tool_choice.type",
       "must be \"auto\", \"none\", \"any\" or \"tool\""},
      {"{" + user + R"(, "tool_choice": {"type": "tool"}})", "tool_choice.name", "is required"},
      {"{" + user + R"(, "tool_choice": {"type": "auto", "disable_parallel_tool_use": true}})",
       "tool_choice.disable_parallel_tool_use", "not supported"},
      {"{" + user + R"(, "thinking": {"type": "enabled"}})", "thinking.budget_tokens",
       "a positive integer"},
      {"{" + user + R"(, "thinking": {"type": "adaptive"}})", "thinking.type",
       "\"enabled\" or \"disabled\""},
      {"{" + user + R"(, "stop_sequences": [""]})", "stop_sequences", "stop_sequences[0] is empty"},
      {"{" + user + R"(, "stream": 1})", "stream", "true or false"},
      {"{" + user + R"(, "temperature": 3})", "temperature", "in [0, 1], got 3"},
      {"{" + user + R"(, "temperature": 1.5})", "temperature", "in [0, 1], got 1.5"},
      {R"({"max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})", "max_tokens",
       "got 0"},

      {"{" + user + R"(, "seed": 1})", "seed", "unknown field \"seed\""},
      {"{" + user + R"(, "model": 1})", "model", "model must be a string"},
      {"{" + user + R"(, "metadata": "m"})", "metadata", "must be an object"},
      {"[]", "", "must be a JSON object"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    expect_refused(parse_messages_request(c.body, {4096, 640}), c.param, c.message);
  }
}

TEST(MessagesRequestTest, CountTokensTakesTheConversationAlone) {
  auto parsed = parse_count_tokens_request(
      R"({"model": "m", "system": "s", "messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(std::holds_alternative<Conversation>(parsed));
  EXPECT_EQ(std::get<Conversation>(parsed).messages.size(), 2u);
  expect_refused(parse_count_tokens_request(
                     R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}]})"),
                 "max_tokens", "unknown field");
}

}  // namespace
}  // namespace dsv4::server
