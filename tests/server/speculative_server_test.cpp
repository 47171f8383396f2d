// The server over an engine that decodes speculatively (EngineOptions::speculative_tokens, the
// shipped Brown model's MTP block), against the same server over a plain engine: greedy answers
// must be the same in everything a client sees - text, token ids, logprobs and their
// alternatives, a stop string's cut and finish_reason, the streamed chunks - and a prompt sent
// again (continued from the prefix cache's kept state, its MTP cache skipped ahead) answers the
// same again; /metrics counts the drafts. Logprobs come from a verify step's rows (k + 1 tokens
// in one forward) instead of one-token steps, so they agree to rounding (1e-4), not bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "format/json.h"
#include "server/server_fixture.h"
#include "testing/source_dir.h"

namespace dsv4::server {
namespace {

using format::Json;
using testing_fixture::post_json;
using testing_fixture::post_stream;
using testing_fixture::RunningServer;
using testing_fixture::Streamed;

constexpr float kLogprobTolerance = 1e-4f;

std::string brown_dir() { return testing::source_path("tests/golden/brown_small/model"); }

Engine open_brown(int64_t speculative_tokens) {
  EngineOptions options;
  options.model_dir = brown_dir();
  options.max_context = 160;
  options.speculative_tokens = speculative_tokens;
  Result<Engine> engine = Engine::open(options);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return std::move(engine).value();
}

// Over 64 tokens (kept in the prefix cache) in this tokenizer; a text the model continues with
// drafts it mostly keeps and some it does not.
constexpr const char* kPrompt =
    "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary "
    "election produced no evidence that any irregularities took place. The jury further said in "
    "term-end presentments that the City Executive Committee, which had over-all charge of the "
    "election, deserves the praise and thanks of the City of Atlanta";

Json request(int max_tokens) {
  return Json{{"prompt", kPrompt}, {"max_tokens", max_tokens}, {"temperature", 0},
              {"logprobs", 2}};
}

// The same choice, logprobs to rounding.
void expect_same_choice(const Json& got, const Json& want) {
  EXPECT_EQ(got["text"], want["text"]);
  EXPECT_EQ(got["token_ids"], want["token_ids"]);
  EXPECT_EQ(got["finish_reason"], want["finish_reason"]);
  const Json& lp = got["logprobs"];
  const Json& want_lp = want["logprobs"];
  ASSERT_EQ(lp["tokens"], want_lp["tokens"]);
  ASSERT_EQ(lp["token_logprobs"].size(), want_lp["token_logprobs"].size());
  for (size_t i = 0; i < lp["token_logprobs"].size(); ++i) {
    EXPECT_NEAR(lp["token_logprobs"][i].get<float>(), want_lp["token_logprobs"][i].get<float>(),
                kLogprobTolerance)
        << "token " << i;
    const Json& top = lp["top_logprobs"][i];
    const Json& want_top = want_lp["top_logprobs"][i];
    ASSERT_EQ(top.size(), want_top.size()) << "token " << i;
    for (const auto& [text, value] : want_top.items()) {
      ASSERT_TRUE(top.contains(text)) << "token " << i << " lacks the alternative " << text;
      EXPECT_NEAR(top[text].get<float>(), value.get<float>(), kLogprobTolerance);
    }
  }
}

class SpeculativeServerTest : public ::testing::Test {
 protected:
  SpeculativeServerTest()
      : plain_engine_(open_brown(0)),
        speculative_engine_(open_brown(2)),
        tokenizer_(Tokenizer::load(brown_dir() + "/tokenizer.json").value()) {}
  Engine plain_engine_;
  Engine speculative_engine_;
  Tokenizer tokenizer_;
};

TEST_F(SpeculativeServerTest, AnswersAsThePlainEngineWithStopsLogprobsAndThePrefixCache) {
  const RunningServer plain(plain_engine_, &tokenizer_);
  const RunningServer speculative(speculative_engine_, &tokenizer_);
  const auto [status, want] = post_json(plain, "/v1/completions", request(24));
  ASSERT_EQ(status, 200) << want.dump();
  const std::string text = want["choices"][0]["text"];
  ASSERT_GT(want["choices"][0]["token_ids"].size(), 8u);

  // Twice: the second from the first's kept state.
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const auto [got_status, got] = post_json(speculative, "/v1/completions", request(24));
    ASSERT_EQ(got_status, 200) << got.dump();
    expect_same_choice(got["choices"][0], want["choices"][0]);
  }
  EXPECT_GT(speculative_engine_.stats().cached_prompt_tokens, 0) << "no prefix was reused";

  // A stop string from the middle of the answer: the same cut, plain and streamed.
  const std::string stop = text.substr(text.size() / 2, 1);
  Json with_stop = request(24);
  with_stop["stop"] = Json::array({stop});
  const auto [cut_status, want_cut] = post_json(plain, "/v1/completions", with_stop);
  ASSERT_EQ(cut_status, 200) << want_cut.dump();
  ASSERT_EQ(want_cut["choices"][0]["finish_reason"], "stop");
  const auto [got_cut_status, got_cut] = post_json(speculative, "/v1/completions", with_stop);
  ASSERT_EQ(got_cut_status, 200) << got_cut.dump();
  expect_same_choice(got_cut["choices"][0], want_cut["choices"][0]);

  with_stop["stream"] = true;
  const Streamed streamed = post_stream(speculative, "/v1/completions", with_stop.dump());
  std::string streamed_text;
  Json streamed_ids = Json::array();
  for (const Json& chunk : streamed.chunks) {
    streamed_text += chunk["choices"][0]["text"].get<std::string>();
    for (const Json& id : chunk["choices"][0]["token_ids"]) streamed_ids.push_back(id);
  }
  EXPECT_EQ(streamed_text, want_cut["choices"][0]["text"]);
  EXPECT_EQ(streamed_ids, want_cut["choices"][0]["token_ids"]);
  ASSERT_FALSE(streamed.chunks.empty());
  EXPECT_EQ(streamed.chunks.back()["choices"][0]["finish_reason"], "stop");

  // The drafts were verified, and some were kept.
  httplib::Client client = speculative.client();
  const auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  const EngineStats stats = speculative_engine_.stats();
  EXPECT_GT(stats.accepted_tokens, 0);
  EXPECT_LT(stats.accepted_tokens, stats.drafted_tokens);
  EXPECT_NE(metrics->body.find("dsv4_drafted_tokens_total " + std::to_string(stats.drafted_tokens)),
            std::string::npos)
      << metrics->body;
}

}  // namespace
}  // namespace dsv4::server
