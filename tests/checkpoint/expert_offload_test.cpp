// plan_expert_offload: which layers' NVFP4 experts go to host memory, and the messages when a
// checkpoint cannot be placed. Sizes in GiB (the messages print one decimal of them).
#include "checkpoint/expert_offload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "testing/random.h"

namespace dsv4::checkpoint {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// Layer 0 dense (no NVFP4 stacks), layers 1-3 with 3 GiB of codes and block scales each; the
// other weights 1 GiB of values (2 GiB in bf16): 11 GiB at least on the device.
LoadPlan three_packed_layers() {
  LoadPlan plan;
  plan.packed_expert_bytes = 9 * kGiB;
  plan.value_elements = kGiB;
  plan.expert_bulk_bytes = {0, 3 * kGiB, 3 * kGiB, 3 * kGiB};
  return plan;
}

TEST(ExpertOffloadTest, AutomaticOffloadsNothingWhenEverythingFits) {
  auto offload =
      plan_expert_offload(three_packed_layers(), kAutoExpertOffload, 12 * kGiB, kGiB, 100 * kGiB);
  ASSERT_TRUE(offload.ok()) << offload.status().to_string();
  EXPECT_EQ(offload->layers(), 0);
  EXPECT_EQ(offload->host_bytes, 0);
}

TEST(ExpertOffloadTest, AutomaticOffloadsTheFewestLastLayers) {
  // 11 + 1 headroom = 12 GiB against 9 free: with room to copy a layer back (3 GiB), one layer
  // offloaded saves nothing, two save 3 GiB.
  auto offload =
      plan_expert_offload(three_packed_layers(), kAutoExpertOffload, 9 * kGiB, kGiB, 100 * kGiB);
  ASSERT_TRUE(offload.ok()) << offload.status().to_string();
  EXPECT_EQ(offload->offloaded, (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(offload->host_bytes, 6 * kGiB);
  EXPECT_EQ(offload->copy_bytes, 3 * kGiB);
  EXPECT_EQ(offload->describe(),
            "expert offload: the NVFP4 routed experts of 2 layers (2, 3; 6.0 GiB) are in mapped "
            "host memory, copied to the GPU as a step needs them");
}

TEST(ExpertOffloadTest, ACountOffloadsThatManyLayersEvenWhenAllFit) {
  auto offload = plan_expert_offload(three_packed_layers(), 3, 100 * kGiB, kGiB, 100 * kGiB);
  ASSERT_TRUE(offload.ok()) << offload.status().to_string();
  EXPECT_EQ(offload->offloaded, (std::vector<bool>{false, true, true, true}));
  auto none = plan_expert_offload(three_packed_layers(), 0, 100 * kGiB, kGiB, 100 * kGiB);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->layers(), 0);
}

TEST(ExpertOffloadTest, RefusesMoreLayersThanHaveNvfp4Experts) {
  const Status status =
      plan_expert_offload(three_packed_layers(), 4, 100 * kGiB, kGiB, 100 * kGiB).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "expert offload of 4 layers: the checkpoint has 3 layers with NVFP4 routed experts");
  EXPECT_EQ(
      plan_expert_offload(three_packed_layers(), -2, 100 * kGiB, kGiB, 100 * kGiB).status().code(),
      StatusCode::kInvalidArgument);
}

// A plan refused for lack of memory, with exactly this message.
void expect_exhausted(const Status& status, const std::string& message) {
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), message);
}

// V4-Flash's experts alone, in NVFP4, are 156 GB: more than one H200 without offload.
TEST(ExpertOffloadTest, SaysWhatNeedsHowMuchWhenTheDeviceIsTooSmall) {
  expect_exhausted(
      plan_expert_offload(three_packed_layers(), 0, 10 * kGiB, kGiB, 0).status(),
      "the checkpoint's weights need at least 11.0 GiB on the device (NVFP4 experts 9.0 GiB, "
      "the other weights 2.0 GiB in bf16), and 1.0 GiB for caches and scratch; the device "
      "has 10.0 GiB free (more layers' experts in host memory would make it fit)");
  expect_exhausted(
      plan_expert_offload(three_packed_layers(), kAutoExpertOffload, 5 * kGiB, kGiB, 100 * kGiB)
          .status(),
      "the checkpoint's weights need at least 11.0 GiB on the device (NVFP4 experts 9.0 GiB, "
      "the other weights 2.0 GiB in bf16), 5.0 GiB with the experts of 3 layers (9.0 GiB) "
      "in host memory and room to copy one back (3.0 GiB), and 1.0 GiB for caches and "
      "scratch; the device has 5.0 GiB free");
}

