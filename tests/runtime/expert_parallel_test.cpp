// Expert parallelism through the placement seam (runtime/expert_parallel.h) on the golden model
// with NVFP4 experts (brown_small: score- and hash-routed layers, CSA and HCA attention, an
// MTP block). The reference is the single-rank engine: R ranks must give its bits, logits and
// tokens, for fresh random prompts of random lengths batched together and chunked. Faults: a
// rank that fails or stalls ends the call with an error that names every rank, in bounded time,
// and the group stays failed.
#include "runtime/expert_parallel.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/loader.h"
#include "dsv4/engine.h"
#include "model/deepseek_v4.h"
#include "model/golden.h"
#include "testing/random.h"

namespace dsv4 {
namespace {

using std::chrono::milliseconds;

const std::string kModel = "brown_small/model";

EngineOptions options_for(int64_t ranks) {
  return {.model_dir = testing::golden_path(kModel),
          .experts = ExpertPrecision::kW4A4,
          .max_batch = 8,
          .max_step_tokens = 24,  // prompts run in chunks, so steps mix prefill and decode
          .expert_parallel = ranks};
}

// Three to five prompts of 1 to 40 ids, greedy, every logit asked for.
std::vector<GenerateRequest> random_requests(testing::SeededRng& rng, int64_t vocab) {
  std::vector<GenerateRequest> requests(rng.uniform_int(3, 5));
  for (GenerateRequest& r : requests) {
    r.prompt.resize(rng.uniform_int(1, 40));
    for (int64_t& id : r.prompt) id = rng.uniform_int(0, vocab - 1);
    r.sampling.max_tokens = rng.uniform_int(1, 8);
    r.sampling.stop_at_eos = false;
    r.return_prompt_logits = true;
    r.return_step_logits = true;
  }
  return requests;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class EngineRanks : public ::testing::TestWithParam<int> {};

TEST_P(EngineRanks, GiveOneRanksBits) {
  Result<Engine> one = Engine::open(options_for(1));
  Result<Engine> many = Engine::open(options_for(GetParam()));
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  ASSERT_TRUE(many.ok()) << many.status().to_string();
  testing::SeededRng rng;
  const std::vector<GenerateRequest> requests = random_requests(rng, one->vocab_size());
  auto expected = one->generate_batch(requests);
  auto got = many->generate_batch(requests);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ((*got)[i].tokens, (*expected)[i].tokens);
    EXPECT_TRUE(same_bits((*got)[i].prompt_logits, (*expected)[i].prompt_logits));
    EXPECT_TRUE(same_bits((*got)[i].step_logits, (*expected)[i].step_logits));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, EngineRanks, ::testing::Values(2, 3, 4));

// The model driven directly, so the placement's options (rank count 1, the watchdog, injected
// faults) are the test's.
class ModelRanks : public ::testing::Test {
 protected:
  ModelRanks() : loaded_(checkpoint::load_model(testing::golden_path(kModel)).value()) {}

  // The last-token logits of two sequences of fresh prompts in one forward.
  Result<std::vector<float>> logits(model::ExpertPlacement* placement, testing::SeededRng& rng) {
    const model::Model model(loaded_.weights,
                             {.expert_mode = model::ExpertMode::kW4A4, .placement = placement});
    const int64_t vocab = model.config().vocab_size;
    std::vector<std::vector<int64_t>> prompts(2);
    std::vector<model::SequenceCache> caches;
    DSV4_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(DType::kF32, {2, vocab}));
    std::vector<model::SequenceChunk> chunks;
    for (size_t s = 0; s < prompts.size(); ++s) {
      prompts[s].resize(rng.uniform_int(1, 20));
      for (int64_t& id : prompts[s]) id = rng.uniform_int(0, vocab - 1);
      DSV4_ASSIGN_OR_RETURN(model::SequenceCache cache, model.new_cache(64));
      caches.push_back(std::move(cache));
    }
    for (size_t s = 0; s < prompts.size(); ++s) {
      chunks.push_back({.tokens = prompts[s],
                        .cache = &caches[s],
                        .logits = out.view().rows(static_cast<int64_t>(s), s + 1)});
    }
    DSV4_RETURN_IF_ERROR(model.forward(chunks));
    const float* data = out.data_as<float>();
    return std::vector<float>(data, data + 2 * vocab);
  }

  Result<std::unique_ptr<runtime::ExpertParallel>> ranks(
      int n, std::function<Status(int, int64_t)> fault = nullptr, milliseconds watchdog = {}) {
    runtime::ExpertParallelOptions options{.n_ranks = n, .max_tokens = 8};
    if (watchdog.count() > 0) options.watchdog = watchdog;
    options.before_rank = std::move(fault);
    return runtime::ExpertParallel::create(loaded_.weights.config, options);
  }

  // The checkpoint's calibrated W4A4 input scales dropped: the experts' inputs are then staged
  // with dynamic scales, the amax of the whole step, which the ranks must agree on.
  void drop_input_scales() {
    for (checkpoint::LayerWeights& layer : loaded_.weights.layers) {
      layer.ffn.experts.w13_input_scale = Tensor();
      layer.ffn.experts.w2_input_scale = Tensor();
    }
  }

  void expect_in_place_bits() {
    for (int n = 1; n <= 4; ++n) {
      SCOPED_TRACE(std::to_string(n) + " ranks");
      auto ep = ranks(n);
      ASSERT_TRUE(ep.ok()) << ep.status().to_string();
      testing::SeededRng rng;
      const uint64_t seed = rng.seed();
      auto expected = logits(nullptr, rng);
      testing::SeededRng replay;  // the same prompts again
      replay.engine().seed(seed);
      auto got = logits(ep->get(), replay);
      ASSERT_TRUE(expected.ok()) << expected.status().to_string();
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_TRUE(same_bits(*got, *expected));
    }
  }

  checkpoint::LoadedModel loaded_;
};

TEST_F(ModelRanks, OneToFourRanksGiveInPlaceBits) { expect_in_place_bits(); }

TEST_F(ModelRanks, OneToFourRanksGiveInPlaceBitsWithDynamicScales) {
  drop_input_scales();
  expect_in_place_bits();
}

TEST_F(ModelRanks, AFailingRankIsAnErrorOnEveryRank) {
  auto ep = ranks(4, [](int rank, int64_t layer) {
    return rank == 2 && layer == 1 ? internal_error("injected fault") : ok_status();
  });
  ASSERT_TRUE(ep.ok());
  testing::SeededRng rng;
  const Result<std::vector<float>> out = logits(ep->get(), rng);
  ASSERT_FALSE(out.ok());
  const std::string message = out.status().message();
  EXPECT_NE(message.find("layer 1"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 2: injected fault"), std::string::npos) << message;
  for (const char* peer : {"rank 0: ep: peer rank 2 failed", "rank 1: ep: peer rank 2 failed",
                           "rank 3: ep: peer rank 2 failed"}) {
    EXPECT_NE(message.find(peer), std::string::npos) << message;
  }
  // The group stays failed: the next call fails at once with the same error.
  const auto start = std::chrono::steady_clock::now();
  const Result<std::vector<float>> again = logits(ep->get(), rng);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().message(), message);
}

TEST_F(ModelRanks, AStalledRankIsAWatchdogErrorNotAHang) {
  const milliseconds watchdog(200), stall(1500);
  auto ep = ranks(
      3,
      [&](int rank, int64_t layer) {
        if (rank == 1 && layer == 0) std::this_thread::sleep_for(stall);
        return ok_status();
      },
      watchdog);
  ASSERT_TRUE(ep.ok());
  testing::SeededRng rng;
  const auto start = std::chrono::steady_clock::now();
  const Result<std::vector<float>> out = logits(ep->get(), rng);
  EXPECT_LT(std::chrono::steady_clock::now() - start, stall - milliseconds(500));
  ASSERT_FALSE(out.ok());
  const std::string message = out.status().message();
  EXPECT_NE(message.find("ep watchdog"), std::string::npos) << message;
  EXPECT_NE(message.find("for rank(s) 1 that never arrived"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1: did not return within the watchdog (200 ms)"), std::string::npos)
      << message;
}

TEST(EngineParallelism, ImpossibleRequestsAreRefusedBeforeLoading) {
  EngineOptions options = options_for(2);
  options.model_dir = "/nonexistent";  // refused before anything is read
  options.gpus = 64;
  Result<Engine> too_many = Engine::open(options);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("--gpus 64 asks for 64 GPUs; this machine"),
            std::string::npos)
      << too_many.status().message();
  options.gpus = 1;
  options.expert_parallel = 9;
  EXPECT_EQ(Engine::open(options).status().code(), StatusCode::kInvalidArgument);
  options.expert_parallel = 2;
  options.experts = ExpertPrecision::kW4A16;
  const Status w4a16 = Engine::open(options).status();
  EXPECT_EQ(w4a16.code(), StatusCode::kUnimplemented);
  EXPECT_NE(w4a16.message().find("--experts w4a4"), std::string::npos) << w4a16.message();
}

TEST(EngineParallelism, DenseExpertsAreRefused) {
  EngineOptions options = options_for(2);
  options.model_dir = testing::golden_path("tiny_a_pretrained/model");  // bf16 experts
  const Status dense = Engine::open(options).status();
  EXPECT_EQ(dense.code(), StatusCode::kUnimplemented);
  EXPECT_NE(dense.message().find("has dense ones only"), std::string::npos) << dense.message();
}

}  // namespace
}  // namespace dsv4
