// Expert parallelism through the placement seam (runtime/expert_parallel.h) with ranks sharing
// the CPU: the cases of expert_parallel_cases.h (R ranks give one rank's bits; a failing or
// stalled rank is an error on every rank), and the refusals of impossible requests.
#include "runtime/expert_parallel.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/to_device.h"
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

// As under --gpus N: each rank's copy made as the loader places each layer, the loader's
// stacks then freed.
TEST_F(ModelRanks, OneToFourRanksGiveInPlaceBitsWithTheModelsStacksFreed) {
  release_after_copies();
  expect_in_place_bits();
}

// As under --gpus N with rank 0's GPU too small for an even share: rank 0 owns one expert of
// each layer, the others the rest, from their own copies.
TEST_F(ModelRanks, OneToFourRanksGiveInPlaceBitsWithALeaderOfOneExpert) {
  shed_leader_experts();
  copy_shards();
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

// Under --gpus N the ranks' copies are made before loading, rank r's on GPU r and rank 0 owning
// check_ep_memory's share, and the loader hands each main layer's routed experts to them;
// otherwise there are none and expert offload places the experts as asked.
TEST(EngineParallelism, SeveralGpusHandEachLayersExpertsToTheRanks) {
  const Result<checkpoint::ModelConfig> config =
      checkpoint::load_model_config(testing::golden_path(testing::kEpModel));
  ASSERT_TRUE(config.ok()) << config.status().message();
  EngineOptions options = testing::ep_engine_options(4, EngineDevice::kCuda);
  options.expert_offload_layers = 2;
  EXPECT_FALSE(runtime::rank_copies(options, *config, 0).has_value());
  EXPECT_FALSE(runtime::device_placement(options).take_main_experts);
  EXPECT_EQ(runtime::device_placement(options).expert_offload_layers, 2);
  options.gpus = 4;
  std::optional<runtime::ExpertShards> copies = runtime::rank_copies(options, *config, 1);
  ASSERT_TRUE(copies.has_value());
  EXPECT_EQ(copies->devices(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(copies->sharding().n_local_experts(0), 1);
  EXPECT_EQ(copies->sharding().first_expert(1), 1);
  EXPECT_TRUE(runtime::device_placement(options, 0, &*copies).take_main_experts);
}

// The EP test model as loaded on the CPU, with layer 1's NVFP4 routed experts.
Result<checkpoint::LoadedModel> load_ep_model() {
  DSV4_ASSIGN_OR_RETURN(checkpoint::LoadedModel loaded,
                        checkpoint::load_model(testing::golden_path(testing::kEpModel)));
  std::vector<checkpoint::LayerWeights>& layers = loaded.weights.layers;
  if (layers.size() < 2 || !layers[1].ffn.experts.is_nvfp4()) {
    return internal_error("the EP test model's layer 1 has no NVFP4 routed experts");
  }
  return loaded;
}

// Ranks 0 … 2 on the CPU, rank 0 owning one expert of each layer.
runtime::ExpertShards ranks_on_the_cpu(const checkpoint::ModelConfig& config) {
  const Result<kernels::ep::ExpertSharding> sharding =
      runtime::rank_sharding(config.n_routed_experts, 3, 1);
  EXPECT_TRUE(sharding.ok()) << sharding.status().message();
  return runtime::ExpertShards::for_ranks(*sharding, {});
}

// Layer 1's routed-expert call on `staged` (the weights only: no step runs).
model::RoutedExpertsCall layer_call(const checkpoint::RoutedExpertWeights& staged) {
  model::RoutedExpertsCall call;
  call.layer = 1;
  call.experts = &staged;
  call.weights.w13 = staged.w13_nvfp4->view();
  call.weights.w2 = staged.w2_nvfp4->view();
  return call;
}

// What --gpus N frees once the ranks hold their copies of a layer (ExpertShards::take_layer,
// the loader's per-layer hook): the layer's codes and block scales (the per-matrix scales stay);
// a layer so freed refuses to run in place rather than read freed memory. That the ranks still
// give one rank's bits is ModelRanks.OneToFourRanksGiveInPlaceBitsWithTheModelsStacksFreed.
TEST(EngineParallelism, TakenExpertsRefuseToRunInPlace) {
  Result<checkpoint::LoadedModel> loaded = load_ep_model();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  checkpoint::ModelWeights& weights = loaded->weights;
  checkpoint::RoutedExpertWeights& staged = weights.layers[1].ffn.experts;
  staged.in_host_memory = true;  // as the loader stages it on a GPU
  runtime::ExpertShards copies = ranks_on_the_cpu(weights.config);
  const Status taken = copies.take_layer(1, staged);
  ASSERT_TRUE(taken.ok()) << taken.message();
  EXPECT_FALSE(staged.in_host_memory);
  EXPECT_TRUE(staged.w13_nvfp4->packed.empty_tensor());
  EXPECT_TRUE(staged.w2_nvfp4->block_scale.empty_tensor());
  EXPECT_FALSE(staged.w13_nvfp4->global_scale.empty_tensor());
  // A layer not taken keeps its stacks.
  EXPECT_FALSE(weights.layers[0].ffn.experts.w13_nvfp4->packed.empty_tensor());

  const Status in_place = model::run_in_place(layer_call(staged));
  EXPECT_EQ(in_place.code(), StatusCode::kInternal);
  EXPECT_NE(in_place.message().find("layer 1's routed experts are held by the expert-parallel"),
            std::string::npos)
      << in_place.message();
}

// Each rank's copy of a taken layer holds the same bytes as its range of the layer's stacks
// (rank 0's one expert, ranks 1 and 2 the rest), read through the view a rank computes with.
TEST(EngineParallelism, TakenLayersCopiesHoldEachRanksRange) {
  Result<checkpoint::LoadedModel> loaded = load_ep_model();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  checkpoint::ModelWeights& weights = loaded->weights;
  const Result<checkpoint::ModelWeights> whole = checkpoint::copy_weights(weights, Device::kCpu);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  runtime::ExpertShards copies = ranks_on_the_cpu(weights.config);
  ASSERT_TRUE(copies.take_layer(1, weights.layers[1].ffn.experts).ok());
  const model::RoutedExpertsCall call = layer_call(whole->layers[1].ffn.experts);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const int64_t first = copies.sharding().first_expert(r);
    const int64_t n = copies.sharding().n_local_experts(r);
    const Result<kernels::MoeWeightsView> view = copies.rank_view(call, r);
    ASSERT_TRUE(view.ok()) << view.status().message();
    for (const auto& [got, want] :
         {std::pair{view->w13, call.weights.w13}, std::pair{view->w2, call.weights.w2}}) {
      for (const auto& [g, w] : {std::pair{got.packed, want.packed},
                                 std::pair{got.block_scale, want.block_scale}}) {
        EXPECT_NE(g.data, w.data);  // the rank's own copy
        const TensorView a = g.rows(first, first + n), b = w.rows(first, first + n);
        ASSERT_EQ(a.bytes(), b.bytes());
        EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes()), 0);
      }
    }
  }
  // A layer the ranks were not handed has no copy.
  model::RoutedExpertsCall not_taken = layer_call(whole->layers[0].ffn.experts);
  not_taken.layer = 0;
  EXPECT_EQ(copies.rank_view(not_taken, 1).status().code(), StatusCode::kInternal);
}

