// CompletionServer end to end on 127.0.0.1 (any free port) with the tiny random-weight golden
// checkpoint: answers compared with the Engine called directly, and every refusal's status and
// OpenAI-shaped error body.
#include "server/completion_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dsv4/chat.h"
#include "format/json.h"
#include "server/server_fixture.h"
#include "testing/source_dir.h"

namespace dsv4::server {
namespace {

using format::Json;
using testing_fixture::every_id_tokenizer;
using testing_fixture::open_engine;
using testing_fixture::post_stream;
using testing_fixture::RunningServer;
using testing_fixture::Streamed;

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
                .value()),
        every_id_(every_id_tokenizer()) {}
  Engine engine_;
  Tokenizer tokenizer_;
  Tokenizer every_id_;
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
  EXPECT_EQ(Json::parse(models->body)["data"][0]["max_model_len"], 64);
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
  expect_error(complete(server, R"({"prompt": [1], "stream": "yes"})"), 400, "stream",
               "stream must be true or false");
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
  EXPECT_EQ(choice["message"], Json({{"role", "assistant"},
                                     {"content", ""},
                                     {"reasoning_content", ""},
                                     {"refusal", nullptr}}));
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(json["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(json["usage"]["completion_tokens"], 0);
  // Chat mode: no reasoning_content in the message.
  const auto plain = chat(server, R"({"messages": [{"role": "user", "content": "hi"}],
                                      "max_tokens": 0})");
  ASSERT_EQ(plain.first, 200) << plain.second.dump();
  EXPECT_EQ(plain.second["choices"][0]["message"],
            Json({{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}));
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
                                        "stream": 1})"),
               400, "stream", "stream must be true or false");
  const RunningServer without_tokenizer(engine_, nullptr);
  expect_error(chat(without_tokenizer, R"({"messages": [{"role": "user", "content": "x"}]})"), 400,
               "messages", "no tokenizer.json");
}

// ---- Streamed answers ("stream": true) ----

// Each chunk: the endpoint's object, one id and model for all, finish_reason on the last only.
void expect_chunk_envelopes(const std::vector<Json>& chunks, const char* object) {
  ASSERT_FALSE(chunks.empty());
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i]["object"], object) << chunks[i];
    EXPECT_EQ(chunks[i]["id"], chunks[0]["id"]);
    EXPECT_EQ(chunks[i]["model"], "dsv4");
    ASSERT_EQ(chunks[i]["choices"].size(), 1u) << chunks[i];
    EXPECT_EQ(chunks[i]["choices"][0]["finish_reason"].is_null(), i + 1 < chunks.size())
        << chunks[i];
  }
}

