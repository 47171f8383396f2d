// model/linear.h on the CPU (label unit): linear_pair has the bits of two linear() calls in
// both profiles (linear_pair_case.h; numerics_cuda_test.cpp runs the same on the GPU).
#include <gtest/gtest.h>

#include "model/linear_pair_case.h"

namespace dsv4::model {
namespace {

TEST(LinearPair, HasTheBitsOfTwoLinearsOnTheCpu) {
  testing_linear::expect_pair_has_the_bits_of_two_linears(Device::kCpu);
}

}  // namespace
}  // namespace dsv4::model
