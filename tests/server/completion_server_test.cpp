// CompletionServer end to end on 127.0.0.1 (any free port) with the tiny random-weight golden
// checkpoint: answers compared with the Engine called directly, and every refusal's status and
// OpenAI-shaped error body.
#include "server/completion_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dsv4/chat.h"
#include "format/json.h"
#include "testing/source_dir.h"

namespace dsv4::server {
namespace {

using format::Json;

Engine open_engine() {
  EngineOptions options;
  options.model_dir = testing::source_path("tests/golden/tiny_a_pretrained/model");
  options.max_context = 64;
  Result<Engine> engine = Engine::open(options);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return std::move(engine).value();
}

// A server on its own thread for one test, stopped and joined at the end.
class RunningServer {
 public:
  RunningServer(Engine& engine, const Tokenizer* tokenizer, ServerOptions options = {})
      : server_(engine, tokenizer, [&] {
          options.max_context = 64;
          return options;
        }()) {
    Result<int> port = server_.bind("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status().to_string();
    port_ = port.ok() ? *port : 0;
    thread_ = std::thread([this] { EXPECT_TRUE(server_.serve().ok()); });
  }
  ~RunningServer() {
    server_.stop();
    thread_.join();
  }
  httplib::Client client() const { return httplib::Client("127.0.0.1", port_); }

 private:
  CompletionServer server_;
  int port_ = 0;
  std::thread thread_;
};

// POSTs `body` to `path`; returns (status, parsed body).
std::pair<int, Json> complete(const RunningServer& server, const std::string& body,
                              const char* path = "/v1/completions") {
  httplib::Client client = server.client();
  const auto res = client.Post(path, body, "application/json");
  EXPECT_TRUE(res) << "no response";
  if (!res) return {0, Json()};
  return {res->status, Json::parse(res->body)};
}

void expect_error(const std::pair<int, Json>& got, int status, const std::string& param,
                  const std::string& message) {
  EXPECT_EQ(got.first, status) << got.second.dump();
  ASSERT_TRUE(got.second.contains("error")) << got.second.dump();
  const Json& error = got.second["error"];
  EXPECT_EQ(error["param"], param.empty() ? Json() : Json(param));
  EXPECT_NE(error["message"].get<std::string>().find(message), std::string::npos) << error;
  EXPECT_EQ(error["type"], status < 500 ? "invalid_request_error" : "server_error");
}

class CompletionServerTest : public ::testing::Test {
 protected:
  CompletionServerTest()
      : engine_(open_engine()),
        tokenizer_(
            Tokenizer::load(testing::source_path("tests/tokenizer/fixtures/small_tokenizer.json"))
                .value()) {}
  Engine engine_;
  Tokenizer tokenizer_;
};

TEST_F(CompletionServerTest, AnswersAsTheEngineDoes) {
  const std::vector<int64_t> prompt = {259, 262, 108, 100};
  SamplingParams sampling;
  sampling.max_tokens = 6;
  sampling.temperature = 0.8f;
  sampling.top_k = 50;
  sampling.seed = 5;
  Result<Generation> direct = engine_.generate({prompt, sampling});
  ASSERT_TRUE(direct.ok()) << direct.status().to_string();

  const RunningServer server(engine_, nullptr);
  const std::string body = R"({"prompt": [259, 262, 108, 100], "max_tokens": 6,
                               "temperature": 0.8, "top_k": 50, "seed": 5})";
  for (int repeat = 0; repeat < 2; ++repeat) {  // same request, same answer
    const auto [status, json] = complete(server, body);
    ASSERT_EQ(status, 200) << json.dump();
    const Json& choice = json["choices"][0];
    EXPECT_EQ(choice["token_ids"].get<std::vector<int64_t>>(), direct->tokens);
    EXPECT_EQ(choice["text"], "");  // no tokenizer
    EXPECT_EQ(choice["finish_reason"], direct->stopped_at_eos ? "stop" : "length");
    EXPECT_EQ(json["usage"]["prompt_tokens"], 4);
    EXPECT_EQ(json["usage"]["completion_tokens"], direct->tokens.size());
    EXPECT_EQ(json["object"], "text_completion");
  }
  httplib::Client client = server.client();
  const auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(Json::parse(models->body)["data"][0]["id"], "dsv4");
}

TEST_F(CompletionServerTest, EncodesTextPromptsWithItsTokenizer) {
  const RunningServer server(engine_, &tokenizer_);
  // "hello world" is 259, 262, 108, 100 in the small tokenizer (tests/tokenizer).
  const auto [status, json] = complete(server, R"({"prompt": "hello world", "max_tokens": 0})");
  ASSERT_EQ(status, 200) << json.dump();
  EXPECT_EQ(json["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(json["choices"][0]["text"], "");
}

TEST_F(CompletionServerTest, RefusesBadRequestsWithOpenAiErrors) {
  const RunningServer server(engine_, nullptr);
  expect_error(complete(server, R"({"prompt": "hi"})"), 400, "prompt", "no tokenizer.json");
  expect_error(complete(server, R"({"prompt": [1, 640]})"), 400, "prompt",
               "token id 640 outside the vocabulary");
  expect_error(complete(server, R"({"prompt": [1], "max_tokens": 65})"), 400, "max_tokens",
               "in [0, 64]");
  expect_error(complete(server, R"({"prompt": [1, 2], "max_tokens": 63})"), 400, "prompt",
               "exceeds the context of 64");
  expect_error(complete(server, R"({"prompt": [1], "stream": true})"), 400, "stream", "streaming");
  expect_error(complete(server, "{not json"), 400, "", "request body: invalid JSON");
  httplib::Client client = server.client();
  const auto missing = client.Get("/v1/chat/completions");
  ASSERT_TRUE(missing);
  expect_error({missing->status, Json::parse(missing->body)}, 404, "",
               "no route GET /v1/chat/completions");
}

std::pair<int, Json> chat(const RunningServer& server, const std::string& body) {
  return complete(server, body, "/v1/chat/completions");
}

TEST_F(CompletionServerTest, ChatAnswersAsTheEngineDoesOnTheEncodedPrompt) {
  Conversation conversation;
  conversation.messages = {{ChatRole::kSystem, "Be brief.", "", {}, ""},
                           {ChatRole::kUser, "hello world", "", {}, ""}};
  conversation.thinking = ThinkingMode::kThinking;
  const std::vector<int64_t> prompt =
      tokenize_chat_prompt(tokenizer_, encode_chat(conversation).value()).value();
  SamplingParams sampling;
  sampling.max_tokens = 5;
  sampling.temperature = 0.0f;
  Result<Generation> direct = engine_.generate({prompt, sampling});
  ASSERT_TRUE(direct.ok()) << direct.status().to_string();
  // The random-weight model draws from 640 ids, the small tokenizer knows 268 of them: a reply
  // it cannot decode must be the server's 500, one it can the same message.
  const Result<ChatReply> reply =
      decode_chat_reply(tokenizer_, direct->tokens, direct->stopped_at_eos, conversation.thinking);

  const RunningServer server(engine_, &tokenizer_);
  const std::string messages = R"("messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "hello world"}], "temperature": 0)";
  for (int repeat = 0; repeat < 2; ++repeat) {  // same request, same answer
    const auto got = chat(server, "{" + messages + R"(, "max_tokens": 5,
                                   "chat_template_kwargs": {"thinking": true}})");
    if (!reply.ok()) {
      expect_error(got, 500, "", reply.status().message());
      continue;
    }
    ASSERT_EQ(got.first, 200) << got.second.dump();
    const Json& message = got.second["choices"][0]["message"];
    EXPECT_EQ(message["content"], reply->content);
    EXPECT_EQ(message["reasoning_content"], reply->reasoning_content);
    EXPECT_EQ(got.second["usage"]["completion_tokens"], direct->tokens.size());
  }
  // No tokens: the answer's shape, and the prompt the server encoded has our ids' length.
  const auto [status, json] =
      chat(server, "{" + messages + R"(, "max_tokens": 0, "thinking": {"type": "enabled"}})");
  ASSERT_EQ(status, 200) << json.dump();
  EXPECT_EQ(json["object"], "chat.completion");
  const Json& choice = json["choices"][0];
  EXPECT_EQ(choice["message"],
            Json({{"role", "assistant"}, {"content", ""}, {"reasoning_content", ""}}));
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(json["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(json["usage"]["completion_tokens"], 0);
  // Chat mode: no reasoning_content in the message.
  const auto plain = chat(server, R"({"messages": [{"role": "user", "content": "hi"}],
                                      "max_tokens": 0})");
  ASSERT_EQ(plain.first, 200) << plain.second.dump();
  EXPECT_EQ(plain.second["choices"][0]["message"], Json({{"role", "assistant"}, {"content", ""}}));
}

TEST_F(CompletionServerTest, ChatRefusesBadRequestsWithOpenAiErrors) {
  const RunningServer with_tokenizer(engine_, &tokenizer_);
  expect_error(chat(with_tokenizer, R"({"messages": [{"role": "user", "content": "x"}],
                                        "max_tokens": 63})"),
               400, "messages", "exceeds the context of 64");
  expect_error(chat(with_tokenizer, R"({"messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f",
       "arguments": "[1]"}}]}, {"role": "tool", "tool_call_id": "a", "content": "r"}]})"),
               400, "messages", "arguments must be a JSON object");
  expect_error(chat(with_tokenizer, R"({"messages": [{"role": "user", "content": 1}]})"), 400,
               "messages[0].content", "must be a string");
  expect_error(chat(with_tokenizer, R"({"messages": [{"role": "user", "content": "x"}],
                                        "stream": true})"),
               400, "stream", "streaming");
  const RunningServer without_tokenizer(engine_, nullptr);
  expect_error(chat(without_tokenizer, R"({"messages": [{"role": "user", "content": "x"}]})"), 400,
               "messages", "no tokenizer.json");
}

}  // namespace
}  // namespace dsv4::server