// Requests in flight together, streamed and not, are batched by the engine and answered as each
// alone: the ids of the direct Engine call, and the streamed ids those of the whole answer. All
// connect at once, more than a small listen backlog would hold.
TEST_F(CompletionServerTest, ConcurrentRequestsAreAnsweredAsEachAlone) {
  constexpr int kClients = 16;
  std::vector<std::vector<int64_t>> direct(kClients);
  for (int c = 0; c < kClients; ++c) {
    SamplingParams sampling{
        .temperature = 1.0f, .top_k = 20, .seed = static_cast<uint64_t>(c), .max_tokens = 3 + c};
    Result<Generation> g =
        engine_.generate({{259, 262, 108, static_cast<int64_t>(100 + c)}, sampling});
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    direct[static_cast<size_t>(c)] = g->tokens;
  }
  const RunningServer server(engine_, nullptr);
  std::vector<std::vector<int64_t>> answered(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      const std::string request =
          "{\"prompt\": [259, 262, 108, " + std::to_string(100 + c) +
          "], \"max_tokens\": " + std::to_string(3 + c) +
          ", \"temperature\": 1, \"top_k\": 20, \"seed\": " + std::to_string(c);
      std::vector<int64_t>& ids = answered[static_cast<size_t>(c)];
      if (c % 2 == 0) {
        const auto [status, json] = complete(server, request + "}");
        EXPECT_EQ(status, 200) << json.dump();
        if (status == 200) ids = json["choices"][0]["token_ids"].get<std::vector<int64_t>>();
        return;
      }
      const Streamed streamed =
          post_stream(server, "/v1/completions", request + ", \"stream\": true}");
      for (const Json& chunk : streamed.chunks) {
        for (const Json& id : chunk["choices"][0]["token_ids"]) ids.push_back(id.get<int64_t>());
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (int c = 0; c < kClients; ++c)
    EXPECT_EQ(answered[static_cast<size_t>(c)], direct[static_cast<size_t>(c)]) << "client " << c;
}

// Seeds whose answer is compared whole and streamed: random byte pairs and bytes, so characters
// split across tokens and bytes that never make one (U+FFFD) both come up.
constexpr int kSeeds = 8;

// ---- Stop strings ----

// One whole character from the middle of `text` (at a UTF-8 lead byte), to stop at.
std::string character_in_the_middle(const std::string& text) {
  size_t at = text.size() / 2;
  while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
  size_t end = at + 1;
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  return text.substr(at, end - at);
}

// With one stop string taken from the middle of an answer, the same request (same seed) answers
// the text before its first occurrence (one string: the occurrence that completes first is the
// first), finish_reason "stop", the ids up to the token that completed it; streamed, the same.
TEST_F(CompletionServerTest, StopStringsCutTheTextAndEndGeneration) {
  const RunningServer server(engine_, &every_id_);
  int n_cut_early = 0;
  for (int seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::string request = R"({"prompt": [259, 262, 108, 100], "max_tokens": 12,
        "temperature": 1, "seed": )" +
                                std::to_string(seed);
    const auto full = complete(server, request + "}");
    ASSERT_EQ(full.first, 200) << full.second.dump();
    const std::string text = full.second["choices"][0]["text"];
    const auto ids = full.second["choices"][0]["token_ids"].get<std::vector<int64_t>>();
    if (text.size() < 2) continue;
    const std::string stop = character_in_the_middle(text);
    const std::string with_stop = request + R"(, "stop": [)" + Json(stop).dump() + "]";
    const auto cut = complete(server, with_stop + "}");
    ASSERT_EQ(cut.first, 200) << cut.second.dump();
    const Json& choice = cut.second["choices"][0];
    EXPECT_EQ(choice["text"], text.substr(0, text.find(stop)));
    EXPECT_EQ(choice["finish_reason"], "stop");
    const auto cut_ids = choice["token_ids"].get<std::vector<int64_t>>();
    ASSERT_LE(cut_ids.size(), ids.size());
    EXPECT_TRUE(std::equal(cut_ids.begin(), cut_ids.end(), ids.begin()));
    n_cut_early += cut_ids.size() < ids.size();
    EXPECT_EQ(cut.second["usage"]["completion_tokens"], cut_ids.size());

    const Streamed streamed = post_stream(server, "/v1/completions", with_stop + R"(,
        "stream": true})");
    std::string streamed_text;
    std::vector<int64_t> streamed_ids;
    for (const Json& chunk : streamed.chunks) {
      streamed_text += chunk["choices"][0]["text"].get<std::string>();
      for (const Json& id : chunk["choices"][0]["token_ids"]) streamed_ids.push_back(id);
    }
    EXPECT_EQ(streamed_text, choice["text"]);
    EXPECT_EQ(streamed_ids, cut_ids);
    ASSERT_FALSE(streamed.chunks.empty());
    EXPECT_EQ(streamed.chunks.back()["choices"][0]["finish_reason"], "stop");
  }
  EXPECT_GT(n_cut_early, 0) << "no stop string ended a generation before max_tokens";
}

TEST_F(CompletionServerTest, ChatStopStringsCutTheReply) {
  const RunningServer server(engine_, &every_id_);
  int n_cut = 0;
  for (int seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::string request = R"({"messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 12, "temperature": 1, "seed": )" +
                                std::to_string(seed);
    const auto full = chat(server, request + "}");
    ASSERT_EQ(full.first, 200) << full.second.dump();
    const Json& message = full.second["choices"][0]["message"];
    if (message.contains("tool_calls") || !message["content"].is_string()) continue;
    const std::string content = message["content"];
    if (content.size() < 2) continue;
    ++n_cut;
    const std::string stop = character_in_the_middle(content);
    const std::string with_stop = request + R"(, "stop": )" + Json(stop).dump();
    const auto cut = chat(server, with_stop + "}");
    ASSERT_EQ(cut.first, 200) << cut.second.dump();
    EXPECT_EQ(cut.second["choices"][0]["message"]["content"],
              content.substr(0, content.find(stop)));
    EXPECT_EQ(cut.second["choices"][0]["finish_reason"], "stop");
    const Streamed streamed = post_stream(server, "/v1/chat/completions", with_stop + R"(,
        "stream": true})");
    std::string streamed_content;
    for (const Json& chunk : streamed.chunks) {
      const Json& delta = chunk["choices"][0]["delta"];
      if (delta.contains("content")) streamed_content += delta["content"].get<std::string>();
    }
    EXPECT_EQ(streamed_content, cut.second["choices"][0]["message"]["content"]);
    ASSERT_FALSE(streamed.chunks.empty());
    EXPECT_EQ(streamed.chunks.back()["choices"][0]["finish_reason"], "stop");
  }
  EXPECT_GT(n_cut, 0) << "no seed gave a reply of plain content to cut";
}

