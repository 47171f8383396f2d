// parse_completion_request: what it accepts and how it reads it, and every refusal by field.
#include "server/completion_request.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/expect_refused.h"

namespace dsv4::server {
namespace {

CompletionRequest accept(const std::string& body) {
  auto parsed = parse_completion_request(body, {4096, 640});
  if (const auto* bad = std::get_if<RequestError>(&parsed)) {
    ADD_FAILURE() << body << ": " << bad->message;
    return {};
  }
  return std::get<CompletionRequest>(parsed);
}

// OpenAI's list of prompts, of text or of ids, each answered with its own choices.
TEST(CompletionRequestTest, ReadsAListOfPrompts) {
  const auto texts = parse_completion_request(R"({"prompt": ["a b", "c"]})", {4096, 640});
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(texts));
  const std::vector<Prompt>& prompts = std::get<CompletionRequest>(texts).prompts;
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(std::get<std::string>(prompts[0]), "a b");
  EXPECT_EQ(std::get<std::string>(prompts[1]), "c");
  const auto ids = parse_completion_request(R"({"prompt": [[1, 2], [3]]})", {4096, 640});
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(ids));
  EXPECT_EQ(std::get<std::vector<int64_t>>(std::get<CompletionRequest>(ids).prompts.at(1)),
            std::vector<int64_t>{3});
  // One prompt in a list streams as one prompt alone does.
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(
      parse_completion_request(R"({"prompt": ["a"], "stream": true})", {4096, 640})));
}

TEST(CompletionRequestTest, ReadsTextOrIdsAndTheSamplingFields) {
  const CompletionRequest ids = accept(R"({"prompt": [1, 2, 3], "max_tokens": 7,
      "temperature": 0, "top_p": 0.5, "top_k": 4, "seed": 9, "model": "x", "user": "u",
      "stream": false, "n": 1, "echo": false, "presence_penalty": 0, "stop": null})");
  EXPECT_EQ(std::get<std::vector<int64_t>>(ids.prompts.at(0)), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(ids.sampling.max_tokens, 7);
  EXPECT_EQ(ids.sampling.temperature, 0.0f);
  EXPECT_EQ(ids.sampling.top_p, 0.5f);
  EXPECT_EQ(ids.sampling.top_k, 4);
  EXPECT_EQ(ids.sampling.seed, 9u);
  const CompletionRequest text = accept(R"({"prompt": "hello"})");
  EXPECT_EQ(std::get<std::string>(text.prompts.at(0)), "hello");
  EXPECT_EQ(text.prompts.size(), 1u);
  // OpenAI's defaults: 16 tokens, temperature 1, top_p 1.
  EXPECT_EQ(text.sampling.max_tokens, 16);
  EXPECT_EQ(text.sampling.temperature, 1.0f);
  EXPECT_EQ(text.sampling.top_p, 1.0f);
  EXPECT_FALSE(text.stream.enabled);
  EXPECT_FALSE(ids.stream.enabled);
  EXPECT_TRUE(ids.stop.empty());
}

// OpenAI's answers differ from call to call unless seeded: a request without a seed gets a fresh
// one (each draw of 32 random bits; equal twice in a row once in 4e9).
TEST(CompletionRequestTest, WithoutASeedEachRequestGetsItsOwn) {
  EXPECT_NE(accept(R"({"prompt": "x"})").sampling.seed, accept(R"({"prompt": "x"})").sampling.seed);
  EXPECT_EQ(accept(R"({"prompt": "x", "seed": 0})").sampling.seed, 0u);
}

TEST(CompletionRequestTest, ReadsPenaltiesAndLogitBias) {
  const CompletionRequest r = accept(R"({"prompt": "x", "presence_penalty": 0.5,
      "frequency_penalty": -1.25, "logit_bias": {"7": -100, "12": 2.5}})");
  EXPECT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(r.sampling.frequency_penalty, -1.25f);
  EXPECT_EQ(r.sampling.logit_bias,
            (std::vector<std::pair<int64_t, float>>{{7, -100.0f}, {12, 2.5f}}));
}

