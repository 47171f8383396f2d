// The expert-parallel plan of a checkpoint as bound (runtime/ep_memory_plan.h, from the loader's
// LoadPlan) on tiny synthetic checkpoints (tests/checkpoint/synthetic_checkpoint.h: NVFP4 routed
// experts, the MTP block's in MXFP4, the FP8-able linears in FP8 with e8m0 block scales as the
// release stores them, or in bf16), against bytes counted from the files' tensor list
// (official_inventory.h), not through the plan's code: a tensor at a byte a value where a GPU
// keeps it FP8 (its 128 × 128 block scales at an f32 each), 8 for an expert id, at least a bf16
// for every other value; a routed expert matrix at ½ byte a value and a UE4M3 scale per 16, an
// f32 global scale per expert and stack. Under a config that declares the release's FP8 the
// bf16 checkpoint needs more than that config's plan, and the check on the bound plan refuses
// the rank it does not fit, saying so.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint/loader.h"
#include "checkpoint/synthetic_checkpoint.h"
#include "runtime/ep_memory_plan.h"
#include "testing/random.h"
#include "testing/temp_dir.h"

namespace dsv4::runtime {
namespace {

using testing::ExpertForm;
using testing::LinearForm;

// The tiny config with the release's quantization_config: it declares the FP8 linears.
std::string declaring_fp8(const std::string& config_json) {
  return "{\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", "
         "\"scale_fmt\": \"ue8m0\", \"weight_block_size\": [128, 128]}, " +
         config_json.substr(config_json.find('{') + 1);
}

bool is_routed_expert(const std::string& name) {
  return name.find(".ffn.experts.") != std::string::npos;
}
bool in_main_layer(const std::string& name) { return name.starts_with("layers."); }

// Every main layer's routed stacks: each expert's w1, w3 [F, D] and w2 [D, F] at 9/16 of a byte
// a value, and an f32 global scale per expert for w1 with w3 and one for w2.
int64_t routed_bytes(const checkpoint::ModelConfig& c) {
  const int64_t values = c.n_routed_experts * 3 * c.moe_intermediate_size * c.hidden_size;
  return c.n_layer * (values / 16 * 9 + 2 * 4 * c.n_routed_experts);
}

// Rank 0's other weights, from the tensor list: the MTP block's routed experts (MXFP4 in the
// files: codes [n, k/2] bytes, held in NVFP4 with twice the scales) with the same count as the
// main layers', FP8 linears a byte a value and an f32 a scale, ids 8 bytes, the rest 2.
int64_t other_bytes(const std::vector<testing::NamedShape>& inventory, int64_t n_experts) {
  int64_t bytes = 0;
  for (const testing::NamedShape& t : inventory) {
    const int64_t n = t.shape.numel();
    if (is_routed_expert(t.name)) {
      if (in_main_layer(t.name) || !t.name.ends_with(".weight")) continue;
      bytes += n + n / 8;  // codes and one UE4M3 scale per 16 values (8 code bytes)
    } else if (t.dtype == DType::kF8E4M3) {
      bytes += n;
    } else if (t.dtype == DType::kF8E8M0) {
      bytes += 4 * n;  // a linear's block scales, f32 on the GPU
    } else {
      bytes += (t.dtype == DType::kI64 ? 8 : 2) * n;
    }
  }
  return bytes + 2 * 4 * n_experts;  // the MTP block's global scales
}

// Every number a plan holds, in a fixed order: two plans are the same where these are.
std::vector<int64_t> numbers(const EpMemoryPlan& p) {
  std::vector<int64_t> out = {p.routed_expert_bytes, p.other_weight_bytes, p.host_bytes,
                              p.host_bytes_kept, p.largest_layer};
  for (const RankBytes& r : p.ranks) {
    out.insert(out.end(), {r.first_expert, r.n_experts, r.experts, r.other_weights, r.layer_copy});
  }
  return out;
}

class EpMemoryBoundTest : public ::testing::Test {
 protected:
  std::vector<testing::NamedShape> inventory(LinearForm linear) const {
    return testing::official_inventory(config_, {linear, ExpertForm::kNvfp4, true});
  }