TEST_F(CompletionServerTest, StopStringsNeedATokenizer) {
  const RunningServer server(engine_, nullptr);
  expect_error(complete(server, R"({"prompt": [1, 2], "stop": "x"})"), 400, "stop",
               "no tokenizer.json");
}

// ---- Logprobs and echo (lm-evaluation-harness's loglikelihood asks for both) ----

// The logprobs object's values are the engine's own TokenLogprobs, the echoed prompt's first
// token has none, a greedy token tops its alternatives, and the text is the prompt's then the
// answer's; with max_tokens 0 the answer is the prompt alone.
TEST_F(CompletionServerTest, LogprobsAreTheEnginesAndEchoAddsThePrompt) {
  const std::vector<int64_t> prompt = {259, 262, 108, 100, 7};
  GenerateRequest direct_request{prompt, {.temperature = 0.0f, .max_tokens = 4}};
  direct_request.logprobs = 3;
  direct_request.prompt_logprobs = true;
  const Result<Generation> direct = engine_.generate(direct_request);
  ASSERT_TRUE(direct.ok()) << direct.status().to_string();
  const std::string prompt_text = every_id_.decode(prompt).value();
  const std::string answer_text = every_id_.decode(direct->tokens).value();

  const RunningServer server(engine_, &every_id_);
  const auto [status, json] = complete(server, R"({"prompt": [259, 262, 108, 100, 7],
      "max_tokens": 4, "temperature": 0, "logprobs": 3, "echo": true})");
  ASSERT_EQ(status, 200) << json.dump();
  const Json& choice = json["choices"][0];
  EXPECT_EQ(choice["text"], prompt_text + answer_text);
  const Json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), prompt.size() + 4);
  ASSERT_EQ(lp["token_logprobs"].size(), prompt.size() + 4);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (size_t i = 1; i < prompt.size(); ++i) {
    EXPECT_EQ(lp["token_logprobs"][i].get<float>(), direct->prompt_logprobs[i - 1].logprob) << i;
    EXPECT_EQ(lp["tokens"][i], every_id_.decode({prompt[i]}).value());
  }
  size_t offset = 0;
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i], offset);
    offset += lp["tokens"][i].get<std::string>().size();
  }
  for (size_t j = 0; j < 4; ++j) {
    const size_t i = prompt.size() + j;
    EXPECT_EQ(lp["token_logprobs"][i].get<float>(), direct->logprobs[j].logprob) << j;
    const Json& top = lp["top_logprobs"][i];
    ASSERT_GE(top.size(), 1u);
    ASSERT_LE(top.size(), 4u);  // 3 alternatives, and the token if it were not among them
    std::string best;
    for (const auto& [text, value] : top.items()) {
      if (best.empty() || value.get<float>() > top[best].get<float>()) best = text;
    }
    EXPECT_EQ(best, lp["tokens"][i]) << "greedy token " << j << " is its position's most likely";
  }

  const auto [prompt_only_status, prompt_only] = complete(server, R"({"prompt": [259, 262, 108,
      100, 7], "max_tokens": 0, "logprobs": 1, "echo": true})");
  ASSERT_EQ(prompt_only_status, 200) << prompt_only.dump();
  EXPECT_EQ(prompt_only["choices"][0]["text"], prompt_text);
  EXPECT_EQ(prompt_only["choices"][0]["logprobs"]["tokens"].size(), prompt.size());
  EXPECT_EQ(prompt_only["choices"][0]["finish_reason"], "length");

  const auto [no_echo_status, no_echo] = complete(server, R"({"prompt": [259, 262, 108, 100, 7],
      "max_tokens": 4, "temperature": 0, "logprobs": 0})");
  ASSERT_EQ(no_echo_status, 200) << no_echo.dump();
  EXPECT_EQ(no_echo["choices"][0]["text"], answer_text);
  EXPECT_EQ(no_echo["choices"][0]["logprobs"]["tokens"].size(), 4u);
  EXPECT_EQ(no_echo["choices"][0]["logprobs"]["top_logprobs"][0].size(), 1u);  // the token alone
}

