// copy_touched_experts on the GPU against the CPU reference (label cuda): fresh random regions
// and lists, the sources in mapped pinned host memory as expert offload places them, the copies
// on the device starting from the same random bytes as the host's; the results compared byte for
// byte (the op is a copy). The large case's experts span several of the kernel's grid strides.
//
// Dimension letters: E routed experts.
#include <gtest/gtest.h>

#include <tuple>

#include "kernels/copy_touched_experts_case.h"
#include "kernels/ops.h"
#include "testing/device.h"

namespace dsv4::kernels {
namespace {

using touched_test::random_touched_case;
using touched_test::TouchedCase;

Tensor to_mapped_host(const Tensor& host) {
  Result<Tensor> mapped = Tensor::empty_mapped_host(host.dtype(), host.shape());
  DSV4_CHECK(mapped.ok(), "%s", mapped.status().to_string().c_str());
  DSV4_CHECK(copy_tensor(mapped->view(), host.view()).ok(), "copy to mapped host memory");
  return std::move(mapped).value();
}

// E, experts listed (≥ E: all of them), rows per expert slice at most.
class CopyTouchedExpertsCudaTest
    : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t>> {};

TEST_P(CopyTouchedExpertsCudaTest, MatchesTheCpu) {
  const auto [n_experts, n_listed, max_rows] = GetParam();
  dsv4::testing::SeededRng rng;
  const TouchedCase c = random_touched_case(rng, n_experts, n_listed, max_rows);
  std::array<Tensor, 4> from, to;
  for (int r = 0; r < 4; ++r) {
    from[r] = to_mapped_host(c.from[r]);
    to[r] = dsv4::testing::to_device(c.to[r].view());
  }
  const Tensor active = dsv4::testing::to_device(c.active.view());
  ASSERT_TRUE(
      copy_touched_experts(active.view(), TouchedCase::bulk(from), TouchedCase::bulk(to)).ok());
  ASSERT_TRUE(
      copy_touched_experts(c.active.view(), TouchedCase::bulk(c.from), TouchedCase::bulk(c.to))
          .ok());
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(
        dsv4::testing::same_bytes(dsv4::testing::to_host(to[r].view()).view(), c.to[r].view()))
        << "region " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Lists, CopyTouchedExpertsCudaTest,
                         ::testing::Values(std::tuple{1, 1, 4}, std::tuple{8, 0, 4},
                                           std::tuple{8, 3, 4}, std::tuple{33, 17, 64},
                                           std::tuple{256, 256, 2}, std::tuple{4, 2, 100000}));

}  // namespace
}  // namespace dsv4::kernels
