// Anthropic's Messages API on the server (POST /v1/messages, /v1/messages/count_tokens) end to
// end with the tiny random-weight golden checkpoint: the message's blocks are the reply the
// engine gives for the encoded conversation, the streamed events add up to the same blocks, a
// stop sequence is reported, and refusals come in Anthropic's error shape.
#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <utility>
#include <vector>

#include "dsv4/chat.h"
#include "format/json.h"
#include "server/server_fixture.h"
#include "tokenizer/utf8.h"

namespace dsv4::server {
namespace {

using format::Json;
using testing_fixture::every_id_tokenizer;
using testing_fixture::open_engine;
using testing_fixture::RunningServer;

class MessagesServerTest : public ::testing::Test {
 protected:
  MessagesServerTest() : engine_(open_engine()), tokenizer_(every_id_tokenizer()) {}

  // The engine's greedy reply to `conversation`, read as the server reads it.
  struct Direct {
    std::vector<int64_t> prompt;
    Generation out;
    ChatReply reply;
  };
  Direct direct(const Conversation& conversation, int64_t max_tokens) {
    Direct d;
    d.prompt = tokenize_chat_prompt(tokenizer_, encode_chat(conversation).value()).value();
    SamplingParams sampling;
    sampling.max_tokens = max_tokens;
    sampling.temperature = 0.0f;
    d.out = engine_.generate({d.prompt, sampling}).value();
    d.reply =
        decode_chat_reply(tokenizer_, d.out.tokens, d.out.stopped_at_eos, conversation.thinking)
            .value();
    return d;
  }

  Engine engine_;
  Tokenizer tokenizer_;
};

std::pair<int, Json> post(const RunningServer& server, const std::string& body,
                          const char* path = "/v1/messages", httplib::Headers headers = {}) {
  httplib::Client client = server.client();
  const auto res = client.Post(path, headers, body, "application/json");
  EXPECT_TRUE(res) << "no response";
  if (!res) return {0, Json()};
  return {res->status, Json::parse(res->body)};
}

void expect_anthropic_error(const std::pair<int, Json>& got, int status, const char* type,
                            const std::string& message) {
  EXPECT_EQ(got.first, status) << got.second.dump();
  EXPECT_EQ(got.second["type"], "error") << got.second.dump();
  EXPECT_EQ(got.second["error"]["type"], type) << got.second.dump();
  EXPECT_NE(got.second["error"]["message"].get<std::string>().find(message), std::string::npos)
      << got.second.dump();
}

// The events of an Anthropic stream ("event: NAME\ndata: JSON\n\n" each), NAME checked against
// the data's type.
std::vector<Json> named_events(const std::string& body) {
  std::vector<Json> out;
  for (size_t at = 0; at < body.size();) {
    const size_t end = body.find("\n\n", at);
    const size_t newline = body.find('\n', at);
    EXPECT_NE(end, std::string::npos) << body.substr(at);
    if (end == std::string::npos) break;
    EXPECT_EQ(body.compare(at, 7, "event: "), 0) << body.substr(at);
    EXPECT_EQ(body.compare(newline + 1, 6, "data: "), 0) << body.substr(at);
    const std::string name = body.substr(at + 7, newline - at - 7);
    out.push_back(Json::parse(body.substr(newline + 7, end - newline - 7)));
    EXPECT_EQ(out.back()["type"], name);
    at = end + 2;
  }
  return out;
}

// A streamed message put back together: its blocks (deltas joined), stop reason and usage.
Json assemble(const std::vector<Json>& events) {
  Json message;
  for (const Json& e : events) {
    const std::string type = e["type"];
    if (type == "message_start") {
      message = e["message"];
    } else if (type == "content_block_start") {
      EXPECT_EQ(e["index"], message["content"].size()) << e;
      message["content"].push_back(e["content_block"]);
    } else if (type == "content_block_delta") {
      Json& block = message["content"][e["index"].get<size_t>()];
      const Json& d = e["delta"];
      if (d["type"] == "thinking_delta")
        block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      if (d["type"] == "text_delta")
        block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      if (d["type"] == "input_json_delta")
        block["input"] = Json::parse(d["partial_json"].get<std::string>());
    } else if (type == "message_delta") {
      message["stop_reason"] = e["delta"]["stop_reason"];
      message["stop_sequence"] = e["delta"]["stop_sequence"];
      message["usage"]["output_tokens"] = e["usage"]["output_tokens"];
    }
  }
  EXPECT_EQ(events.back()["type"], "message_stop");
  return message;
}

TEST_F(MessagesServerTest, AMessageIsTheEnginesReplyStreamedOrNot) {
  Conversation conversation;
  conversation.messages = {{ChatRole::kSystem, "Be brief.", "", {}, ""},
                           {ChatRole::kUser, "hello world", "", {}, ""}};
  const RunningServer server(engine_, &tokenizer_);
  for (const bool thinking : {true, false}) {
    SCOPED_TRACE(thinking ? "thinking" : "chat");
    conversation.thinking = thinking ? ThinkingMode::kThinking : ThinkingMode::kChat;
    const Direct want = direct(conversation, 6);
    Json body = Json::parse(R"({"model": "deepseek", "system": "Be brief", "max_tokens": 6,
        "temperature": 0, "messages": [{"role": "user", "content": "hello world"}]})");
    body["system"] = "Be brief.";
    if (thinking) body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};