// Chat logprobs: one entry per generated token with the engine's logprob, the token's text as it
// decodes alone and its UTF-8 bytes (0-255), and top_logprobs alternatives, most likely first.
TEST_F(CompletionServerTest, ChatLogprobsAreTheEngines) {
  Conversation conversation;
  conversation.messages = {{ChatRole::kUser, "hi", "", {}, ""}};
  const std::vector<int64_t> prompt =
      tokenize_chat_prompt(every_id_, encode_chat(conversation).value()).value();
  GenerateRequest direct_request{prompt, {.temperature = 0.0f, .max_tokens = 4}};
  direct_request.logprobs = 2;
  const Result<Generation> direct = engine_.generate(direct_request);
  ASSERT_TRUE(direct.ok()) << direct.status().to_string();

  const RunningServer server(engine_, &every_id_);
  const auto [status, json] = chat(server, R"({"messages": [{"role": "user", "content": "hi"}],
      "max_tokens": 4, "temperature": 0, "logprobs": true, "top_logprobs": 2})");
  ASSERT_EQ(status, 200) << json.dump();
  const Json& content = json["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), direct->tokens.size());
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string text = every_id_.decode({direct->tokens[i]}).value();
    EXPECT_EQ(content[i]["token"], text);
    EXPECT_EQ(content[i]["logprob"].get<float>(), direct->logprobs[i].logprob);
    std::string bytes;
    for (const Json& b : content[i]["bytes"]) {
      ASSERT_TRUE(b.get<int>() >= 0 && b.get<int>() < 256) << b;
      bytes.push_back(static_cast<char>(b.get<int>()));
    }
    EXPECT_EQ(bytes, text);
    ASSERT_EQ(content[i]["top_logprobs"].size(), 2u);
    EXPECT_EQ(content[i]["top_logprobs"][0]["logprob"].get<float>(), direct->logprobs[i].logprob)
        << "greedy: the token is the most likely";
  }
  const auto [plain_status, plain] = chat(server, R"({"messages": [{"role": "user",
      "content": "hi"}], "max_tokens": 2})");
  ASSERT_EQ(plain_status, 200);
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

// Without max_tokens a chat reply may fill the context (OpenAI's chat default; the test server's
// context is 64), while a completion stops at OpenAI's legacy default of 16.
TEST_F(CompletionServerTest, ChatRepliesMayFillTheContextByDefault) {
  const RunningServer server(engine_, &every_id_);
  const auto [status, json] = chat(server, R"({"messages": [{"role": "user", "content": "hi"}],
      "temperature": 0, "stop": []})");
  ASSERT_EQ(status, 200) << json.dump();
  const int64_t used = json["usage"]["total_tokens"];
  if (json["choices"][0]["finish_reason"] == "length") {
    EXPECT_EQ(used, 64);
  } else {
    EXPECT_LE(used, 64);
  }
  EXPECT_GT(json["usage"]["completion_tokens"].get<int64_t>(), 16);
  const auto [completion_status, completion] = complete(server, R"({"prompt": [1, 2],
      "temperature": 0, "logit_bias": {"5": 100}})");
  ASSERT_EQ(completion_status, 200) << completion.dump();
  EXPECT_EQ(completion["usage"]["completion_tokens"], 16);
}

// n choices: choice i is the engine's answer with seed + i (the choices of one request differ),
// usage counts the prompt once and every choice's tokens; chat choices are indexed the same way.
TEST_F(CompletionServerTest, NChoicesAreDrawnWithConsecutiveSeeds) {
  const std::vector<int64_t> prompt = {259, 262, 108};
  std::vector<std::vector<int64_t>> direct;
  size_t n_tokens = 0;
  for (uint64_t seed = 40; seed < 43; ++seed) {
    Result<Generation> g =
        engine_.generate({prompt, {.temperature = 1.0f, .seed = seed, .max_tokens = 6}});
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    direct.push_back(g->tokens);
    n_tokens += g->tokens.size();
  }
  const RunningServer server(engine_, &every_id_);
  const auto [status, json] = complete(server, R"({"prompt": [259, 262, 108], "max_tokens": 6,
      "temperature": 1, "seed": 40, "n": 3})");
  ASSERT_EQ(status, 200) << json.dump();
  ASSERT_EQ(json["choices"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(json["choices"][i]["index"], i);
    EXPECT_EQ(json["choices"][i]["token_ids"].get<std::vector<int64_t>>(), direct[i]) << i;
    EXPECT_EQ(json["choices"][i]["text"], every_id_.decode(direct[i]).value()) << i;
  }
  EXPECT_NE(direct[0], direct[1]);
  EXPECT_EQ(json["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(json["usage"]["completion_tokens"], n_tokens);

  const auto [chat_status, chat_json] = chat(server, R"({"messages": [{"role": "user",
      "content": "hi"}], "max_tokens": 3, "n": 2})");
  ASSERT_EQ(chat_status, 200) << chat_json.dump();
  ASSERT_EQ(chat_json["choices"].size(), 2u);
  EXPECT_EQ(chat_json["choices"][1]["index"], 1);

  // Streamed: each choice's chunks carry its index, and put together they are the whole answer's.
  const Streamed streamed = post_stream(server, "/v1/completions", R"({"prompt": [259, 262, 108],
      "max_tokens": 6, "temperature": 1, "seed": 40, "n": 3, "stream": true,
      "stream_options": {"include_usage": true}})");
  std::vector<std::vector<int64_t>> ids(3);
  std::vector<std::string> texts(3), reasons(3);
  ASSERT_FALSE(streamed.chunks.empty());
  for (size_t c = 0; c + 1 < streamed.chunks.size(); ++c) {
    const Json& choice = streamed.chunks[c]["choices"][0];
    const size_t i = choice["index"];
    ASSERT_LT(i, 3u);
    for (const Json& id : choice["token_ids"]) ids[i].push_back(id.get<int64_t>());
    texts[i] += choice["text"].get<std::string>();
    if (!choice["finish_reason"].is_null()) reasons[i] = choice["finish_reason"];
  }
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ids[i], direct[i]) << i;
    EXPECT_EQ(texts[i], json["choices"][i]["text"]) << i;
    EXPECT_EQ(reasons[i], json["choices"][i]["finish_reason"]) << i;
  }
  EXPECT_EQ(streamed.chunks.back()["usage"]["completion_tokens"], n_tokens);
}