TEST(CompletionRequestTest, ReadsLogprobsAndEcho) {
  const CompletionRequest asked = accept(R"({"prompt": [1, 2], "logprobs": 5, "echo": true,
      "max_tokens": 0})");
  EXPECT_EQ(asked.logprobs, 5);
  EXPECT_EQ(asked.n, 1);
  EXPECT_EQ(accept(R"({"prompt": [1], "n": 4})").n, 4);
  EXPECT_TRUE(asked.echo);
  EXPECT_EQ(asked.sampling.max_tokens, 0);
  const CompletionRequest plain = accept(R"({"prompt": [1, 2], "logprobs": null, "echo": false})");
  EXPECT_EQ(plain.logprobs, -1);
  EXPECT_FALSE(plain.echo);
}

TEST(CompletionRequestTest, ReadsStopAsAStringOrAList) {
  EXPECT_EQ(accept(R"({"prompt": "x", "stop": "\n\n"})").stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(accept(R"({"prompt": "x", "stop": ["a", "bc", "a"]})").stop,
            (std::vector<std::string>{"a", "bc", "a"}));
  EXPECT_TRUE(accept(R"({"prompt": "x", "stop": []})").stop.empty());
}

TEST(CompletionRequestTest, ReadsStreamAndStreamOptions) {
  const CompletionRequest plain = accept(R"({"prompt": "x", "stream": true})");
  EXPECT_TRUE(plain.stream.enabled);
  EXPECT_FALSE(plain.stream.include_usage);
  const CompletionRequest usage =
      accept(R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": true}})");
  EXPECT_TRUE(usage.stream.enabled);
  EXPECT_TRUE(usage.stream.include_usage);
  // null asks for nothing, as everywhere in the API.
  EXPECT_FALSE(accept(R"({"prompt": "x", "stream": null, "stream_options": null})").stream.enabled);
}

TEST(CompletionRequestTest, RefusesEachBadFieldByName) {
  const struct {
    const char* body;
    const char* param;
    const char* message;
  } cases[] = {
      {R"({"prompt": "x", "max_tokens": 5000})", "max_tokens", "in [0, 4096]"},
      {R"({"prompt": "x", "max_tokens": -1})", "max_tokens", "max_tokens must be an integer"},
      {R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens", "got 1.5"},
      {R"({"prompt": "x", "temperature": 3})", "temperature", "temperature must be a number"},
      {R"({"prompt": "x", "temperature": "hot"})", "temperature", "got \"hot\""},
      {R"({"prompt": "x", "top_p": 0})", "top_p", "greater than 0"},
      {R"({"prompt": "x", "top_p": 9e-56})", "top_p", "greater than 0"},  // 0 as a float
      {R"({"prompt": "x", "top_k": -2})", "top_k", "top_k must be an integer"},
      {R"({"prompt": "x", "seed": -1})", "seed", "seed must be an integer"},
      {R"({"prompt": "x", "stream": "yes"})", "stream",
       "stream must be true or false, got \"yes\""},
      {R"({"prompt": "x", "stream": 1})", "stream", "stream must be true or false, got 1"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options",
       "only allowed with stream true"},
      {R"({"prompt": "x", "stream": true, "stream_options": true})", "stream_options",
       "must be an object"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})",
       "stream_options.include_usage", "true or false"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"usage": true}})",
       "stream_options.usage", "unknown field"},
      {R"({"prompt": "x", "n": 17})", "n", "in [1, 16], got 17"},
      {R"({"prompt": "x", "n": 0})", "n", "got 0"},
      {R"({"prompt": "x", "best_of": 3})", "best_of", "best_of other than 1 is not supported"},
      {R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", "stop", "5 strings; at most 4"},
      {R"({"prompt": "x", "stop": ""})", "stop", "stop is empty"},
      {R"({"prompt": "x", "stop": ["a", ""]})", "stop", "stop[1] is empty"},
      {R"({"prompt": "x", "stop": 5})", "stop", "stop must be a string, got 5"},
      {R"({"prompt": "x", "stop": ["a", null]})", "stop", "stop[1] must be a string, got null"},
      {R"({"prompt": "x", "logprobs": 21})", "logprobs", "in [0, 20], got 21"},
      {R"({"prompt": "x", "logprobs": true})", "logprobs", "got true"},
      {R"({"prompt": "x", "echo": 1})", "echo", "echo must be true or false, got 1"},
      {R"({"prompt": "x", "echo": true, "stream": true, "logprobs": 0})", "echo",
       "echo with stream and logprobs is not supported"},
      {R"({"prompt": "x", "suffix": "y"})", "suffix", "suffix is not supported"},
      {R"({"prompt": "x", "frequency_penalty": -3})", "frequency_penalty", "got -3"},
      {R"({"prompt": "x", "presence_penalty": "1"})", "presence_penalty", "got \"1\""},
      {R"({"prompt": "x", "logit_bias": [1, 5]})", "logit_bias", "must be an object"},
      {R"({"prompt": "x", "logit_bias": {"a1": 5}})", "logit_bias", "\"a1\" is not a token id"},
      {R"({"prompt": "x", "logit_bias": {"-1": 5}})", "logit_bias", "\"-1\" is not a token id"},
      {R"({"prompt": "x", "logit_bias": {"1": 101}})", "logit_bias", "in [-100, 100], got 101"},
      {R"({"prompt": "x", "logit_bias": {"640": 1}})", "logit_bias",
       "token id 640 outside the vocabulary [0, 640)"},
      {R"({"prompt": "x", "logit_bias": {"1": "5"}})", "logit_bias", "got \"5\""},
      {R"({"prompt": "x", "model": 3})", "model", "model must be a string"},
      {R"({"prompt": "x", "max_tokns": 3})", "max_tokns", "unknown field \"max_tokns\""},
      {R"({"max_tokens": 3})", "prompt", "prompt is required"},
      {R"({"prompt": ""})", "prompt", "the prompt is empty"},
      {R"({"prompt": []})", "prompt", "the prompt is empty"},
      {R"({"prompt": [1, -2]})", "prompt", "got -2"},
      {R"({"prompt": [1, "a"]})", "prompt", "got \"a\""},
      {R"({"prompt": {"text": "x"}})", "prompt", "a string or an array of token ids"},
      {R"({"prompt": ["a", 1]})", "prompt", "prompt[1] must be a string or an array of token ids"},
      {R"({"prompt": ["a", ""]})", "prompt", "prompt[1] is empty"},
      {R"({"prompt": [[1], [-1]]})", "prompt[1]", "got -1"},
      {R"({"prompt": ["a", "b"], "stream": true})", "prompt", "answered whole, not streamed"},
      {R"(["prompt"])", "", "must be a JSON object"},
      {R"({"prompt": )", "", "request body: invalid JSON"},
      {R"({"prompt": "a", "prompt": "b"})", "", "request body"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    expect_refused(parse_completion_request(c.body, {4096, 640}), c.param, c.message);
  }
}

TEST(CompletionRequestTest, RefusesAStopStringPastItsLength) {
  const auto with_stop_of = [](size_t bytes) {
    std::string body = R"({"prompt": "x", "stop": ["a", ")";
    return body.append(bytes, 's').append(R"("]})");
  };
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(
      parse_completion_request(with_stop_of(kMaxStopBytes), {4096, 640})));
  expect_refused(parse_completion_request(with_stop_of(kMaxStopBytes + 1), {4096, 640}), "stop",
                 "stop[1] is 4097 bytes; at most 4096");
}

}  // namespace
}  // namespace dsv4::server
