// Buffer and Tensor on the host: the errors of an impossible allocation (model sizes come from
// user configs, so they must not abort).
#include "base/buffer.h"

#include <gtest/gtest.h>

#include <string>

namespace dsv4 {
namespace {

TEST(TensorTest, ImpossibleShapesAreErrorsNotAborts) {
  EXPECT_EQ(Tensor::empty(DType::kF32, {2, -1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::empty_mapped_host(DType::kF32, {-3}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::empty(DType::kU8, {int64_t{1} << 60}).status().code(),
            StatusCode::kResourceExhausted);
  // Counts that wrap to a small allocation (here 0 bytes) must not come back as a tensor:
  // elements past int64, and bytes past size_t.
  for (const Shape& huge : {Shape{int64_t{1} << 62, 512}, Shape{int64_t{1} << 62}}) {
    const Result<Tensor> t = Tensor::empty(DType::kF32, huge);
    EXPECT_EQ(t.status().code(), StatusCode::kResourceExhausted) << huge.to_string();
    EXPECT_NE(t.status().message().find(huge.to_string()), std::string::npos)
        << t.status().message();
  }
}

}  // namespace
}  // namespace dsv4