// /tokenize gives the tokenizer's ids (with and without the special tokens), /detokenize its
// text back; an id it does not know, or a server without a tokenizer, is a 400.
TEST_F(CompletionServerTest, TokenizeAndDetokenizeAreTheTokenizers) {
  const RunningServer server(engine_, &tokenizer_);
  const auto [status, json] = complete(server, R"({"prompt": "hello world"})", "/tokenize");
  ASSERT_EQ(status, 200) << json.dump();
  const std::vector<int64_t> want = tokenizer_.encode("hello world").value();
  EXPECT_EQ(json["tokens"].get<std::vector<int64_t>>(), want);
  EXPECT_EQ(json["count"], want.size());
  EXPECT_EQ(json["max_model_len"], 64);
  const auto bare =
      complete(server, R"({"prompt": "hello world", "add_special_tokens": false})", "/tokenize");
  EXPECT_EQ(bare.second["tokens"].get<std::vector<int64_t>>(),
            tokenizer_.encode("hello world", false).value());
  const auto back = complete(server, R"({"tokens": )" + Json(want).dump() + "}", "/detokenize");
  ASSERT_EQ(back.first, 200) << back.second.dump();
  EXPECT_EQ(back.second["prompt"], tokenizer_.decode(want).value());
  expect_error(complete(server, R"({"tokens": [100000]})", "/detokenize"), 400, "tokens", "100000");
  const RunningServer without(engine_, nullptr);
  expect_error(complete(without, R"({"prompt": "x"})", "/tokenize"), 400, "", "no tokenizer.json");
}

