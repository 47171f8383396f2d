// Expert parallelism with its ranks on one GPU (label cuda): the cases of
// expert_parallel_cases.h with the model on the device, where the reference is the single-rank
// GPU engine and cuda::moe_ffn in place. The engine's steps stay within the fused expert
// kernels' range (at most 24 tokens; the small router up to 8); OneToFourRanksGiveInPlaceBits
// OnLongPrompts steps 140 to 200 tokens at once, the grouped path, which rank 0 runs whole. The
// FromTheirOwnCopies cases give every rank its own copy of its experts on the one GPU, the
// indexing and placement of ranks on several GPUs; the StacksFreed cases load the model as
// --gpus N does, each rank's copy made as the loader places each layer and the model's stacks
// then freed, so only those copies serve.
#include <gtest/gtest.h>

#include "runtime/expert_parallel_cases.h"

namespace dsv4 {
namespace {

class EngineRanksCuda : public ::testing::TestWithParam<int> {};

TEST_P(EngineRanksCuda, GiveOneRanksBits) {
  testing::expect_engine_ranks_give_one_ranks_bits(GetParam(), EngineDevice::kCuda);
}

INSTANTIATE_TEST_SUITE_P(Ranks, EngineRanksCuda, ::testing::Values(2, 3, 4));

class ModelRanksCuda : public ::testing::Test, public testing::ModelRanksCases {
 protected:
  ModelRanksCuda() : ModelRanksCases(Device::kCuda) {}
};

TEST_F(ModelRanksCuda, OneToFourRanksGiveInPlaceBits) { expect_in_place_bits(); }

TEST_F(ModelRanksCuda, OneToFourRanksGiveInPlaceBitsWithDynamicScales) {
  drop_input_scales();
  expect_in_place_bits();
}

TEST_F(ModelRanksCuda, OneToFourRanksGiveInPlaceBitsOnLongPrompts) {
  expect_in_place_bits(/*shortest=*/70, /*longest=*/100);
}

// As under --gpus N: each rank's copy made as the loader places each layer (on this one GPU),
// the model's own stacks then freed, so the grouped path gathers each layer from the ranks'
// copies (ExpertShards::gather).
TEST_F(ModelRanksCuda, OneToFourRanksGiveInPlaceBitsWithTheModelsStacksFreed) {
  release_after_copies();
  expect_in_place_bits();
}

TEST_F(ModelRanksCuda, OneToFourRanksGiveInPlaceBitsWithTheModelsStacksFreedOnLongPrompts) {
  release_after_copies();
  expect_in_place_bits(/*shortest=*/70, /*longest=*/100);
}

// Each rank reads its own copy of its experts, made on the one GPU as ranks on several make
// theirs on their own (runtime/expert_shards.h): the fused path indexes the copies by global
// expert id; the grouped path (140 to 200 tokens) runs every group on rank 0 from the whole
// stacks, gathered from the ranks' copies.
TEST_F(ModelRanksCuda, OneToFourRanksGiveInPlaceBitsFromTheirOwnCopies) {
  copy_shards();
  expect_in_place_bits();
}

TEST_F(ModelRanksCuda, OneToFourRanksGiveInPlaceBitsFromTheirOwnCopiesWithDynamicScales) {
  drop_input_scales();
  copy_shards();
  expect_in_place_bits();
}

TEST_F(ModelRanksCuda, OneToFourRanksGiveInPlaceBitsFromTheirOwnCopiesOnLongPrompts) {
  copy_shards();
  expect_in_place_bits(/*shortest=*/70, /*longest=*/100);
}

// Rank 0 owning one expert of each layer (what --gpus N plans where its GPU cannot hold an even
// share), the stacks freed: the fused path's transfers (their per-rank expert ranges) and the
// grouped path's gather from uneven copies.
TEST_F(ModelRanksCuda, OneToFourRanksGiveInPlaceBitsWithALeaderOfOneExpert) {
  shed_leader_experts();
  release_after_copies();
  expect_in_place_bits();
  expect_in_place_bits(/*shortest=*/70, /*longest=*/100);
}

TEST_F(ModelRanksCuda, AFailingRankIsAnErrorOnEveryRank) {
  expect_failing_rank_is_an_error_on_every_rank();
}

TEST_F(ModelRanksCuda, AStalledRankIsAWatchdogErrorNotAHang) {
  expect_stalled_rank_is_a_watchdog_error_not_a_hang();
}

TEST_F(ModelRanksCuda, AFailedStepDrawsNoToken) { expect_failed_step_draws_no_token(); }

}  // namespace
}  // namespace dsv4
