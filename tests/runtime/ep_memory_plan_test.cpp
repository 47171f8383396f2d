// The expert-parallel memory plan (runtime/ep_memory_plan.h) against bytes derived by hand from
// V4-Flash's and V4-Pro's configs: each layer's two NVFP4 stacks are E·3·F·D values at 9/16 of a
// byte (codes and one UE4M3 scale per 16) plus an f32 global scale per matrix, split over the
// ranks by expert (the first E mod R ranks one more); over several ranks rank 0 keeps room for
// one layer's codes and scales, and the host holds them all while loading, none after.
#include "runtime/ep_memory_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "format/text_file.h"
#include "testing/source_dir.h"

namespace dsv4::runtime {
namespace {

checkpoint::ModelConfig fixture(const std::string& name) {
  const std::string path = testing::source_path("tests/checkpoint/fixtures/" + name);
  auto text = format::read_text_file(path);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  auto config = checkpoint::parse_model_config(text.value(), path);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return *config;
}

// One layer's routed codes and block scales: what a rank copies, and rank 0's room for a layer.
int64_t layer_bulk_bytes(const checkpoint::ModelConfig& c) {
  return c.n_routed_experts * 3 * c.moe_intermediate_size * c.hidden_size / 16 * 9;
}

int64_t expected_expert_bytes(const checkpoint::ModelConfig& c) {
  return c.n_layer * (layer_bulk_bytes(c) + 2 * 4 * c.n_routed_experts);
}

TEST(EpMemoryPlan, ShardsTheRoutedExpertsAndLeavesTheRestOnTheLeader) {
  for (const char* name : {"v4_flash_config.json", "v4_pro_config.json"}) {
    const checkpoint::ModelConfig c = fixture(name);
    for (int ranks : {1, 2, 3, 4, 8}) {
      SCOPED_TRACE(std::string(name) + ", " + std::to_string(ranks) + " ranks");
      auto plan = plan_ep_memory(c, ranks);
      ASSERT_TRUE(plan.ok()) << plan.status().to_string();
      EXPECT_EQ(plan->routed_expert_bytes, expected_expert_bytes(c));
      ASSERT_EQ(plan->ranks.size(), static_cast<size_t>(ranks));
      int64_t experts = 0, expert_bytes = 0;
      for (int r = 0; r < ranks; ++r) {
        const RankBytes& b = plan->ranks[r];
        EXPECT_EQ(b.first_expert, experts);
        EXPECT_EQ(b.n_experts, c.n_routed_experts / ranks + (r < c.n_routed_experts % ranks));
        EXPECT_EQ(b.other_weights, r == 0 ? plan->other_weight_bytes : 0);
        EXPECT_EQ(b.layer_copy, r == 0 && ranks > 1 ? layer_bulk_bytes(c) : 0);
        experts += b.n_experts;
        expert_bytes += b.experts;
      }
      EXPECT_EQ(experts, c.n_routed_experts);
      EXPECT_EQ(expert_bytes, plan->routed_expert_bytes);
      // Over several GPUs each main layer's stacks' bulk loads into host memory in turn, one
      // layer's at a time, and none stays there; the MTP block's experts (the main layers'
      // shape) are rank 0's.
      EXPECT_EQ(plan->host_bytes, ranks > 1 ? layer_bulk_bytes(c) : 0);
      EXPECT_EQ(plan->host_bytes_kept, 0);
      EXPECT_GE(plan->other_weight_bytes,
                c.n_mtp_layers * (layer_bulk_bytes(c) + 2 * 4 * c.n_routed_experts));
    }
  }
}

// A config that declares the release's FP8 linears (quantization_config fp8 with ue8m0 scales)
// counts them at a byte a value and an f32 scale per 128 × 128 block, as a GPU keeps them, not
// as bf16: on V4-Flash each block's values are docs/numerics.md's (wq_a 4096 × 1024, wq_b
// 1024 × 32768, wkv 4096 × 512, wo_a 8192 × 4096, wo_b 4096 × 8192, the shared expert's
// 3 × 2048 × 4096: 132.1 M; a CSA block's indexer wq_b 1024 × 8192 more; an MTP block's e_proj
// and h_proj 4096 × 4096 each), so rank 0 holds a byte less of each, less their scales.
TEST(EpMemoryPlan, CountsTheReleasesFp8LinearsAsAGpuKeepsThem) {
  checkpoint::ModelConfig flash = fixture("v4_flash_config.json");
  ASSERT_TRUE(flash.fp8_linears);
  const int64_t as_fp8 = plan_ep_memory(flash, 2).value().other_weight_bytes;
  flash.fp8_linears = false;
  const int64_t as_bf16 = plan_ep_memory(flash, 2).value().other_weight_bytes;
  int64_t values = 0;
  for (int64_t block = 0; block < flash.n_blocks(); ++block) {
    values += int64_t{4096} * 1024 + int64_t{1024} * 32768 + int64_t{4096} * 512 +
              int64_t{8192} * 4096 * 2 + int64_t{3} * 2048 * 4096;
    if (flash.schedule(block).attention == checkpoint::AttentionType::kCompressedSparse) {
      values += int64_t{1024} * 8192;
    }
    if (block >= flash.n_layer) values += int64_t{2} * 4096 * 4096;
  }
  const int64_t saved = as_bf16 - as_fp8;
  EXPECT_LE(saved, values);
  EXPECT_GE(saved, values - values / 4096);  // the f32 scales: 4 bytes a 128 × 128 block
}

TEST(EpMemoryPlan, SaysWhereItFits) {
  const checkpoint::ModelConfig flash = fixture("v4_flash_config.json");
  // 145 GiB of experts: over 2 ranks each holds 72.6 GiB plus rank 0's other weights, more
  // than an H100's 79.6 GiB and less than an H200's 140.4 GiB; over 4 ranks both fit.
  const std::string two = describe(plan_ep_memory(flash, 2).value(), int64_t{5} << 30);
  EXPECT_NE(two.find("2 x H100 80GB (79.6 GiB each): does not fit"), std::string::npos) << two;
  EXPECT_NE(two.find("2 x H200 141GB (140.4 GiB each): fits"), std::string::npos) << two;
  const std::string four = describe(plan_ep_memory(flash, 4).value(), int64_t{5} << 30);
  EXPECT_NE(four.find("4 x H100 80GB (79.6 GiB each): fits"), std::string::npos) << four;
  // What host memory holds while loading, and after.
  EXPECT_NE(four.find("host memory: "), std::string::npos) << four;
  // One V4-Flash layer's codes and block scales: 256 experts of 3 × 2048 × 4096 values, half a
  // byte each and a byte a block of 16.
  EXPECT_NE(four.find("host memory: 3.4 GiB pinned at a time while loading"), std::string::npos)
      << four;
  EXPECT_NE(four.find("0.0 GiB kept after"), std::string::npos) << four;
}

// V4-Pro over 8 H200s: an even split leaves rank 0 its 48 experts of 810.6 GiB beside every
// other weight and the layer copy, past the GPU; with fewer on rank 0 (the most that fit) every
// rank fits, and the others hold the rest. Where the even split fits, it stays.
TEST(EpMemoryPlan, ALeaderPastItsGpuShedsExpertsToTheOthers) {
  const EpMemoryPlan even = plan_ep_memory(fixture("v4_pro_config.json"), 8).value();
  const int64_t headroom = int64_t{9} << 30, h200 = kPlanGpus[1].bytes;
  ASSERT_GT(rank_device_bytes(even, 0, headroom), h200);
  const int64_t leader = leader_experts_to_fit(even, h200, headroom);
  ASSERT_LT(leader, even.ranks[0].n_experts);
  ASSERT_GE(leader, 1);
  const EpMemoryPlan weighted = with_leader_experts(even, leader).value();
  EXPECT_EQ(weighted.ranks[0].n_experts, leader);
  EXPECT_LE(rank_device_bytes(weighted, 0, headroom), h200);
  // One more expert on rank 0 would not fit: the most that do.
  EXPECT_GT(rank_device_bytes(with_leader_experts(even, leader + 1).value(), 0, headroom), h200);
  int64_t experts = 0, bytes = 0;
  for (int r = 0; r < 8; ++r) {
    EXPECT_LE(rank_device_bytes(weighted, r, headroom), h200) << "rank " << r;
    experts += weighted.ranks[r].n_experts;
    bytes += weighted.ranks[r].experts;
  }
  EXPECT_EQ(experts, 384);
  EXPECT_EQ(bytes, even.routed_expert_bytes);
  const std::string text = describe(even, headroom);
  EXPECT_NE(text.find("8 x H200 141GB (140.4 GiB each): fits with rank 0 owning " +
                      std::to_string(leader) + " experts of each layer"),
            std::string::npos)
      << text;
  // V4-Flash over 2 H200s fits evenly: its leader keeps its share.
  const EpMemoryPlan flash = plan_ep_memory(fixture("v4_flash_config.json"), 2).value();
  EXPECT_EQ(leader_experts_to_fit(flash, h200, headroom), flash.ranks[0].n_experts);
  EXPECT_EQ(with_leader_experts(flash, 0).status().code(), StatusCode::kInvalidArgument);
}

// The fit check against fake GPUs: each rank's own shard counts on its GPU, rank 0's too
// (besides every other weight, room to gather a layer and the headroom).
TEST(EpMemoryPlan, RefusesARankWhoseGpuCannotHoldItsShare) {
  const EpMemoryPlan plan = plan_ep_memory(fixture("v4_flash_config.json"), 4).value();
  const int64_t headroom = int64_t{5} << 30;
  const std::vector<int> devices = {0, 1, 2, 3};
  std::vector<int64_t> need;
  for (int r = 0; r < 4; ++r) need.push_back(rank_device_bytes(plan, r, headroom));
  EXPECT_EQ(need[0],
            plan.ranks[0].experts + plan.other_weight_bytes + plan.ranks[0].layer_copy + headroom);
  EXPECT_EQ(need[1], plan.ranks[1].experts);
  EXPECT_TRUE(check_ep_fits(plan, devices, need, headroom).ok());

  // Rank 0's GPU holds everything but its own shard: the gap the load-time check left.
  std::vector<int64_t> free = need;
  free[0] = need[0] - plan.ranks[0].experts;
  Status refused = check_ep_fits(plan, devices, free, headroom);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("rank 0 on GPU 0 needs"), std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find(std::to_string(need[0]) + " bytes needed, " +
                                   std::to_string(free[0]) + " free"),
            std::string::npos)
      << refused.message();

  // A later rank one byte short, on a GPU numbered apart from its rank.
  free = need;
  free[2] = need[2] - 1;
  refused = check_ep_fits(plan, {0, 1, 5, 3}, free, headroom);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("rank 2 on GPU 5 needs"), std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("GPU 5 has"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find(std::to_string(need[2]) + " bytes needed"), std::string::npos)
      << refused.message();
}

TEST(EpMemoryPlan, RefusesRankCountsItCannotShard) {
  const checkpoint::ModelConfig flash = fixture("v4_flash_config.json");
  for (int ranks : {0, 9}) {
    EXPECT_EQ(plan_ep_memory(flash, ranks).status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace dsv4::runtime