  // The plan a GPU load (FP8 linears kept FP8) has of a `linear`-form checkpoint written with
  // `config_json`, before it decodes a tensor.
  checkpoint::LoadPlan bound(LinearForm linear, const std::string& config_json) {
    const std::string dir = dir_.file("checkpoint" + std::to_string(n_written_++));
    std::filesystem::create_directories(dir);
    const testing::SyntheticCheckpoint ckpt(inventory(linear), config_.n_routed_experts,
                                            rng_.engine());
    const Status written = ckpt.write(dir, config_json, rng_.engine());
    EXPECT_TRUE(written.ok()) << written.to_string();
    checkpoint::LoadOptions options;
    options.keep_fp8 = true;
    Result<checkpoint::LoadPlan> plan = checkpoint::plan_model(dir, options);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    if (!plan.ok()) return {};
    EXPECT_EQ(plan->first_problem, "");
    return *plan;
  }

  testing::SeededRng rng_;
  testing::TempDir dir_;
  int n_written_ = 0;
  checkpoint::ModelConfig config_ = testing::tiny_config();
};

// A checkpoint that stores what its config declares: FP8 linears under the release's
// quantization_config, bf16 ones under none. Its bound plan is the config's, byte for byte, and
// both are the bytes the tensor list gives.
TEST_F(EpMemoryBoundTest, IsTheConfigsPlanWhereTheCheckpointStoresWhatItDeclares) {
  checkpoint::ModelConfig fp8 =
      testing::parsed_config(declaring_fp8(testing::kTinyConfigJson), "tiny declaring fp8");
  ASSERT_TRUE(fp8.fp8_linears);
  ASSERT_FALSE(config_.fp8_linears);
  const int64_t e = config_.n_routed_experts;
  for (const auto& [linear, config, json] :
       {std::tuple{LinearForm::kFp8E8m0, fp8, declaring_fp8(testing::kTinyConfigJson)},
        std::tuple{LinearForm::kBf16, config_, std::string(testing::kTinyConfigJson)}}) {
    SCOPED_TRACE(linear == LinearForm::kBf16 ? "bf16 linears" : "fp8 linears");
    const checkpoint::LoadPlan plan = bound(linear, json);
    for (int ranks : {1, 2, 3, 4}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks");
      Result<EpMemoryPlan> as_bound = plan_ep_memory(plan, e, ranks);
      Result<EpMemoryPlan> declared = plan_ep_memory(config, ranks);
      ASSERT_TRUE(as_bound.ok()) << as_bound.status().to_string();
      ASSERT_TRUE(declared.ok()) << declared.status().to_string();
      EXPECT_EQ(numbers(*as_bound), numbers(*declared));
      EXPECT_EQ(as_bound->routed_expert_bytes, routed_bytes(config_));
      EXPECT_EQ(as_bound->other_weight_bytes, other_bytes(inventory(linear), e));
      // Over several ranks the main layers' codes and scales (all but the global scales) stage
      // in host memory a layer at a time, and rank 0 keeps room for one layer of them.
      const int64_t bulk = routed_bytes(config_) - config_.n_layer * 2 * 4 * e;
      EXPECT_EQ(as_bound->host_bytes, ranks > 1 ? bulk / config_.n_layer : 0);
      EXPECT_EQ(as_bound->largest_layer, ranks > 1 ? bulk / config_.n_layer : 0);
    }
  }
}

// bf16 linears under a config that declares FP8 (a synthetic checkpoint without --fp8-linears
// under the release's config): rank 0 holds more than the config's plan gives it, by what each
// FP8 linear and its scales take in bf16 less what they take in FP8; the experts are the same.
TEST_F(EpMemoryBoundTest, CountsBf16LinearsUnderAConfigDeclaringFp8) {
  const std::string json = declaring_fp8(testing::kTinyConfigJson);
  const checkpoint::ModelConfig declares_fp8 = testing::parsed_config(json, "tiny declaring fp8");
  const int64_t e = config_.n_routed_experts;
  const int64_t extra = other_bytes(inventory(LinearForm::kBf16), e) -
                        other_bytes(inventory(LinearForm::kFp8E8m0), e);
  // Each FP8 linear [n, k] with k, n ≤ 128 has one block: 2nk in bf16 against nk + 4.
  int64_t by_linear = 0;
  for (const testing::NamedShape& t : inventory(LinearForm::kFp8E8m0)) {
    if (t.dtype == DType::kF8E4M3 && !is_routed_expert(t.name)) by_linear += t.shape.numel() - 4;
  }
  ASSERT_GT(by_linear, 0);
  EXPECT_EQ(extra, by_linear);
  const checkpoint::LoadPlan plan = bound(LinearForm::kBf16, json);
  for (int ranks : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const EpMemoryPlan as_bound = plan_ep_memory(plan, e, ranks).value();
    const EpMemoryPlan declared = plan_ep_memory(declares_fp8, ranks).value();
    EXPECT_EQ(as_bound.other_weight_bytes - declared.other_weight_bytes, extra);
    EXPECT_EQ(as_bound.ranks[0].total() - declared.ranks[0].total(), extra);
    EXPECT_EQ(as_bound.routed_expert_bytes, declared.routed_expert_bytes);
    for (int r = 1; r < ranks; ++r) EXPECT_EQ(as_bound.ranks[r].total(), declared.ranks[r].total());
  }
}

// The check against fake GPUs that hold exactly what the config's plan needs: the FP8
// checkpoint fits; the bf16 one does not, and the refusal names rank 0, its GPU, the bytes it
// needs and has, that the checkpoint stores more than its config declares (by how many bytes),
// and that the leader's share chosen from the config does not hold. A later rank short of its
// own share is refused as such, its share being what the config declared.
TEST_F(EpMemoryBoundTest, RefusesARankTheCheckpointAsBoundDoesNotFit) {
  const std::string json = declaring_fp8(testing::kTinyConfigJson);
  const checkpoint::ModelConfig declares_fp8 = testing::parsed_config(json, "tiny declaring fp8");
  const int64_t e = config_.n_routed_experts, headroom = int64_t{3} << 20;
  const std::vector<int> devices = {0, 1};
  for (const int64_t leader : {int64_t{2}, int64_t{1}}) {
    SCOPED_TRACE("rank 0 owning " + std::to_string(leader) + " experts");
    const EpMemoryPlan declared =
        with_leader_experts(plan_ep_memory(declares_fp8, 2).value(), leader).value();
    std::vector<int64_t> free;
    for (int r = 0; r < 2; ++r) free.push_back(rank_device_bytes(declared, r, headroom));
    ASSERT_TRUE(check_ep_fits(declared, devices, free, headroom).ok());

    const EpMemoryPlan fp8 =
        with_leader_experts(plan_ep_memory(bound(LinearForm::kFp8E8m0, json), e, 2).value(), leader)
            .value();
    EXPECT_TRUE(check_bound_ep_fits(fp8, declared, devices, free, headroom).ok());

    const EpMemoryPlan bf16 =
        with_leader_experts(plan_ep_memory(bound(LinearForm::kBf16, json), e, 2).value(), leader)
            .value();
    const int64_t need = rank_device_bytes(bf16, 0, headroom);
    const int64_t extra = other_bytes(inventory(LinearForm::kBf16), e) -
                          other_bytes(inventory(LinearForm::kFp8E8m0), e);
    ASSERT_EQ(need, free[0] + extra);
    const Status refused = check_bound_ep_fits(bf16, declared, devices, free, headroom);
    EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
    const std::string& message = refused.message();
    for (const std::string& part :
         {std::string("the checkpoint as bound: rank 0 on GPU 0 needs"),
          std::to_string(need) + " bytes needed, " + std::to_string(free[0]) + " free",
          "the checkpoint stores more than its config declares: rank 0 needs " +
              std::to_string(extra) + " bytes more",
          std::string("every other weight"), std::string("stores in bf16"),
          "rank 0 owning " + std::to_string(leader) + " experts of each layer), does not hold"}) {
      EXPECT_NE(message.find(part), std::string::npos) << "no \"" << part << "\" in " << message;
    }
    // With room for those bytes it fits.
    std::vector<int64_t> roomier = free;
    roomier[0] = need;
    EXPECT_TRUE(check_bound_ep_fits(bf16, declared, devices, roomier, headroom).ok());

    // Rank 1 a byte short of its own share, on a GPU numbered apart from its rank: refused, but
    // not for the checkpoint storing more (rank 1's experts are as declared).
    roomier[1] = rank_device_bytes(bf16, 1, headroom) - 1;
    const Status short_rank = check_bound_ep_fits(bf16, declared, {0, 3}, roomier, headroom);
    EXPECT_EQ(short_rank.code(), StatusCode::kResourceExhausted);
    EXPECT_NE(short_rank.message().find("rank 1 on GPU 3 needs"), std::string::npos)
        << short_rank.message();
    EXPECT_EQ(short_rank.message().find("more than its config declares"), std::string::npos)
        << short_rank.message();
  }
}

}  // namespace
}  // namespace dsv4::runtime
