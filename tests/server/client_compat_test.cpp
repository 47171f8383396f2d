// What OpenAI's and Anthropic's clients (and the libraries over them) send and expect, through a
// real HTTP client: a list of prompts, text parts, GET /v1/models/{id}, "created" and "refusal",
// bodies that are not UTF-8 or not JSON, the key on every working route, and ids the tokenizer
// lacks, which are never drawn and may not be asked for.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/server_fixture.h"
#include "testing/source_dir.h"

namespace dsv4::server {
namespace {

using format::Json;
using testing_fixture::every_id_tokenizer;
using testing_fixture::open_engine;
using testing_fixture::RunningServer;

std::pair<int, Json> post(const RunningServer& server, const std::string& path,
                          const std::string& body, const httplib::Headers& headers = {},
                          const char* type = "application/json") {
  httplib::Client client = server.client();
  const auto res = client.Post(path, headers, body, type);
  EXPECT_TRUE(res) << "no response";
  if (!res) return {0, Json()};
  return {res->status, Json::parse(res->body)};
}

class ClientCompatTest : public ::testing::Test {
 protected:
  ClientCompatTest() : engine_(open_engine()), every_id_(every_id_tokenizer()) {}
  Engine engine_;
  Tokenizer every_id_;
};

// A list of prompts: each gets its n choices, choice p * n + i drawn as prompt p's i-th alone.
TEST_F(ClientCompatTest, AListOfPromptsGetsTheChoicesOfEach) {
  const RunningServer server(engine_, nullptr);
  const auto [status, json] = post(server, "/v1/completions", R"({"prompt": [[259, 262], [108]],
      "max_tokens": 3, "n": 2, "temperature": 1, "seed": 5})");
  ASSERT_EQ(status, 200) << json.dump();
  ASSERT_EQ(json["choices"].size(), 4u);
  const std::vector<std::vector<int64_t>> prompts = {{259, 262}, {108}};
  for (size_t k = 0; k < 4; ++k) {
    GenerateRequest alone{prompts[k / 2],
                          {.temperature = 1.0f, .seed = 5 + k % 2, .max_tokens = 3}};
    const Result<Generation> direct = engine_.generate(alone);
    ASSERT_TRUE(direct.ok());
    EXPECT_EQ(json["choices"][k]["index"], k);
    EXPECT_EQ(json["choices"][k]["token_ids"], Json(direct->tokens)) << k;
  }
  EXPECT_EQ(json["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(json["usage"]["completion_tokens"], 12);
}

// Text parts and the developer role, as LangChain and the Vercel AI SDK send them, are the
// plain conversation; the message carries refusal: null as the SDK's type has it.
TEST_F(ClientCompatTest, ChatTakesTextPartsAndAnswersWithRefusal) {
  const RunningServer server(engine_, &every_id_);
  const std::string tail = R"(], "max_tokens": 4, "temperature": 0})";
  const auto parts = post(server, "/v1/chat/completions",
                          R"({"messages": [{"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "hello"},
                                   {"type": "text", "text": "world"}]})" +
                              tail);
  const auto plain = post(server, "/v1/chat/completions",
                          R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "hello\nworld"})" +
                              tail);
  ASSERT_EQ(parts.first, 200) << parts.second.dump();
  ASSERT_EQ(plain.first, 200) << plain.second.dump();
  const Json& message = parts.second["choices"][0]["message"];
  EXPECT_EQ(message, plain.second["choices"][0]["message"]);
  ASSERT_TRUE(message.contains("refusal"));
  EXPECT_TRUE(message["refusal"].is_null());
  const auto bad_tool = post(server, "/v1/chat/completions",
                             R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]})");
  EXPECT_EQ(bad_tool.first, 400);
  EXPECT_EQ(bad_tool.second["error"]["param"], "tools[0].function.parameters");
}

// Anthropic's ranges: max_tokens at least 1, temperature in [0, 1]; more than OpenAI's 4 stops.
TEST_F(ClientCompatTest, MessagesTakeAnthropicsRanges) {
  const RunningServer server(engine_, &every_id_);
  const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
  const auto zero = post(server, "/v1/messages", "{" + user + R"(, "max_tokens": 0})");
  EXPECT_EQ(zero.first, 400);
  EXPECT_EQ(zero.second["type"], "error");
  const auto hot = post(server, "/v1/messages", "{" + user + R"(, "max_tokens": 2,
      "temperature": 1.5})");
  EXPECT_EQ(hot.first, 400);
  const auto stops = post(server, "/v1/messages", "{" + user + R"(, "max_tokens": 2,
      "stop_sequences": ["a", "b", "c", "d", "e"]})");
  EXPECT_EQ(stops.first, 200) << stops.second.dump();
}

