// The public Engine (include/dsv4/engine.h) on the oracle checkpoints: greedy generation equals
// transformers' cached greedy tokens, a batch of prompts of different lengths equals one prompt
// at a time, eos stops a sequence, seeds make sampling reproducible, bad requests and a config
// the engine does not support are refused with the field named.
#include "dsv4/engine.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "dsv4/structured_output.h"
#include "runtime/golden_cases.h"
#include "runtime/prefix_turns.h"
#include "testing/temp_dir.h"

namespace dsv4 {
namespace {

Engine open_engine(const std::string& folder) {
  auto engine = Engine::open({.model_dir = testing::golden_path(folder + "/model")});
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return std::move(engine).value();
}

// tiny_e: prompt 1's greedy continuation ends at eos after 10 tokens.
TEST(EngineTest, GreedyBatchAndEosMatchTransformers) {
  Engine engine = open_engine("tiny_e_pretrained");
  const std::vector<testing::GoldenCase> cases = testing::golden_cases("tiny_e_pretrained");
  std::vector<GenerateRequest> requests;
  for (const testing::GoldenCase& c : cases) {
    GenerateRequest r{c.prompt, {}};
    r.sampling.max_tokens = 20;
    auto one = engine.generate(r);
    ASSERT_TRUE(one.ok()) << one.status().to_string();
    EXPECT_EQ(one->tokens, c.greedy);
    EXPECT_EQ(one->stopped_at_eos, c.greedy.back() == engine.eos_token_id());
    requests.push_back(r);
  }
  auto batch = engine.generate_batch(requests);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ((*batch)[i].tokens, cases[i].greedy) << i;
}

TEST(EngineTest, TurnsStartFromKeptStates) {
  testing::expect_turns_start_from_kept_states(EngineDevice::kCpu);
}

TEST(EngineTest, SamplingIsReproducibleBySeed) {
  Engine engine = open_engine("tiny_b_state_dict");
  GenerateRequest r{{0, 17, 4, 200}, {}};
  r.sampling = {.temperature = 1.0f, .top_k = 50, .top_p = 0.95f, .seed = 11, .max_tokens = 12};
  auto a = engine.generate(r), b = engine.generate(r);
  r.sampling.seed = 12;
  auto c = engine.generate(r);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(a->tokens, c->tokens);
}

// A constraint that allows one token only.
class OnlyToken final : public TokenConstraint {
 public:
  OnlyToken(int64_t token, int64_t vocab) : token_(token), vocab_(vocab) {}
  std::unique_ptr<TokenConstraintState> start() const override {
    struct State final : TokenConstraintState {
      int64_t token;
      void allowed_tokens(std::span<uint32_t> allowed) override {
        std::fill(allowed.begin(), allowed.end(), 0u);
        allowed[static_cast<size_t>(token / 32)] |= 1u << (token % 32);
      }
      bool advance(int64_t t) override { return t == token; }
      void rollback(int64_t) override {}  // stateless
    };
    auto s = std::make_unique<State>();
    s->token = token_;
    return s;
  }
  int64_t vocab_size() const override { return vocab_; }