// A call on freed stacks gets the whole stacks' shapes back, as views of no memory: the shapes
// of the stacks before they were freed, and no pointer into a rank's copy, whose range is only
// part of the stacks.
TEST(EngineParallelism, FreedStacksAreSizedWithoutMemory) {
  Result<checkpoint::LoadedModel> loaded = load_ep_model();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  checkpoint::ModelWeights& weights = loaded->weights;
  checkpoint::RoutedExpertWeights& staged = weights.layers[1].ffn.experts;
  const format::Nvfp4View before[] = {staged.w13_nvfp4->view(), staged.w2_nvfp4->view()};
  runtime::ExpertShards copies = ranks_on_the_cpu(weights.config);
  ASSERT_TRUE(copies.take_layer(1, staged).ok());

  const Result<model::RoutedExpertsCall> sized = copies.sized(layer_call(staged));
  ASSERT_TRUE(sized.ok()) << sized.status().message();
  const format::Nvfp4View after[] = {sized->weights.w13, sized->weights.w2};
  for (int s = 0; s < 2; ++s) {
    SCOPED_TRACE(s == 0 ? "w13" : "w2");
    for (const auto& [was, is] : {std::pair{&before[s].packed, &after[s].packed},
                                  std::pair{&before[s].block_scale, &after[s].block_scale}}) {
      EXPECT_EQ(is->data, nullptr);
      EXPECT_EQ(is->dtype, was->dtype);
      ASSERT_EQ(is->rank(), was->rank());
      for (int d = 0; d < was->rank(); ++d) EXPECT_EQ(is->size(d), was->size(d)) << "dim " << d;
    }
    EXPECT_EQ(after[s].global_scale.data, before[s].global_scale.data);  // not freed
  }
}

// Copies made while loading serve only ranks of their sharding.
TEST(EngineParallelism, CopiesOfAnotherShardingAreRefused) {
  Result<checkpoint::LoadedModel> loaded = load_ep_model();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const checkpoint::ModelConfig& config = loaded->weights.config;
  const runtime::ExpertParallelOptions even{.n_ranks = 3, .device = Device::kCpu};
  const Status refused =
      runtime::ExpertParallel::create(config, even, ranks_on_the_cpu(config)).status();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("not of the sharding"), std::string::npos) << refused.message();
  runtime::ExpertParallelOptions led = even;
  led.leader_experts = 1;
  EXPECT_TRUE(runtime::ExpertParallel::create(config, led, ranks_on_the_cpu(config)).ok());
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