    const auto [status, message] = post(server, body.dump());
    ASSERT_EQ(status, 200) << message.dump();
    Json blocks = Json::array();
    if (thinking) {
      blocks.push_back(
          {{"type", "thinking"}, {"thinking", want.reply.reasoning_content}, {"signature", ""}});
    }
    blocks.push_back({{"type", "text"}, {"text", want.reply.content}});
    EXPECT_EQ(message["content"], blocks);
    EXPECT_EQ(message["type"], "message");
    EXPECT_EQ(message["role"], "assistant");
    EXPECT_EQ(message["model"], "dsv4");
    EXPECT_EQ(message["stop_reason"], want.out.stopped_at_eos ? "end_turn" : "max_tokens");
    EXPECT_EQ(message["stop_sequence"], Json());
    EXPECT_EQ(message["usage"], Json({{"input_tokens", want.prompt.size()},
                                      {"output_tokens", want.out.tokens.size()}}));

    body["stream"] = true;
    httplib::Client client = server.client();
    const std::string sent = body.dump();
    const auto res = client.Post("/v1/messages", sent, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
    const Json streamed = assemble(named_events(res->body));
    EXPECT_EQ(streamed["content"], message["content"]);
    EXPECT_EQ(streamed["stop_reason"], message["stop_reason"]);
    EXPECT_EQ(streamed["usage"], message["usage"]);
    EXPECT_EQ(streamed["id"].get<std::string>().rfind("msg_", 0), 0u);
  }
}

TEST_F(MessagesServerTest, AStopSequenceEndsTheTextAndIsReported) {
  Conversation conversation;
  conversation.messages = {{ChatRole::kUser, "hello world", "", {}, ""}};
  const Direct want = direct(conversation, 12);
  const std::string& text = want.reply.content;
  // The stop: the whole character that starts at or after the middle of the reply.
  size_t at = text.size() / 2;
  while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
  ASSERT_LT(at, text.size()) << "the random model's reply is too short to cut";
  const std::string stop = text.substr(at, tokenizer::utf8_length(text, at));
  const std::string cut = text.substr(0, text.find(stop));
  const RunningServer server(engine_, &tokenizer_);
  Json body = Json::parse(R"({"max_tokens": 12, "temperature": 0,
                              "messages": [{"role": "user", "content": "hello world"}]})");
  body["stop_sequences"] = {stop};
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streamed" : "whole");
    body["stream"] = stream;
    Json message;
    if (stream) {
      httplib::Client client = server.client();
      const auto res = client.Post("/v1/messages", body.dump(), "application/json");
      ASSERT_TRUE(res);
      message = assemble(named_events(res->body));
    } else {
      message = post(server, body.dump()).second;
    }
    EXPECT_EQ(message["content"], Json::array({{{"type", "text"}, {"text", cut}}})) << message;
    EXPECT_EQ(message["stop_reason"], "stop_sequence");
    EXPECT_EQ(message["stop_sequence"], stop);
  }
}

// Claude Code asks for 32000 tokens whatever the context: the reply may fill what is left of it.
TEST_F(MessagesServerTest, MaxTokensPastTheContextIsCutToIt) {
  Conversation conversation;
  conversation.messages = {{ChatRole::kUser, "hello world", "", {}, ""}};
  const size_t n_prompt =
      tokenize_chat_prompt(tokenizer_, encode_chat(conversation).value()).value().size();
  const RunningServer server(engine_, &tokenizer_);  // a context of 64
  const auto [status, message] = post(server, R"({"max_tokens": 32000, "temperature": 0,
      "messages": [{"role": "user", "content": "hello world"}]})");
  ASSERT_EQ(status, 200) << message.dump();
  EXPECT_LE(message["usage"]["output_tokens"].get<size_t>(), 64 - n_prompt);
  if (message["stop_reason"] == "max_tokens") {
    EXPECT_EQ(message["usage"]["output_tokens"].get<size_t>(), 64 - n_prompt);
  }
}

TEST_F(MessagesServerTest, CountTokensIsTheEncodedPromptsLength) {
  Conversation conversation;
  conversation.messages = {{ChatRole::kSystem, "Be brief.", "", {}, ""},
                           {ChatRole::kUser, "hello world", "", {}, ""}};
  conversation.thinking = ThinkingMode::kThinking;
  const size_t want =
      tokenize_chat_prompt(tokenizer_, encode_chat(conversation).value()).value().size();
  const RunningServer server(engine_, &tokenizer_);
  const auto [status, json] = post(server, R"({"model": "m", "system": "Be brief.",
      "messages": [{"role": "user", "content": "hello world"}],
      "thinking": {"type": "enabled", "budget_tokens": 2048}})",
                                   "/v1/messages/count_tokens");
  ASSERT_EQ(status, 200) << json.dump();
  EXPECT_EQ(json, Json({{"input_tokens", want}}));
}