 private:
  int64_t token_, vocab_;
};

// A constrained sequence draws only what its constraint allows, and its logprobs are of the raw
// logits (OpenAI's): the same as the unconstrained run's at the first token.
TEST(EngineTest, ConstrainedDrawsReportRawLogprobs) {
  Engine engine = open_engine("tiny_b_state_dict");
  GenerateRequest free{
      .prompt = {1, 2, 3}, .sampling = {.max_tokens = 4, .stop_at_eos = false}, .logprobs = 3};
  Result<Generation> unconstrained = engine.generate(free);
  ASSERT_TRUE(unconstrained.ok()) << unconstrained.status().to_string();
  const int64_t forced = (unconstrained->tokens[0] + 1) % engine.vocab_size();
  GenerateRequest constrained = free;
  constrained.sampling.constraint = std::make_shared<OnlyToken>(forced, engine.vocab_size());
  Result<Generation> out = engine.generate(constrained);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(out->tokens, std::vector<int64_t>(4, forced));
  ASSERT_EQ(out->logprobs.size(), 4u);
  EXPECT_EQ(out->logprobs[0].top, unconstrained->logprobs[0].top);
  EXPECT_LT(out->logprobs[0].logprob, unconstrained->logprobs[0].logprob);
  constrained.sampling.constraint = std::make_shared<OnlyToken>(0, engine.vocab_size() + 1);
  EXPECT_EQ(engine.check(constrained).code(), StatusCode::kInvalidArgument);
}

TEST(EngineTest, BadRequestsAreRefused) {
  Engine engine = open_engine("tiny_b_state_dict");
  EXPECT_EQ(engine.generate({{}, {}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.generate({{1, 2}, {.top_p = 0.0f}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.generate({{1, 2}, {.temperature = -1.0f}}).status().code(),
            StatusCode::kInvalidArgument);
  const Status bad_id = engine.generate({{1, engine.vocab_size()}, {}}).status();
  EXPECT_EQ(bad_id.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_id.message().find("vocabulary"), std::string::npos) << bad_id.message();
  EXPECT_EQ(engine.generate({{1, 2}, {.max_tokens = 5000}}).status().code(),
            StatusCode::kInvalidArgument);
  GenerateRequest penalised{{1, 2}, {}};
  penalised.sampling.frequency_penalty = 2.5f;
  EXPECT_EQ(engine.generate(penalised).status().code(), StatusCode::kInvalidArgument);
  GenerateRequest biased{{1, 2}, {}};
  biased.sampling.logit_bias = {{engine.vocab_size(), 1.0f}};
  const Status bad_bias = engine.generate(biased).status();
  EXPECT_NE(bad_bias.message().find("logit_bias token id"), std::string::npos)
      << bad_bias.message();
  biased.sampling.logit_bias = {{3, 101.0f}};
  EXPECT_EQ(engine.generate(biased).status().code(), StatusCode::kInvalidArgument);
}

// on_token sees every generated token in order, and the same tokens come out as without it;
// returning false stops the sequence at that token, in generate() and in a batch.
TEST(EngineTest, OnTokenStreamsAndStops) {
  Engine engine = open_engine("tiny_b_state_dict");
  GenerateRequest r{{0, 17, 4, 200}, {}};
  r.sampling = {.temperature = 1.0f, .seed = 3, .max_tokens = 8, .stop_at_eos = false};
  auto plain = engine.generate(r);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  std::vector<int64_t> seen;
  r.on_token = [&](int64_t token) {
    seen.push_back(token);
    return true;
  };
  auto streamed = engine.generate(r);
  ASSERT_TRUE(streamed.ok()) << streamed.status().to_string();
  EXPECT_EQ(seen, plain->tokens);
  EXPECT_EQ(streamed->tokens, plain->tokens);
  EXPECT_FALSE(streamed->stopped_by_caller);

  seen.clear();
  r.on_token = [&](int64_t token) {
    seen.push_back(token);
    return seen.size() < 3;
  };
  GenerateRequest other{{5, 6}, {.max_tokens = 4, .stop_at_eos = false}};
  auto batch = engine.generate_batch({r, other});
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ((*batch)[0].tokens,
            std::vector<int64_t>(plain->tokens.begin(), plain->tokens.begin() + 3));
  EXPECT_TRUE((*batch)[0].stopped_by_caller);
  EXPECT_EQ((*batch)[1].tokens.size(), 4u);  // the other sequence runs to its end
}

// check() refuses what generate() refuses, before any forward.
TEST(EngineTest, CheckRefusesWhatGenerateRefuses) {
  Engine engine = open_engine("tiny_b_state_dict");
  EXPECT_TRUE(engine.check({{1, 2}, {}}).ok());
  const Status bad_id = engine.check({{1, engine.vocab_size()}, {}});
  EXPECT_EQ(bad_id.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_id.message().find("token id " + std::to_string(engine.vocab_size()) +
                                  " outside the vocabulary"),
            std::string::npos)
      << bad_id.message();
  EXPECT_EQ(engine.check({{-1}, {}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.check({{1, 2}, {.max_tokens = 5000}}).code(), StatusCode::kInvalidArgument);
  // dsv4 generate --max-tokens takes any int64: the prompt plus it must not wrap past the check.
  const Status huge = engine.check({{1, 2}, {.max_tokens = std::numeric_limits<int64_t>::max()}});
  EXPECT_EQ(huge.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge.message().find("max_tokens = 9223372036854775807 exceeds the context"),
            std::string::npos)
      << huge.message();
}

// A config.json the engine does not support: the error names the field.
TEST(EngineTest, UnsupportedConfigIsRefusedNamingTheField) {
  testing::TempDir dir;
  std::ifstream in(testing::golden_path("tiny_b_state_dict/model/config.json"));
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  const std::string from = "\"n_shared_experts\": 1";
  ASSERT_NE(config.find(from), std::string::npos);
  config.replace(config.find(from), from.size(), "\"n_shared_experts\": 2");
  std::ofstream(dir.path() + "/config.json") << config;
  std::filesystem::copy_file(testing::golden_path("tiny_b_state_dict/model/model.safetensors"),
                             dir.path() + "/model.safetensors");
  auto engine = Engine::open({.model_dir = dir.path()});
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("n_shared_experts"), std::string::npos)
      << engine.status().to_string();
  EXPECT_EQ(Engine::open({.model_dir = dir.path() + "/missing"}).status().code(),
            StatusCode::kNotFound);
}

// Expert offload is for a GPU: on the CPU a count of layers is refused, saying why; a count
// below -1 (automatic) is no count.
TEST(EngineTest, ExpertOffloadOnTheCpuIsRefused) {
  const std::string model = testing::golden_path("tiny_a_pretrained/model");
  const auto on_cpu = Engine::open({.model_dir = model, .expert_offload_layers = 1});
  EXPECT_EQ(on_cpu.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(on_cpu.status().message().find("for a GPU"), std::string::npos)
      << on_cpu.status().to_string();
  EXPECT_EQ(Engine::open({.model_dir = model, .expert_offload_layers = -2}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(Engine::open({.model_dir = model, .expert_offload_layers = 0}).ok());
}

// --cuda-graph on the CPU: open's plan captures nothing (a CPU step runs op by op) and says so
// in a load note; generation runs as without graphs, and the stats show no graph.
TEST(EngineTest, CudaGraphsOnTheCpuPlanNoneAndSaySo) {
  auto engine = Engine::open({.model_dir = testing::golden_path("tiny_a_pretrained/model"),
                              .max_context = 64,
                              .max_batch = 4,
                              .cuda_graph = true});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const std::vector<std::string>& notes = engine->load_notes();
  ASSERT_FALSE(notes.empty());
  EXPECT_TRUE(notes.back().starts_with(
      "decode graphs of no batch size captured at a context of 64, holding 0 MiB; decode steps "
      "of 1 rows and more run without a CUDA graph"))
      << notes.back();
  EXPECT_NE(notes.back().find("CPU model"), std::string::npos) << notes.back();
  GenerateRequest r{{1, 2, 3}, {}};
  r.sampling.max_tokens = 3;
  r.sampling.stop_at_eos = false;
  const Result<Generation> got = engine->generate(r);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->tokens.size(), 3u);
  const EngineStats stats = engine->stats();
  EXPECT_EQ(stats.decode_graphs, 0);
  EXPECT_EQ(stats.decode_graph_captures, 0);
  EXPECT_EQ(stats.decode_graph_planned_batch, 0);
  EXPECT_EQ(stats.decode_graph_planned_bytes, 0);
}

}  // namespace
}  // namespace dsv4
