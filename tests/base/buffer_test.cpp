// Buffer and Tensor on the host: the errors of an impossible allocation (model sizes come from
// user configs, so they must not abort).
#include "base/buffer.h"

#include <gtest/gtest.h>

namespace dsv4 {
namespace {

TEST(TensorTest, ImpossibleShapesAreErrorsNotAborts) {
  EXPECT_EQ(Tensor::empty(DType::kF32, {2, -1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::empty_mapped_host(DType::kF32, {-3}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::empty(DType::kU8, {int64_t{1} << 60}).status().code(),
            StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace dsv4