// tool_choice "tool" and "any" end the prompt with the reply's tool call opened (count_tokens
// counts it; the tools' instructions make the prompt too long to generate within this context).
TEST_F(MessagesServerTest, AForcedToolCallIsPartOfThePrompt) {
  Conversation conversation;
  conversation.messages = {{ChatRole::kUser, "hello world", "", {}, ""}};
  conversation.tools = {R"({"name": "f", "parameters": {"type": "object"}})"};
  const RunningServer server(engine_, &tokenizer_);
  const std::string body = R"({"messages": [{"role": "user", "content": "hello world"}],
      "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": )";
  for (const auto& [choice, forced] :
       {std::pair<std::string, std::string>{R"({"type": "tool", "name": "f"})", "f"},
        {R"({"type": "any"})", ""}}) {
    SCOPED_TRACE(choice);
    conversation.forced_tool = forced;
    const size_t want =
        tokenize_chat_prompt(tokenizer_, encode_chat(conversation).value()).value().size();
    const auto [status, json] = post(server, body + choice + "}", "/v1/messages/count_tokens");
    ASSERT_EQ(status, 200) << json.dump();
    EXPECT_EQ(json["input_tokens"], want);
  }
  expect_anthropic_error(post(server, body + R"({"type": "tool", "name": "g"}, "max_tokens": 1})"),
                         400, "invalid_request_error", "\"g\" is not among the tools");
}

// A final assistant message is a prefill: the prompt ends with it, and the message (streamed
// or not) holds only what the engine wrote after it.
TEST_F(MessagesServerTest, APrefillIsContinuedNotRepeated) {
  Conversation conversation;
  conversation.messages = {{ChatRole::kUser, "hello world", "", {}, ""}};
  conversation.prefill = "The answer is";
  const Direct want = direct(conversation, 6);
  std::vector<int64_t> generated = want.out.tokens;
  if (want.out.stopped_at_eos) generated.pop_back();
  const ChatReply reply =
      read_reply(conversation, tokenizer_.decode(generated).value(), want.out.stopped_at_eos);
  const RunningServer server(engine_, &tokenizer_);
  Json body = Json::parse(R"({"max_tokens": 6, "temperature": 0, "messages": [
      {"role": "user", "content": "hello world"},
      {"role": "assistant", "content": "The answer is"}]})");
  const auto [status, message] = post(server, body.dump());
  ASSERT_EQ(status, 200) << message.dump();
  EXPECT_EQ(message["content"], Json::array({{{"type", "text"}, {"text", reply.content}}}));
  EXPECT_EQ(message["usage"]["input_tokens"], want.prompt.size());
  body["stream"] = true;
  httplib::Client client = server.client();
  const auto res = client.Post("/v1/messages", body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(assemble(named_events(res->body))["content"], message["content"]);

  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
  body["stream"] = false;
  expect_anthropic_error(post(server, body.dump()), 400, "invalid_request_error",
                         "a prefill needs thinking off");
}

TEST_F(MessagesServerTest, RefusalsAreAnthropicErrors) {
  const RunningServer server(engine_, &tokenizer_);
  expect_anthropic_error(post(server, R"({"messages": [{"role": "user", "content": "x"}]})"), 400,
                         "invalid_request_error", "max_tokens is required");
  // A conversation longer than the context (64) itself.
  const std::string long_message =
      R"({"max_tokens": 1, "messages": [{"role": "user", "content": ")" + std::string(200, 'a') +
      R"("}]})";
  expect_anthropic_error(post(server, long_message), 400, "invalid_request_error",
                         "exceeds the context");
  const RunningServer no_tokenizer(engine_, nullptr);
  expect_anthropic_error(post(no_tokenizer, R"({"max_tokens": 1,
      "messages": [{"role": "user", "content": "x"}]})"),
                         400, "invalid_request_error", "no tokenizer.json");

  ServerOptions keyed;
  keyed.api_key = "sk-test";
  const RunningServer guarded(engine_, &tokenizer_, keyed);
  const std::string body = R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}]})";
  expect_anthropic_error(post(guarded, body), 401, "authentication_error", "x-api-key");
  expect_anthropic_error(post(guarded, body, "/v1/messages", {{"x-api-key", "sk-tesT"}}), 401,
                         "authentication_error", "API key");
  EXPECT_EQ(post(guarded, body, "/v1/messages", {{"x-api-key", "sk-test"}}).first, 200);
  EXPECT_EQ(post(guarded, body, "/v1/messages", {{"Authorization", "Bearer sk-test"}}).first, 200);
}

}  // namespace
}  // namespace dsv4::server
