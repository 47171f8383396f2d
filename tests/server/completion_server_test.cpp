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

// POSTs `body` to /v1/completions; returns (status, parsed body).
std::pair<int, Json> complete(const RunningServer& server, const std::string& body) {
  httplib::Client client = server.client();
  const auto res = client.Post("/v1/completions", body, "application/json");
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

}  // namespace
}  // namespace dsv4::server
