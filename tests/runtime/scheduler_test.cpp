// Continuous batching through the public Engine (runtime/scheduler.h): requests from many
// threads at once, more of them than the batch has places, prompts whole or in chunks, come out
// token for token as each does alone (the CPU forward is batch-invariant: docs/numerics.md), greedy
// and sampled alike; a caller whose on_token stops or throws gets what it saw, and the engine goes
// on serving.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "dsv4/engine.h"
#include "model/golden.h"
#include "runtime/token_set_constraint.h"

namespace dsv4 {
namespace {

EngineOptions options_for(int64_t max_batch, int64_t max_step_tokens = 2048) {
  EngineOptions options;
  options.model_dir = testing::golden_path("tiny_b_state_dict/model");
  options.max_context = 64;
  options.max_batch = max_batch;
  options.max_step_tokens = max_step_tokens;
  return options;
}

Engine open_engine(int64_t max_batch, int64_t max_step_tokens = 2048) {
  auto engine = Engine::open(options_for(max_batch, max_step_tokens));
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return std::move(engine).value();
}

// Prompts of 1-20 random ids, 0-12 tokens each, greedy or sampled with a seed, eos or not.
std::vector<GenerateRequest> varied_requests(size_t n, int64_t vocab, std::mt19937_64& rng) {
  std::vector<GenerateRequest> requests(n);
  for (GenerateRequest& r : requests) {
    r.prompt.resize(1 + rng() % 20);
    for (int64_t& id : r.prompt) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
    r.sampling.max_tokens = static_cast<int64_t>(rng() % 13);
    r.sampling.stop_at_eos = rng() % 2 == 0;
    if (rng() % 2 == 0) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 40;
      r.sampling.seed = rng();
    }
  }
  return requests;
}

// Each request alone, one after another.
std::vector<Generation> one_at_a_time(Engine& engine,
                                      const std::vector<GenerateRequest>& requests) {
  std::vector<Generation> out;
  for (const GenerateRequest& r : requests) {
    Result<Generation> g = engine.generate(r);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    out.push_back(g.ok() ? *std::move(g) : Generation{});
  }
  return out;
}

struct Limits {
  int64_t max_batch, max_step_tokens;
};
void PrintTo(const Limits& l, std::ostream* os) { *os << l.max_batch << "/" << l.max_step_tokens; }

class SchedulerTest : public ::testing::TestWithParam<Limits> {};

TEST_P(SchedulerTest, ConcurrentCallersGetWhatEachGetsAlone) {
  Engine engine = open_engine(GetParam().max_batch, GetParam().max_step_tokens);
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<GenerateRequest> requests = varied_requests(12, engine.vocab_size(), rng);
  const std::vector<Generation> alone = one_at_a_time(engine, requests);

  std::vector<Result<Generation>> together(requests.size(), internal_error("not run"));
  std::vector<std::thread> callers;
  for (size_t i = 0; i < requests.size(); ++i)
    callers.emplace_back([&, i] { together[i] = engine.generate(requests[i]); });
  for (std::thread& t : callers) t.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(together[i].ok()) << i << ": " << together[i].status().to_string();
    EXPECT_EQ(together[i]->tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(together[i]->stopped_at_eos, alone[i].stopped_at_eos) << "request " << i;
    EXPECT_EQ(together[i]->token_times.size(), together[i]->tokens.size()) << "request " << i;
  }
}

// Roomy; three places and whole prompts; three places fed 3 tokens a step (prompts in chunks).
INSTANTIATE_TEST_SUITE_P(Limits, SchedulerTest,
                         ::testing::Values(Limits{32, 2048}, Limits{3, 2048}, Limits{3, 3}),
                         [](const auto& p) {
                           return "batch_" + std::to_string(p.param.max_batch) + "_step_tokens_" +
                                  std::to_string(p.param.max_step_tokens);
                         });

TEST(SchedulerLimitsTest, AreChecked) {
  EXPECT_EQ(Engine::open(options_for(0)).status().code(), StatusCode::kInvalidArgument);
  const Status small_step = Engine::open(options_for(8, 7)).status();
  EXPECT_EQ(small_step.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(small_step.message().find("max_step_tokens (7) must be at least max_batch (8)"),
            std::string::npos)
      << small_step.message();
  const Status large_step = Engine::open(options_for(8, kMaxStepTokens + 1)).status();
  EXPECT_EQ(large_step.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(large_step.message().find("max_step_tokens (" + std::to_string(kMaxStepTokens + 1) +
                                      ") must be at most " + std::to_string(kMaxStepTokens)),
            std::string::npos)
      << large_step.message();
  for (const int64_t mb : {int64_t{-1}, (int64_t{1} << 40) + 1}) {
    EngineOptions options = options_for(4);
    options.prefix_cache_mb = mb;
    const Status cache = Engine::open(options).status();
    EXPECT_EQ(cache.code(), StatusCode::kInvalidArgument) << mb;
    EXPECT_NE(cache.message().find("prefix_cache_mb"), std::string::npos) << cache.message();
  }
}

// A sequence whose caches cannot be allocated fails alone with resource_exhausted (the server's
// 503), after the prefix cache's kept states made way for it, and the engine serves the next
// request.
TEST(SchedulerLimitsTest, ASequenceTooLargeForMemoryFailsAlone) {
  EngineOptions options = options_for(4);
  options.max_context = int64_t{1} << 50;
  Result<Engine> engine = Engine::open(options);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  ASSERT_TRUE(engine->generate({std::vector<int64_t>(80, 5), {.max_tokens = 3}}).ok());
  EXPECT_GT(engine->stats().prefix_cache_bytes, 0);
  const Status huge = engine->generate({{1, 2}, {.max_tokens = int64_t{1} << 49}}).status();
  EXPECT_EQ(huge.code(), StatusCode::kResourceExhausted) << huge.to_string();
  EXPECT_TRUE(engine->generate({{1, 2}, {.max_tokens = 3}}).ok());
  EXPECT_EQ(engine->stats().prefix_cache_bytes, 0);
}

// stats(): the totals count every prompt token and drawn token of the requests run, and the
// gauges are back to zero once they are done (the worker copies them right after its step, so
// the test waits for that copy).
TEST(SchedulerStatsTest, CountWhatWasRun) {
  Engine engine = open_engine(4);
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<GenerateRequest> requests = varied_requests(6, engine.vocab_size(), rng);
  const std::vector<Generation> out = one_at_a_time(engine, requests);
  int64_t prompt_tokens = 0, generated = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    prompt_tokens += static_cast<int64_t>(requests[i].prompt.size());
    generated += static_cast<int64_t>(out[i].tokens.size());
  }
  EngineStats stats = engine.stats();
  for (int wait = 0; wait < 1000 && stats.finished < 6; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stats = engine.stats();
  }
  EXPECT_EQ(stats.finished, 6);
  EXPECT_EQ(stats.prompt_tokens, prompt_tokens);
  EXPECT_EQ(stats.generated_tokens, generated);
  EXPECT_GE(stats.steps, 6);
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.waiting, 0);
}

TEST(SchedulerStopTest, AStopKeepsWhatTheCallerSawAndTheEngineServesOn) {
  Engine engine = open_engine(4);
  GenerateRequest r{{0, 17, 4, 200}, {.max_tokens = 12, .stop_at_eos = false}};
  r.return_step_logits = true;
  r.logprobs = 2;
  const Result<Generation> full = engine.generate(r);
  ASSERT_TRUE(full.ok());
  std::vector<int64_t> seen;
  std::vector<float> seen_logprobs;  // each token's, delivered just before the token
  r.on_logprob = [&](const TokenLogprob& lp) {
    EXPECT_EQ(seen_logprobs.size(), seen.size()) << "one logprob before each token";
    seen_logprobs.push_back(lp.logprob);
  };
  r.on_token = [&](int64_t token) {
    seen.push_back(token);
    return seen.size() < 5;
  };
  const Result<Generation> stopped = engine.generate(r);
  ASSERT_TRUE(stopped.ok());
  const std::vector<int64_t> first_five(full->tokens.begin(), full->tokens.begin() + 5);
  EXPECT_EQ(seen, first_five);
  ASSERT_EQ(seen_logprobs.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(seen_logprobs[i], full->logprobs[i].logprob) << i;
  r.on_logprob = nullptr;
  EXPECT_EQ(stopped->tokens, first_five);
  EXPECT_EQ(stopped->token_times.size(), 5u);
  ASSERT_EQ(stopped->logprobs.size(), 5u);
  EXPECT_EQ(stopped->logprobs[4].logprob, full->logprobs[4].logprob);
  EXPECT_EQ(stopped->step_logits,
            std::vector<float>(full->step_logits.begin(),
                               full->step_logits.begin() + 5 * engine.vocab_size()));
  EXPECT_TRUE(stopped->stopped_by_caller);

  r.on_token = [&](int64_t) -> bool { throw std::runtime_error("caller failed"); };
  EXPECT_THROW((void)engine.generate(r), std::runtime_error);
  r.on_token = nullptr;
  const Result<Generation> after = engine.generate(r);
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_EQ(after->tokens, full->tokens);
}

// GenerateRequest::cancelled: a running sequence leaves at the next step with what it drew, its
// place going to the next in line; one cancelled while it waits never runs.
TEST(SchedulerCancelTest, ACancelledRequestEndsWithinAStepAndFreesItsPlace) {
  Engine engine = open_engine(1);
  const SamplingParams sampling{.max_tokens = 50, .stop_at_eos = false};
  GenerateRequest after_them{{3, 1, 4, 1, 5}, {.max_tokens = 6, .stop_at_eos = false}};
  const Result<Generation> alone = engine.generate(after_them);
  ASSERT_TRUE(alone.ok());

  auto cancel_running = std::make_shared<std::atomic<bool>>(false);
  GenerateRequest running{{0, 17, 4, 200}, sampling};
  running.cancelled = cancel_running;
  size_t n_seen = 0;
  running.on_token = [&](int64_t) {
    if (++n_seen == 3) cancel_running->store(true);
    return true;
  };
  auto cancel_waiting = std::make_shared<std::atomic<bool>>(true);
  GenerateRequest waiting{{9, 9, 9}, sampling};
  waiting.cancelled = cancel_waiting;

  Result<Generation> first = internal_error("not run"), second = first, third = first;
  std::thread t1([&] { first = engine.generate(running); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the others queue behind it
  std::thread t2([&] { second = engine.generate(waiting); });
  std::thread t3([&] { third = engine.generate(after_them); });
  t1.join();
  t2.join();
  t3.join();
  ASSERT_TRUE(first.ok() && second.ok() && third.ok());
  EXPECT_TRUE(first->stopped_by_caller);
  // The flag is set as the caller sees its third token and the worker ends the sequence at its
  // next step; how far the worker had run ahead of the caller (tokens reach it asynchronously)
  // is the machine's scheduling, not the engine's: a token or two when idle, 20 once on a
  // loaded 2-core CI run. So: stopped, and before its max_tokens.
  EXPECT_GE(first->tokens.size(), 3u);
  EXPECT_LT(first->tokens.size(), static_cast<size_t>(sampling.max_tokens));
  EXPECT_TRUE(second->stopped_by_caller);
  EXPECT_TRUE(second->tokens.empty());
  EXPECT_EQ(third->tokens, alone->tokens);
}

// EngineOptions::decodable: ids it refuses are never drawn, and may not be asked for.
TEST(EngineDecodableTest, IdsTheTokenizerLacksAreNeverDrawnNorAccepted) {
  EngineOptions options = options_for(4);
  options.decodable = [](int64_t id) { return id % 3 != 0; };
  Result<Engine> engine = Engine::open(options);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::mt19937_64 rng(std::random_device{}());
  for (int r = 0; r < 4; ++r) {
    GenerateRequest request{
        {1, 2, 4}, {.temperature = 1.5f, .seed = rng(), .max_tokens = 40, .stop_at_eos = false}};
    const Result<Generation> out = engine->generate(request);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    for (const int64_t id : out->tokens) EXPECT_NE(id % 3, 0) << id;
  }
  // A prompt or logit_bias that names one is the caller's mistake.
  const Status prompt = engine->check({{1, 3, 4}, {}});
  EXPECT_EQ(prompt.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(prompt.message().find("prompt token id 3 is not in the tokenizer"), std::string::npos)
      << prompt.message();
  const Status bias = engine->check({{1, 2}, {.logit_bias = {{6, 100.0f}}}});
  EXPECT_EQ(bias.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bias.message().find("logit_bias token id 6"), std::string::npos) << bias.message();
}

// A constraint's mask and EngineOptions::decodable's both apply: a constrained draw is neither
// outside the constraint nor an id the tokenizer lacks.
TEST(EngineDecodableTest, AConstraintsMaskAndTheUndecodableIdsBothApply) {
  EngineOptions options = options_for(4);
  options.decodable = [](int64_t id) { return id % 3 != 0; };
  Result<Engine> engine = Engine::open(options);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::vector<bool> even(static_cast<size_t>(engine->vocab_size()));
  for (size_t t = 0; t < even.size(); ++t) even[t] = t % 2 == 0;
  const auto set = std::make_shared<testing::TokenSet>(even);
  std::mt19937_64 rng(std::random_device{}());
  int64_t n_tokens = 0;
  for (int r = 0; r < 4; ++r) {
    GenerateRequest request{
        {1, 2, 4}, {.temperature = 1.5f, .seed = rng(), .max_tokens = 40, .stop_at_eos = false}};
    request.sampling.constraint = set;
    const Result<Generation> out = engine->generate(request);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    for (const int64_t id : out->tokens) EXPECT_TRUE(id % 2 == 0 && id % 3 != 0) << id;
    n_tokens += static_cast<int64_t>(out->tokens.size());
  }
  EXPECT_EQ(set->n_advanced(), n_tokens);
}

}  // namespace
}  // namespace dsv4