// GET /metrics: the engine's totals (the tokens drawn) and every answered request by route and
// status, unknown paths as "other". The server counts a request after its last byte went out, so
// the test asks until the counts are there.
TEST_F(CompletionServerTest, MetricsCountTheEngineAndTheRequests) {
  const RunningServer server(engine_, nullptr);
  ASSERT_EQ(complete(server, R"({"prompt": [1, 2], "max_tokens": 5, "seed": 1})").first, 200);
  ASSERT_EQ(complete(server, R"({"prompt": [1, 2], "max_tokens": -1})").first, 400);
  httplib::Client client = server.client();
  ASSERT_TRUE(client.Get("/no/such/route"));
  ASSERT_TRUE(client.Get("/health"));
  ASSERT_TRUE(client.Get("/v1/models"));
  ASSERT_TRUE(client.Post("/tokenize", R"({"prompt": "x"})", "application/json"));
  const std::vector<std::string> lines = {
      "dsv4_http_requests_total{path=\"/health\",status=\"200\"} 1\n",
      "dsv4_http_requests_total{path=\"/v1/models\",status=\"200\"} 1\n",
      "dsv4_http_requests_total{path=\"/tokenize\",status=\"400\"} 1\n",
      "dsv4_http_requests_total{path=\"/v1/completions\",status=\"200\"} 1\n",
      "dsv4_http_requests_total{path=\"/v1/completions\",status=\"400\"} 1\n",
      "dsv4_http_requests_total{path=\"other\",status=\"404\"} 1\n",
      "# TYPE dsv4_generated_tokens_total counter\ndsv4_generated_tokens_total 5\n",
      "dsv4_prompt_tokens_total 2\n",
      "dsv4_sequences_running 0\n"};
  const auto missing = [&](const std::string& text) {
    for (const std::string& line : lines) {
      if (text.find(line) == std::string::npos) return line;
    }
    return std::string();
  };
  std::string text;
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto res = client.Get("/metrics");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    text = res->body;
    if (missing(text).empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(missing(text), "") << "not in\n" << text;
}

// With an API key the /v1/ routes answer 401 unless the request carries it as a bearer token
// (a wrong one, one a character short, none); /health stays open.
TEST_F(CompletionServerTest, AnApiKeyGuardsTheV1Routes) {
  ServerOptions options;
  options.api_key = "sk-test-123";
  const RunningServer server(engine_, nullptr, options);
  httplib::Client client = server.client();
  const std::string body = R"({"prompt": [1, 2], "max_tokens": 1})";
  for (const char* header : {"", "Bearer sk-test-124", "Bearer sk-test-12", "sk-test-123"}) {
    SCOPED_TRACE(header);
    httplib::Headers headers;
    if (*header != '\0') headers.emplace("Authorization", header);
    const auto res = client.Post("/v1/completions", headers, body, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401);
    EXPECT_NE(res->body.find("API key"), std::string::npos) << res->body;
  }
  const auto ok = client.Post("/v1/completions", {{"Authorization", "Bearer sk-test-123"}}, body,
                              "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  const auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// logit_bias +100 on one token makes it every greedy choice; an id outside the vocabulary is
// refused in the field's name.
TEST_F(CompletionServerTest, LogitBiasReachesTheSampler) {
  const RunningServer server(engine_, nullptr);
  const auto [status, json] = complete(server, R"({"prompt": [259, 262], "max_tokens": 5,
      "temperature": 0, "logit_bias": {"123": 100}, "frequency_penalty": 0.5})");
  ASSERT_EQ(status, 200) << json.dump();
  EXPECT_EQ(json["choices"][0]["token_ids"], Json(std::vector<int64_t>(5, 123)));
  expect_error(complete(server, R"({"prompt": [1], "logit_bias": {"640": 1}})"), 400, "logit_bias",
               "logit_bias token id 640 outside the vocabulary [0, 640)");
}

// A second server on a port in use is refused: the listening socket does not set SO_REUSEPORT
// (httplib's default), which let both bind and split the connections between them.
TEST_F(CompletionServerTest, APortInUseIsRefused) {
  CompletionServer first(engine_, nullptr, {});
  const Result<int> port = first.bind("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status().to_string();
  CompletionServer second(engine_, nullptr, {});
  const Result<int> again = second.bind("127.0.0.1", *port);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("cannot listen on 127.0.0.1:" + std::to_string(*port)),
            std::string::npos)
      << again.status().message();
}

// Echoed too (every other seed): the prompt's text is the first chunk.
TEST_F(CompletionServerTest, StreamsTheWholeAnswersIdsAndText) {
  for (const Tokenizer* tokenizer :
       {static_cast<const Tokenizer*>(nullptr), &std::as_const(tokenizer_)}) {
    const RunningServer server(engine_, tokenizer);
    int n_decoded = 0;
    for (int seed = 0; seed < kSeeds; ++seed) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      const std::string request = R"({"prompt": [259, 262, 108, 100], "max_tokens": 6,
          "temperature": 1, "top_k": 8, "echo": )" +
                                  std::string(seed % 2 ? "true" : "false") + R"(, "seed": )" +
                                  std::to_string(seed);
      const auto whole = complete(server, request + "}");
      const Streamed streamed = post_stream(server, "/v1/completions", request + R"(,
          "stream": true, "stream_options": {"include_usage": true}})");
      EXPECT_EQ(streamed.content_type, "text/event-stream");
      if (whole.first != 200) {  // an id the tokenizer lacks: an error event
        ASSERT_FALSE(streamed.chunks.empty());
        EXPECT_EQ(streamed.chunks.back()["error"]["type"], "server_error")
            << streamed.chunks.back();
        continue;
      }
      ++n_decoded;
      ASSERT_GE(streamed.chunks.size(), 2u);
      const Json usage = streamed.chunks.back();  // include_usage: the last, without choices
      EXPECT_EQ(usage["choices"], Json::array());
      EXPECT_EQ(usage["usage"], whole.second["usage"]);
      const std::vector<Json> chunks(streamed.chunks.begin(), streamed.chunks.end() - 1);
      expect_chunk_envelopes(chunks, "text_completion");
      std::string text;
      std::vector<int64_t> ids;
      for (const Json& chunk : chunks) {
        EXPECT_TRUE(chunk["usage"].is_null()) << chunk;
        text += chunk["choices"][0]["text"].get<std::string>();
        for (const Json& id : chunk["choices"][0]["token_ids"]) ids.push_back(id.get<int64_t>());
      }
      const Json& choice = whole.second["choices"][0];
      EXPECT_EQ(text, choice["text"]);
      EXPECT_EQ(ids, choice["token_ids"].get<std::vector<int64_t>>());
      EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], choice["finish_reason"]);
    }
  }
}

