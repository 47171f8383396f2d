// copy_touched_experts on the CPU (kernels/ops.h) against the bytes each position must hold:
// from's where its expert is listed, its own otherwise, checked byte by byte. And moe_ffn on the
// CPU with touched copies: the same y bits as without, the listed experts copied, the others
// untouched.
//
// Dimension letters: E routed experts.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

#include "kernels/copy_touched_experts_case.h"
#include "kernels/ops.h"
#include "moe_test_layer.h"
#include "testing/device.h"

namespace dsv4::kernels {
namespace {

using touched_test::random_touched_case;
using touched_test::TouchedCase;

// E, experts listed (≥ E: all of them).
class CopyTouchedExpertsTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(CopyTouchedExpertsTest, CopiesTheListedExpertsOnly) {
  const auto [n_experts, n_listed] = GetParam();
  dsv4::testing::SeededRng rng;
  const TouchedCase c = random_touched_case(rng, n_experts, n_listed);
  std::array<Tensor, 4> before;
  for (int r = 0; r < 4; ++r) before[r] = dsv4::testing::to_host(c.to[r].view());
  ASSERT_TRUE(
      copy_touched_experts(c.active.view(), TouchedCase::bulk(c.from), TouchedCase::bulk(c.to))
          .ok());
  for (int r = 0; r < 4; ++r) {
    const int64_t slice = c.from[r].numel() / n_experts;
    for (int64_t i = 0; i < c.from[r].numel(); ++i) {
      const Tensor& want = c.listed[i / slice] ? c.from[r] : before[r];
      ASSERT_EQ(c.to[r].data_as<uint8_t>()[i], want.data_as<uint8_t>()[i])
          << "region " << r << ", expert " << i / slice << ", byte " << i % slice;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Lists, CopyTouchedExpertsTest,
                         ::testing::Values(std::tuple{1, 0}, std::tuple{1, 1}, std::tuple{8, 0},
                                           std::tuple{8, 3}, std::tuple{8, 8}, std::tuple{33, 17}));

// Copies that start as 0xFF (UE4M3 NaN scales, so a GEMM that read an expert the op did not copy
// would give NaN): y as without copies, bit for bit; exactly the routed experts copied.
TEST(CopyTouchedExpertsTest, MoeFfnReadsTheCopies) {
  dsv4::testing::SeededRng rng;
  const moe_test::MoeTestLayer layer =
      moe_test::make_moe_layer(rng, 256, 128, 16, 4, moe_test::Routing::kScore, MoeMode::kW4A16);
  const int64_t n_tokens = 3;
  std::vector<float> x = moe_test::random_moe_input(rng, n_tokens, layer.dim);
  const Shape shape{n_tokens, layer.dim};
  const TensorView xv = TensorView::contiguous(x.data(), DType::kF32, Device::kCpu, shape);
  MoeWeightsView weights = layer.view(false);
  std::vector<float> y_in_place(x.size()), y_copies(x.size());
  ASSERT_TRUE(moe_ffn(xv, TensorView{}, weights, layer.config, TensorView{},
                      TensorView::contiguous(y_in_place.data(), DType::kF32, Device::kCpu, shape))
                  .ok());

  std::array<Tensor, 4> copies;
  const ExpertBulkCopies from = weights.routed_bulk();
  const TensorView* bulk[4] = {&from.w13_packed, &from.w13_block_scale, &from.w2_packed,
                               &from.w2_block_scale};
  for (int r = 0; r < 4; ++r) copies[r] = dsv4::testing::poisoned_host(DType::kU8, bulk[r]->shape);
  weights.touched_copies = TouchedCase::bulk(copies);
  ASSERT_TRUE(moe_ffn(xv, TensorView{}, weights, layer.config, TensorView{},
                      TensorView::contiguous(y_copies.data(), DType::kF32, Device::kCpu, shape))
                  .ok());
  EXPECT_EQ(std::memcmp(y_copies.data(), y_in_place.data(), x.size() * sizeof(float)), 0);

  // The experts the routing chose: those whose w13 codes are no longer all 0xFF must hold the
  // checkpoint's bytes; at most T·K of them.
  int64_t n_copied = 0;
  for (int r = 0; r < 4; ++r) {
    const int64_t n_experts = bulk[r]->size(0), slice = bulk[r]->bytes() / n_experts;
    for (int64_t e = 0; e < n_experts; ++e) {
      const uint8_t* got = copies[r].data_as<uint8_t>() + e * slice;
      const bool copied = std::memcmp(got, bulk[r]->data_as<uint8_t>() + e * slice, slice) == 0;
      const bool poisoned = std::all_of(got, got + slice, [](uint8_t b) { return b == 0xFF; });
      EXPECT_TRUE(copied || poisoned) << "region " << r << ", expert " << e;
      if (r == 0 && copied && !poisoned) ++n_copied;
    }
  }
  EXPECT_GE(n_copied, 1);
  EXPECT_LE(n_copied, n_tokens * layer.config.n_expert_used);
}

}  // namespace
}  // namespace dsv4::kernels
