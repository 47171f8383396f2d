// Structured outputs through the server (the tiny random-weight checkpoint, the every-id
// tokenizer): every constrained reply of many sampled choices ends at eos and parses and
// validates against its format (checked here by hand, not by the grammar); formats the compiler
// does not support, and combinations the chat API does not take, are 400s naming what.
#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>
#include <sstream>
#include <string>
#include <utility>

#include "format/json.h"
#include "server/server_fixture.h"

namespace dsv4::server {
namespace {

using format::Json;
using testing_fixture::every_id_tokenizer;
using testing_fixture::open_engine;
using testing_fixture::post_json;
using testing_fixture::RunningServer;

// {"ok": boolean, "n": 1 | 2 | 3}, nothing else: at most 50 bytes with the widest whitespace,
// so every reply fits the tiny model's context.
const Json kSchema = Json::parse(R"({"type": "object", "additionalProperties": false,
    "properties": {"ok": {"type": "boolean"}, "n": {"enum": [1, 2, 3]}}, "required": ["ok", "n"]})");

bool fits_schema(const std::string& text) {
  if (!Json::accept(text)) return false;
  const Json doc = Json::parse(text);
  return doc.is_object() && doc.size() == 2 && doc.contains("ok") && doc["ok"].is_boolean() &&
         doc.contains("n") && (doc["n"] == 1 || doc["n"] == 2 || doc["n"] == 3);
}

class StructuredOutputServerTest : public ::testing::Test {
 protected:
  StructuredOutputServerTest() : engine_(open_engine()), tokenizer_(every_id_tokenizer()) {}
  Engine engine_;
  Tokenizer tokenizer_;
};

TEST_F(StructuredOutputServerTest, EveryCompletionChoiceParsesAndValidates) {
  RunningServer server(engine_, &tokenizer_);
  const Json formats[] = {
      {{"response_format",
        {{"type", "json_schema"},
         {"json_schema", {{"name", "t"}, {"schema", kSchema}, {"strict", true}}}}}},
      {{"structured_outputs", {{"json", kSchema}}}},
  };
  int n_replies = 0;
  for (const Json& format : formats) {
    for (const uint64_t seed : {1u, 2u}) {
      Json body = {{"prompt", {5, 6, 7}}, {"max_tokens", 58}, {"temperature", 1.0},
                   {"seed", seed},        {"n", 8},           {"logprobs", 2}};
      body.update(format);
      const auto [status, answer] = post_json(server, "/v1/completions", body);
      ASSERT_EQ(status, 200) << answer.dump();
      for (const Json& choice : answer["choices"]) {
        ++n_replies;
        EXPECT_EQ(choice["finish_reason"], "stop") << choice.dump();
        EXPECT_TRUE(fits_schema(choice["text"].get<std::string>())) << choice["text"];
        // Logprobs are the raw distribution's: a drawn token's is below 0, not 0 as a
        // single-token mask would make it.
        for (const Json& lp : choice["logprobs"]["token_logprobs"])
          EXPECT_LT(lp.get<double>(), 0.0);
      }
    }
  }
  EXPECT_EQ(n_replies, 32);
}

TEST_F(StructuredOutputServerTest, RegexAndChoiceReplies) {
  RunningServer server(engine_, &tokenizer_);
  const std::string pattern = "(yes|no)-[0-9]{2}";
  const auto [status, answer] = post_json(server, "/v1/completions",
                                          {{"prompt", {5, 6}},
                                           {"max_tokens", 20},
                                           {"temperature", 1.0},
                                           {"n", 8},
                                           {"structured_outputs", {{"regex", pattern}}}});
  ASSERT_EQ(status, 200) << answer.dump();
  for (const Json& choice : answer["choices"]) {
    EXPECT_EQ(choice["finish_reason"], "stop");
    EXPECT_TRUE(std::regex_match(choice["text"].get<std::string>(), std::regex(pattern))) << choice;
  }
  // Streamed: each choice's text chunks joined match too.
  httplib::Client client = server.client();
  client.set_read_timeout(120);
  const Json streamed = {{"prompt", {5, 6}},   {"max_tokens", 20},
                         {"temperature", 1.0}, {"n", 2},
                         {"stream", true},     {"structured_outputs", {{"regex", pattern}}}};
  const auto res = client.Post("/v1/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  std::string texts[2];
  std::istringstream events(res->body);
  for (std::string line; std::getline(events, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    const Json chunk = Json::parse(line.substr(6));
    for (const Json& c : chunk["choices"]) {
      texts[c["index"].get<size_t>()] += c["text"].get<std::string>();
    }
  }
  for (const std::string& text : texts) {
    EXPECT_TRUE(std::regex_match(text, std::regex(pattern))) << text;
  }
  const auto [status2, chosen] =
      post_json(server, "/v1/completions",
                {{"prompt", {5}},
                 {"max_tokens", 20},
                 {"temperature", 1.0},
                 {"n", 8},
                 {"structured_outputs", {{"choice", {"red", "green", "a.b"}}}}});
  ASSERT_EQ(status2, 200) << chosen.dump();
  for (const Json& choice : chosen["choices"]) {
    const std::string text = choice["text"];
    EXPECT_TRUE(text == "red" || text == "green" || text == "a.b") << text;
  }
}

TEST_F(StructuredOutputServerTest, ChatContentParsesAndValidatesStreamedToo) {
  RunningServer server(engine_, &tokenizer_);
  const Json small = Json::parse(R"({"type": "object", "properties": {"ok": {"type": "boolean"}},
                                     "required": ["ok"], "additionalProperties": false})");
  Json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"temperature", 1.0},
               {"n", 4},
               {"response_format",
                {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", small}}}}}};
  const auto [status, answer] = post_json(server, "/v1/chat/completions", body);
  ASSERT_EQ(status, 200) << answer.dump();
  for (const Json& choice : answer["choices"]) {
    EXPECT_EQ(choice["finish_reason"], "stop") << choice.dump();
    const std::string content = choice["message"]["content"];
    ASSERT_TRUE(Json::accept(content)) << content;
    const Json doc = Json::parse(content);
    EXPECT_TRUE(doc.is_object() && doc.size() == 1 && doc["ok"].is_boolean()) << content;
  }
  // Streamed: the content deltas joined are such a document.
  body["stream"] = true;
  body["n"] = 1;
  httplib::Client client = server.client();
  const auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  std::string content;
  std::istringstream events(res->body);
  for (std::string line; std::getline(events, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    const Json chunk = Json::parse(line.substr(6));
    for (const Json& c : chunk["choices"]) {
      if (c["delta"].contains("content") && c["delta"]["content"].is_string()) {
        content += c["delta"]["content"].get<std::string>();
      }
    }
  }
  ASSERT_TRUE(Json::accept(content)) << content;
  EXPECT_TRUE(Json::parse(content)["ok"].is_boolean()) << content;
}

// The chat endpoint takes every format the completions one does: a regex (vLLM's
// structured_outputs) holds every reply, and json_object (OpenAI's) any JSON object, on both.
// A free-form object is unbounded, so a reply may reach max_tokens first (finish_reason
// "length", as with OpenAI); every one that ends is an object, and every one begins as one.
TEST_F(StructuredOutputServerTest, ChatTakesARegexAndEitherEndpointJsonObject) {
  RunningServer server(engine_, &tokenizer_);
  const std::string pattern = "(yes|no)-[0-9]{2}";
  const Json user = {{{"role", "user"}, {"content", "hi"}}};
  const Json sampled = {{"temperature", 1.0}, {"n", 4}};
  Json regex_body = {{"messages", user}, {"max_tokens", 20}};
  regex_body.update(sampled);
  regex_body["structured_outputs"] = {{"regex", pattern}};
  const auto [status, answer] = post_json(server, "/v1/chat/completions", regex_body);
  ASSERT_EQ(status, 200) << answer.dump();
  for (const Json& choice : answer["choices"]) {
    EXPECT_EQ(choice["finish_reason"], "stop") << choice.dump();
    const std::string content = choice["message"]["content"];
    EXPECT_TRUE(std::regex_match(content, std::regex(pattern))) << content;
  }
  const Json object = {{"type", "json_object"}};
  const std::pair<const char*, Json> asks[] = {
      {"/v1/completions", {{"prompt", {5, 6}}, {"max_tokens", 40}}},
      {"/v1/chat/completions", {{"messages", user}}}};  // up to the context's end
  for (const auto& [path, ask] : asks) {
    Json body = ask;
    body.update(sampled);
    body["response_format"] = object;
    const auto [object_status, replies] = post_json(server, path, body);
    ASSERT_EQ(object_status, 200) << replies.dump();
    for (const Json& choice : replies["choices"]) {
      const std::string text =
          choice.contains("text") ? choice["text"] : choice["message"]["content"];
      EXPECT_EQ(text.substr(0, 1), "{") << path << ": " << text;
      if (choice["finish_reason"] == "length") continue;
      EXPECT_EQ(choice["finish_reason"], "stop") << choice.dump();
      EXPECT_TRUE(Json::accept(text) && Json::parse(text).is_object()) << path << ": " << text;
    }
  }
}

TEST_F(StructuredOutputServerTest, UnsupportedFormatsAreRefusedByName) {
  RunningServer server(engine_, &tokenizer_);
  auto schema_body = [](const Json& schema) {
    return Json{{"prompt", {5}},
                {"response_format",
                 {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}};
  };
  const std::pair<Json, std::string> refused[] = {
      {schema_body(Json::parse(R"({"type": "integer", "minimum": 3})")), "\"minimum\" at #"},
      {schema_body(Json::parse(R"({"type": "string", "format": "uri"})")), "format \"uri\""},
      {Json{{"prompt", {5}}, {"structured_outputs", {{"grammar", "root ::= x"}}}}, "grammar"},
      {Json{{"prompt", {5}}, {"structured_outputs", {{"regex", "(a)\\1"}}}}, "backreferences"},
      {Json{{"prompt", {5}}, {"response_format", {{"type", "yaml"}}}}, "json_schema"},
  };
  for (const auto& [body, named] : refused) {
    const auto [status, answer] = post_json(server, "/v1/completions", body);
    EXPECT_EQ(status, 400) << body.dump();
    EXPECT_NE(answer["error"]["message"].get<std::string>().find(named), std::string::npos)
        << answer.dump();
  }
  const Json thinking = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                         {"thinking", {{"type", "enabled"}}},
                         {"response_format", {{"type", "json_object"}}}};
  const auto [status, answer] = post_json(server, "/v1/chat/completions", thinking);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(answer["error"]["param"], "response_format") << answer.dump();
  // The chat endpoint refuses what the compiler does not support as completions does.
  const Json multiple_of = Json::parse(
      R"({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 2}}})");
  const Json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"response_format", schema_body(multiple_of)["response_format"]}};
  const auto [chat_status, chat_answer] = post_json(server, "/v1/chat/completions", chat);
  EXPECT_EQ(chat_status, 400);
  EXPECT_EQ(chat_answer["error"]["param"], "response_format") << chat_answer.dump();
  EXPECT_NE(
      chat_answer["error"]["message"].get<std::string>().find("\"multipleOf\" at #/properties/n"),
      std::string::npos)
      << chat_answer.dump();
}

}  // namespace
}  // namespace dsv4::server