TEST_F(CompletionServerTest, ChatStreamsTheWholeAnswersMessage) {
  const RunningServer server(engine_, &every_id_);
  for (const char* thinking : {"true", "false"}) {
    for (int seed = 0; seed < kSeeds; ++seed) {
      SCOPED_TRACE(std::string("thinking ") + thinking + ", seed " + std::to_string(seed));
      const std::string request = R"({"messages": [{"role": "user", "content": "hello world"}],
          "max_tokens": 6, "temperature": 1, "top_k": 8, "chat_template_kwargs": {"thinking": )" +
                                  std::string(thinking) + R"(}, "seed": )" + std::to_string(seed);
      const auto whole = chat(server, request + "}");
      const Streamed streamed =
          post_stream(server, "/v1/chat/completions", request + R"(, "stream": true})");
      ASSERT_GE(streamed.chunks.size(), 1u);
      const Json first = streamed.chunks.front()["choices"][0]["delta"];
      EXPECT_EQ(first, Json({{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}));
      ASSERT_EQ(whole.first, 200) << whole.second.dump();
      expect_chunk_envelopes(streamed.chunks, "chat.completion.chunk");
      std::string reasoning, content;
      for (const Json& chunk : streamed.chunks) {
        EXPECT_FALSE(chunk.contains("usage")) << chunk;  // not asked for
        const Json& delta = chunk["choices"][0]["delta"];
        reasoning += delta.value("reasoning_content", "");
        content += delta.value("content", "");
      }
      const Json& choice = whole.second["choices"][0];
      const std::string whole_reasoning = choice["message"].value("reasoning_content", "");
      const std::string whole_content = choice["message"]["content"];
      // The random model never closes its reasoning: one that stopped at eos broke the format,
      // and the whole answer is all content, while the stream had sent it as reasoning
      // (chat_stream.h). No text is lost either way.
      EXPECT_EQ(reasoning + content, whole_reasoning + whole_content);
      if (whole_reasoning.empty() && !reasoning.empty()) {
        EXPECT_EQ(choice["finish_reason"], "stop");
      } else {
        EXPECT_EQ(reasoning, whole_reasoning);
        EXPECT_EQ(content, whole_content);
      }
      EXPECT_EQ(streamed.chunks.back()["choices"][0]["finish_reason"], choice["finish_reason"]);
    }
  }
}

// continue_final_message: the last assistant message is a prefill the reply continues; the
// answer, streamed or not, holds only the continuation.
TEST_F(CompletionServerTest, ChatContinuesAFinalAssistantMessage) {
  Conversation conversation;
  conversation.messages = {{ChatRole::kUser, "hello world", "", {}, ""}};
  conversation.prefill = "Sure,";
  const std::vector<int64_t> prompt =
      tokenize_chat_prompt(every_id_, encode_chat(conversation).value()).value();
  SamplingParams sampling;
  sampling.max_tokens = 6;
  sampling.temperature = 0.0f;
  const Generation direct = engine_.generate({prompt, sampling}).value();
  std::vector<int64_t> generated = direct.tokens;
  if (direct.stopped_at_eos) generated.pop_back();
  const ChatReply reply =
      read_reply(conversation, every_id_.decode(generated).value(), direct.stopped_at_eos);

  const RunningServer server(engine_, &every_id_);
  const std::string request = R"({"messages": [{"role": "user", "content": "hello world"},
      {"role": "assistant", "content": "Sure,"}], "max_tokens": 6, "temperature": 0,
      "continue_final_message": true, "add_generation_prompt": false)";
  const auto whole = chat(server, request + "}");
  ASSERT_EQ(whole.first, 200) << whole.second.dump();
  EXPECT_EQ(whole.second["choices"][0]["message"]["content"], reply.content);
  EXPECT_EQ(whole.second["usage"]["prompt_tokens"], prompt.size());
  const Streamed streamed =
      post_stream(server, "/v1/chat/completions", request + R"(, "stream": true})");
  std::string content;
  for (const Json& chunk : streamed.chunks) {
    content += chunk["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(content, reply.content);
  // Without the switch a final assistant message is refused, as before.
  expect_error(chat(server, R"({"messages": [{"role": "user", "content": "x"},
                                {"role": "assistant", "content": "y"}]})"),
               400, "messages[1].role", "the last message must be the user's or a tool's");
}

