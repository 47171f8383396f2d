// copy_tensors: a batch of copies lands as each alone would, and a batch with one bad pair is
// refused before anything is copied.
#include "base/buffer.h"

#include <gtest/gtest.h>

#include <vector>

namespace dsv4 {
namespace {

TEST(CopyTensorsTest, CopiesEachPairOrNoneWhenOneIsBad) {
  Tensor a = Tensor::host(DType::kF32, {2, 3}), b = Tensor::host(DType::kI32, {4});
  for (int i = 0; i < 6; ++i) a.data_as<float>()[i] = 0.5f * i;
  for (int i = 0; i < 4; ++i) b.data_as<int32_t>()[i] = 7 * i;
  Tensor a2 = Tensor::host(DType::kF32, {2, 3}), b2 = Tensor::host(DType::kI32, {4});
  Tensor empty = Tensor::host(DType::kF32, {0});
  const std::vector<TensorCopy> copies = {
      {a2.view(), a.view()}, {b2.view(), b.view()}, {empty.view(), empty.view()}};
  ASSERT_TRUE(copy_tensors(copies).ok());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a2.data_as<float>()[i], 0.5f * i);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b2.data_as<int32_t>()[i], 7 * i);

  Tensor fresh = Tensor::host(DType::kF32, {2, 3});
  for (int i = 0; i < 6; ++i) fresh.data_as<float>()[i] = -1.0f;
  const std::vector<TensorCopy> bad = {{fresh.view(), a.view()}, {b2.view(), a.view()}};
  const Status refused = copy_tensors(bad);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("F32[2, 3] into I32[4]"), std::string::npos)
      << refused.message();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(fresh.data_as<float>()[i], -1.0f);  // nothing copied
}

}  // namespace
}  // namespace dsv4