TEST(ExpertOffloadTest, SaysSoWhenTheHostCannotPinTheOffloadedExperts) {
  expect_exhausted(
      plan_expert_offload(three_packed_layers(), kAutoExpertOffload, 9 * kGiB, kGiB, 5 * kGiB)
          .status(),
      "the routed experts of 2 layers in host memory need 6.0 GiB of pinned host memory; "
      "the host has 5.0 GiB available");
}

// The device bytes of an offload set, restated: the weights, less the offloaded bulk, plus room
// for the largest offloaded layer's copy, plus the headroom.
int64_t device_need(const LoadPlan& plan, const std::vector<bool>& offloaded, int64_t headroom) {
  int64_t need = plan.min_device_bytes() + headroom, largest = 0;
  for (size_t l = 0; l < offloaded.size(); ++l) {
    if (!offloaded[l]) continue;
    need -= plan.expert_bulk_bytes[l];
    largest = std::max(largest, plan.expert_bulk_bytes[l]);
  }
  return need + largest;
}

// Random plans: an automatic plan fits, offloads a suffix of the NVFP4 layers, and is minimal
// (one layer fewer would not fit); an error only when offloading every such layer would not fit.
TEST(ExpertOffloadTest, AutomaticPlansFitAndAreMinimalOnRandomCheckpoints) {
  testing::SeededRng rng;
  for (int trial = 0; trial < 500; ++trial) {
    LoadPlan plan;
    plan.value_elements = rng.uniform_int(0, 1000);
    plan.expert_bulk_bytes.resize(static_cast<size_t>(rng.uniform_int(0, 12)));
    std::vector<size_t> nvfp4_layers;  // last first
    int64_t all_bulk = 0;
    for (int64_t& bytes : plan.expert_bulk_bytes) {
      bytes = rng.uniform_int(0, 3) == 0 ? 0 : rng.uniform_int(1, 500);
      all_bulk += bytes;
    }
    for (size_t l = plan.expert_bulk_bytes.size(); l-- > 0;) {
      if (plan.expert_bulk_bytes[l] > 0) nvfp4_layers.push_back(l);
    }
    plan.packed_expert_bytes = all_bulk + rng.uniform_int(0, 50);
    const int64_t headroom = rng.uniform_int(0, 100);
    const int64_t device_free = rng.uniform_int(0, plan.min_device_bytes() + headroom + 100);
    auto offload = plan_expert_offload(plan, kAutoExpertOffload, device_free, headroom, all_bulk);
    SCOPED_TRACE("trial " + std::to_string(trial));
    // The suffixes of the NVFP4 layers, fewest first: the first that fits is the answer.
    std::vector<bool> suffix(plan.expert_bulk_bytes.size(), false);
    std::vector<std::vector<bool>> suffixes = {suffix};
    for (const size_t l : nvfp4_layers) {
      suffix[l] = true;
      suffixes.push_back(suffix);
    }
    const auto first_fit = std::find_if(suffixes.begin(), suffixes.end(), [&](const auto& s) {
      return device_need(plan, s, headroom) <= device_free;
    });
    if (first_fit == suffixes.end()) {
      EXPECT_EQ(offload.status().code(), StatusCode::kResourceExhausted);
      continue;
    }
    ASSERT_TRUE(offload.ok()) << offload.status().to_string();
    EXPECT_EQ(offload->offloaded, *first_fit);
    EXPECT_LE(device_need(plan, offload->offloaded, headroom), device_free);
  }
}

}  // namespace
}  // namespace dsv4::checkpoint