// Streamed logprobs, each chunk with its tokens', add up to the whole answer's: the completion
// API's four arrays (text_offset going on across chunks), the chat API's content list; two
// choices each.
TEST_F(CompletionServerTest, StreamedLogprobsAddUpToTheWholeAnswers) {
  const RunningServer server(engine_, &every_id_);
  const std::string completion = R"({"prompt": [259, 262, 108, 100, 7], "max_tokens": 6,
      "temperature": 1, "seed": 5, "n": 2, "logprobs": 2)";
  const auto whole = complete(server, completion + "}");
  ASSERT_EQ(whole.first, 200) << whole.second.dump();
  const Streamed streamed =
      post_stream(server, "/v1/completions", completion + R"(, "stream": true})");
  for (size_t i = 0; i < 2; ++i) {
    Json joined = {{"tokens", Json::array()},
                   {"token_logprobs", Json::array()},
                   {"top_logprobs", Json::array()},
                   {"text_offset", Json::array()}};
    for (const Json& chunk : streamed.chunks) {
      const Json& choice = chunk["choices"][0];
      if (choice["index"] != i) continue;
      for (const auto& [key, list] : choice["logprobs"].items()) {
        for (const Json& item : list) joined[key].push_back(item);
      }
    }
    EXPECT_EQ(joined, whole.second["choices"][i]["logprobs"]) << i;
  }

  const std::string chat_request = R"({"messages": [{"role": "user", "content": "hello world"}],
      "max_tokens": 6, "temperature": 1, "seed": 5, "n": 2, "logprobs": true,
      "top_logprobs": 2)";
  const auto whole_chat = chat(server, chat_request + "}");
  ASSERT_EQ(whole_chat.first, 200) << whole_chat.second.dump();
  const Streamed streamed_chat =
      post_stream(server, "/v1/chat/completions", chat_request + R"(, "stream": true})");
  for (size_t i = 0; i < 2; ++i) {
    Json content = Json::array();
    for (const Json& chunk : streamed_chat.chunks) {
      const Json& choice = chunk["choices"][0];
      if (choice["index"] != i || choice["logprobs"].is_null()) continue;
      for (const Json& item : choice["logprobs"]["content"]) content.push_back(item);
    }
    EXPECT_EQ(content, whole_chat.second["choices"][i]["logprobs"]["content"]) << i;
  }
}

// An id the small tokenizer lacks, drawn after the stream began: the whole answer's 500 is an
// error event, then [DONE].
TEST_F(CompletionServerTest, AnErrorAfterTheStreamBeganIsAnEvent) {
  const RunningServer server(engine_, &tokenizer_);
  const std::string request = R"({"prompt": [259, 262, 108, 100], "max_tokens": 6, "seed": 1)";
  expect_error(complete(server, request + "}"), 500, "", "is not in the tokenizer");
  const Streamed streamed =
      post_stream(server, "/v1/completions", request + R"(, "stream": true})");
  ASSERT_FALSE(streamed.chunks.empty());
  const Json& last = streamed.chunks.back();
  EXPECT_EQ(last["error"]["type"], "server_error") << last;
  EXPECT_NE(last["error"]["message"].get<std::string>().find("is not in the tokenizer"),
            std::string::npos)
      << last;
}

// Refusals found before generation starts are whole JSON errors with their status, as unstreamed.
TEST_F(CompletionServerTest, StreamRefusalsBeforeGenerationAreJsonErrors) {
  const RunningServer server(engine_, &tokenizer_);
  expect_error(complete(server, R"({"prompt": [1, 2], "max_tokens": 63, "stream": true})"), 400,
               "prompt", "exceeds the context of 64");
  expect_error(complete(server, R"({"prompt": [1, 640], "stream": true})"), 400, "prompt",
               "token id 640 outside the vocabulary");
  expect_error(chat(server, R"({"messages": [{"role": "user", "content": "x"}],
                                "max_tokens": 63, "stream": true})"),
               400, "messages", "exceeds the context of 64");
  expect_error(complete(server, R"({"prompt": [1], "stream_options": {"include_usage": true}})"),
               400, "stream_options", "only allowed with stream true");
}

// A client that leaves after the first event stops its generation, and the server goes on.
TEST_F(CompletionServerTest, AClientThatLeavesMidStreamDoesNotStopTheServer) {
  const RunningServer server(engine_, &every_id_);
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    httplib::Request request;
    request.method = "POST";
    request.path = path;
    request.set_header("Content-Type", "application/json");
    request.body = std::string(path) == "/v1/completions"
                       ? R"({"prompt": [259, 262], "max_tokens": 60, "stream": true})"
                       : R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 50,
                             "stream": true})";
    int n_received = 0;
    request.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      ++n_received;
      return false;  // gone after the first piece
    };
    httplib::Client client = server.client();
    EXPECT_FALSE(client.send(request));
    EXPECT_EQ(n_received, 1);
  }
  const auto next = complete(server, R"({"prompt": [259, 262], "max_tokens": 2})");
  EXPECT_EQ(next.first, 200) << next.second.dump();
  const Streamed again = post_stream(server, "/v1/completions",
                                     R"({"prompt": [259, 262], "max_tokens": 2, "stream": true})");
  EXPECT_FALSE(again.chunks.empty());
}

}  // namespace
}  // namespace dsv4::server
