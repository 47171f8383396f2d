// model/linear.h on the CPU (label unit): linear_pair has the bits of two linear() calls in
// both profiles (linear_pair_case.h; numerics_cuda_test.cpp runs the same on the GPU), and the
// block-diagonal linear takes the path its profile and shape say.
#include <gtest/gtest.h>

#include <string>

#include "kernels/ops.h"
#include "model/linear_pair_case.h"

namespace dsv4::model {
namespace {

TEST(LinearPair, HasTheBitsOfTwoLinearsOnTheCpu) {
  testing_linear::expect_pair_has_the_bits_of_two_linears(Device::kCpu);
}

// The block-diagonal linear (wo_a) follows the profile: fast quantizes x once and runs
// kernels::block_diagonal_linear_fp8 where K and R are multiples of 128, else (and in the exact
// profile) it is the exact kernels::block_diagonal_linear on the FP8 weight.
TEST(BlockDiagonalLinear, FollowsTheProfile) {
  testing::SeededRng rng;
  struct Case {
    int64_t t, n_groups, r, k;
    bool fp8_gemm;  // whether the fast profile takes the FP8 GEMM
  };
  for (const Case c : {Case{2, 2, 128, 256, true}, Case{3, 2, 64, 256, false}}) {
    SCOPED_TRACE("R=" + std::to_string(c.r));
    const checkpoint::LinearWeight w =
        testing_linear::random_fp8_linear(rng, c.n_groups * c.r, c.k, Device::kCpu);
    const Tensor x = testing_linear::random_f32(rng, {c.t, c.n_groups * c.k}, Device::kCpu);
    const Shape y_shape{c.t, c.n_groups * c.r};
    Tensor exact = Tensor::host(DType::kF32, y_shape), fast = Tensor::host(DType::kF32, y_shape);
    ASSERT_TRUE(
        block_diagonal_linear(x.view(), w, c.n_groups, exact.view(), Numerics::kExact).ok());
    ASSERT_TRUE(block_diagonal_linear(x.view(), w, c.n_groups, fast.view(), Numerics::kFast).ok());
    Tensor want = Tensor::host(DType::kF32, y_shape);
    ASSERT_TRUE(
        kernels::block_diagonal_linear(x.view(), w.fp8_view(), c.n_groups, want.view()).ok());
    EXPECT_TRUE(testing::same_bytes(exact.view(), want.view()));
    if (c.fp8_gemm) {
      const Tensor values = Tensor::host(DType::kF8E4M3, {c.t, c.n_groups * c.k});
      const Tensor scales = Tensor::host(DType::kF32, {c.t, c.n_groups * c.k / 128});
      const kernels::Fp8Activation a{values.view(), scales.view()};
      ASSERT_TRUE(kernels::quantize_activation_fp8(x.view(), a).ok());
      ASSERT_TRUE(
          kernels::block_diagonal_linear_fp8(a, w.fp8_view(), c.n_groups, want.view()).ok());
    }
    EXPECT_TRUE(testing::same_bytes(fast.view(), want.view()));
  }
}

}  // namespace
}  // namespace dsv4::model