TEST_F(ClientCompatTest, ModelsHaveCreatedAndAnswerById) {
  ServerOptions options;
  options.model_name = "deepseek-v4";
  const RunningServer server(engine_, nullptr, options);
  httplib::Client client = server.client();
  const auto list = client.Get("/v1/models");
  ASSERT_TRUE(list);
  const Json entry = Json::parse(list->body)["data"][0];
  EXPECT_TRUE(entry["created"].is_number_integer());
  const auto one = client.Get("/v1/models/deepseek-v4");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200);
  EXPECT_EQ(Json::parse(one->body), entry);
  const auto other = client.Get("/v1/models/gpt-4");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(Json::parse(other->body)["error"]["code"], "model_not_found");
}

// A body that is not UTF-8 is the caller's mistake (400, the bytes replaced in the message);
// form data is refused saying so, while JSON labelled as a form (curl -d) is read as JSON.
TEST_F(ClientCompatTest, BadBodiesAreTheCallersMistakes) {
  const RunningServer server(engine_, nullptr);
  const auto utf8 =
      post(server, "/v1/completions", "{\"prompt\": \"\xff\xfe\", \"max_tokens\": 1}");
  EXPECT_EQ(utf8.first, 400) << utf8.second.dump();
  const auto form = post(server, "/v1/completions", "prompt=hi&max_tokens=1", {},
                         "application/x-www-form-urlencoded");
  EXPECT_EQ(form.first, 400);
  EXPECT_NE(form.second["error"]["message"].get<std::string>().find("send JSON"),
            std::string::npos);
  const std::string large(20000, ' ');  // past httplib's 8 KiB form limit, which said 413
  const auto json_as_form =
      post(server, "/v1/completions", R"({"prompt": [1, 2], "max_tokens": 1})" + large, {},
           "application/x-www-form-urlencoded");
  EXPECT_EQ(json_as_form.first, 200) << json_as_form.second.dump();
}

// With a key, every route that does work needs it (the tokenizer's too); the Bearer scheme is
// matched in any case; /health and /metrics stay open.
TEST_F(ClientCompatTest, TheKeyGuardsEveryWorkingRoute) {
  ServerOptions options;
  options.api_key = "sk-key";
  const RunningServer server(engine_, &every_id_, options);
  for (const char* path : {"/tokenize", "/detokenize", "/v1/completions", "/v1/messages"}) {
    EXPECT_EQ(post(server, path, "{}").first, 401) << path;
  }
  EXPECT_EQ(
      post(server, "/tokenize", R"({"prompt": "hi"})", {{"Authorization", "bearer sk-key"}}).first,
      200);
  EXPECT_EQ(
      post(server, "/tokenize", R"({"prompt": "hi"})", {{"Authorization", "BEARER  sk-key"}}).first,
      200);
  EXPECT_EQ(
      post(server, "/tokenize", R"({"prompt": "hi"})", {{"Authorization", "Basic sk-key"}}).first,
      401);
  httplib::Client client = server.client();
  for (const char* path : {"/health", "/metrics"}) {
    const auto res = client.Get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << path;
  }
  const auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
}

// The small tokenizer knows 268 of the model's 640 ids. Served with it, sampled answers draw only
// ids it decodes, and a logit_bias or prompt naming another one is a 400 (it was a 500 once the
// id was drawn).
TEST_F(ClientCompatTest, IdsTheTokenizerLacksAreNeverDrawn) {
  const Tokenizer small =
      Tokenizer::load(testing::source_path("tests/tokenizer/fixtures/small_tokenizer.json"))
          .value();
  EngineOptions engine_options;
  engine_options.model_dir = testing::source_path("tests/golden/tiny_a_pretrained/model");
  engine_options.max_context = 64;
  engine_options.decodable = [&](int64_t id) { return small.decode({id}).ok(); };
  Result<Engine> engine = Engine::open(engine_options);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  int64_t lacking = 0;
  while (small.decode({lacking}).ok()) ++lacking;
  const RunningServer server(*engine, &small);
  const auto [status, json] = post(server, "/v1/completions", R"({"prompt": [259, 262],
      "max_tokens": 40, "temperature": 2, "n": 4})");
  ASSERT_EQ(status, 200) << json.dump();
  for (const Json& choice : json["choices"]) {
    for (const Json& id : choice["token_ids"]) EXPECT_TRUE(small.decode({id.get<int64_t>()}).ok());
  }
  const std::string lacking_id = std::to_string(lacking);
  const auto biased = post(server, "/v1/completions",
                           R"({"prompt": [259], "logit_bias": {")" + lacking_id + R"(": 100}})");
  EXPECT_EQ(biased.first, 400) << biased.second.dump();
  EXPECT_NE(biased.second["error"]["message"].get<std::string>().find("not in the tokenizer"),
            std::string::npos);
  const auto prompt =
      post(server, "/v1/completions", R"({"prompt": [259, )" + lacking_id + R"(]})");
  EXPECT_EQ(prompt.first, 400) << prompt.second.dump();
}

}  // namespace
}  // namespace dsv4::server
