// Expert parallelism through the placement seam (runtime/expert_parallel.h) with ranks sharing
// the CPU: the cases of expert_parallel_cases.h (R ranks give one rank's bits; a failing or
// stalled rank is an error on every rank), and the refusals of impossible requests.
#include "runtime/expert_parallel.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/expert_placement.h"
#include "runtime/expert_parallel_cases.h"
#include "runtime/expert_shards.h"
#include "runtime/placement.h"

namespace dsv4 {
namespace {

EngineOptions options_for(int64_t ranks) {
  return testing::ep_engine_options(ranks, EngineDevice::kCpu);
}

class EngineRanks : public ::testing::TestWithParam<int> {};

TEST_P(EngineRanks, GiveOneRanksBits) {
  testing::expect_engine_ranks_give_one_ranks_bits(GetParam(), EngineDevice::kCpu);
}

INSTANTIATE_TEST_SUITE_P(Ranks, EngineRanks, ::testing::Values(2, 3, 4));

class ModelRanks : public ::testing::Test, public testing::ModelRanksCases {
 protected:
  ModelRanks() : ModelRanksCases(Device::kCpu) {}
};

TEST_F(ModelRanks, OneToFourRanksGiveInPlaceBits) { expect_in_place_bits(); }

TEST_F(ModelRanks, OneToFourRanksGiveInPlaceBitsWithDynamicScales) {
  drop_input_scales();
  expect_in_place_bits();
}

// Each rank reads its own copy of its experts, indexed by the experts' global ids, as ranks on
// several GPUs do.
TEST_F(ModelRanks, OneToFourRanksGiveInPlaceBitsFromTheirOwnCopies) {
  copy_shards();
  expect_in_place_bits();
}

TEST_F(ModelRanks, OneToFourRanksGiveInPlaceBitsFromTheirOwnCopiesWithDynamicScales) {
  drop_input_scales();
  copy_shards();
  expect_in_place_bits();
}

// As under --gpus N: the model's own stacks freed once the ranks hold their copies.
TEST_F(ModelRanks, OneToFourRanksGiveInPlaceBitsWithTheModelsStacksFreed) {
  release_after_copies();
  expect_in_place_bits();
}

TEST_F(ModelRanks, AFailingRankIsAnErrorOnEveryRank) {
  expect_failing_rank_is_an_error_on_every_rank();
}

TEST_F(ModelRanks, AStalledRankIsAWatchdogErrorNotAHang) {
  expect_stalled_rank_is_a_watchdog_error_not_a_hang();
}

TEST_F(ModelRanks, AFailedStepDrawsNoToken) { expect_failed_step_draws_no_token(); }

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

// The ranks' threads meet at host barriers inside each MoE layer, which a CUDA graph of the
// decode step cannot capture.
TEST(EngineParallelism, CudaGraphsAreRefusedBeforeLoading) {
  EngineOptions options = testing::ep_engine_options(2, EngineDevice::kCuda);
  options.model_dir = "/nonexistent";
  options.max_batch = 2;
  options.cuda_graph = true;
  const Status graphs = Engine::open(options).status();
  EXPECT_EQ(graphs.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(graphs.message().find("leave --cuda-graph off"), std::string::npos) << graphs.message();
}

TEST(EngineParallelism, DenseExpertsAreRefused) {
  EngineOptions options = options_for(2);
  options.model_dir = testing::golden_path("tiny_a_pretrained/model");  // bf16 experts
  const Status dense = Engine::open(options).status();
  EXPECT_EQ(dense.code(), StatusCode::kUnimplemented);
  EXPECT_NE(dense.message().find("has dense ones only"), std::string::npos) << dense.message();
}

// Ranks sharing one device run the multi-GPU code with every ordinal 0; --gpus N puts rank r on
// GPU r.
TEST(EngineParallelism, RanksGetOneDeviceOrdinalEach) {
  EngineOptions options = options_for(3);
  EXPECT_EQ(runtime::rank_devices(options), (std::vector<int>{0, 0, 0}));
  options.expert_parallel = 1;
  EXPECT_EQ(runtime::rank_devices(options), (std::vector<int>{0}));
  options.expert_parallel = 4;
  options.gpus = 4;
  EXPECT_EQ(runtime::rank_devices(options), (std::vector<int>{0, 1, 2, 3}));
}

// Under --gpus N the loader leaves every routed expert in host memory, for each rank to copy its
// share to its own GPU; otherwise expert offload places them as asked.
TEST(EngineParallelism, SeveralGpusLoadTheExpertsIntoHostMemory) {
  EngineOptions options = testing::ep_engine_options(4, EngineDevice::kCuda);
  options.expert_offload_layers = 2;
  EXPECT_FALSE(runtime::device_placement(options).experts_in_host_memory);
  EXPECT_EQ(runtime::device_placement(options).expert_offload_layers, 2);
  options.gpus = 4;
  EXPECT_TRUE(runtime::device_placement(options).experts_in_host_memory);
}

// What --gpus N frees once the ranks hold their copies: the staged layers' codes and block
// scales (the per-matrix scales stay); a layer so freed refuses to run in place rather than
// read freed memory. That the ranks still give one rank's bits is
// ModelRanks.OneToFourRanksGiveInPlaceBitsWithTheModelsStacksFreed.
TEST(EngineParallelism, ReleasedExpertsRefuseToRunInPlace) {
  Result<checkpoint::LoadedModel> loaded =
      checkpoint::load_model(testing::golden_path(testing::kEpModel));
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  checkpoint::ModelWeights& weights = loaded->weights;
  ASSERT_GE(weights.layers.size(), 2u);
  checkpoint::RoutedExpertWeights& staged = weights.layers[1].ffn.experts;
  ASSERT_TRUE(staged.is_nvfp4());
  staged.in_host_memory = true;  // as the loader leaves it under --gpus N
  int64_t bulk = 0;
  for (const format::Nvfp4Tensor* stack : {&*staged.w13_nvfp4, &*staged.w2_nvfp4}) {
    bulk += static_cast<int64_t>(stack->packed.view().bytes() + stack->block_scale.view().bytes());
  }
  EXPECT_EQ(runtime::release_host_experts(weights), bulk);
  EXPECT_FALSE(staged.in_host_memory);
  EXPECT_TRUE(staged.w13_nvfp4->packed.empty_tensor());
  EXPECT_TRUE(staged.w2_nvfp4->block_scale.empty_tensor());
  EXPECT_FALSE(staged.w13_nvfp4->global_scale.empty_tensor());
  // A layer not staged keeps its stacks.
  EXPECT_FALSE(weights.layers[0].ffn.experts.w13_nvfp4->packed.empty_tensor());

  model::RoutedExpertsCall call;
  call.layer = 1;
  call.experts = &staged;
  call.weights.w13 = staged.w13_nvfp4->view();
  call.weights.w2 = staged.w2_nvfp4->view();
  const Status in_place = model::run_in_place(call);
  EXPECT_EQ(in_place.code(), StatusCode::kInternal);
  EXPECT_NE(in_place.message().find("layer 1's routed experts are held by the expert-parallel"),
            std::string::npos)
      << in_place.message();
}

TEST(EngineParallelism, RankDevicesMustMatchTheRanks) {
  const Result<checkpoint::LoadedModel> loaded =
      checkpoint::load_model(testing::golden_path(testing::kEpModel));
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const checkpoint::ModelConfig& config = loaded.value().weights.config;
  runtime::ExpertParallelOptions options{.n_ranks = 2, .device = Device::kCpu};
  options.rank_devices = {0, 1};
  const Status on_cpu = runtime::ExpertParallel::create(config, options).status();
  EXPECT_EQ(on_cpu.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(on_cpu.message().find("ranks on the CPU take no device ordinals"), std::string::npos)
      << on_cpu.message();
  options.rank_devices = {};
  options.copy_shards = true;  // copies without the weights to copy from
  const Status no_weights = runtime::ExpertParallel::create(config, options).status();
  EXPECT_EQ(no_weights.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_weights.message().find("need the loaded weights"), std::string::npos)
      << no_weights.message();
  options.copy_shards = false;
  options.device = Device::kCuda;
  options.rank_devices = {0, 0, 0};
  const Status mismatched = runtime::ExpertParallel::create(config, options).status();
  EXPECT_EQ(mismatched.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatched.message().find("3 rank devices for 2 ranks"), std::string::npos)
      << mismatched.message();
}

}  // namespace
}  // namespace dsv4
