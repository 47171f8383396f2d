// Host-built bookkeeping (positions, candidate indices) moved to the device the model runs on.
// On the CPU this is one copy; the values are small (one row per token).
#pragma once

#include <vector>

#include "base/buffer.h"
#include "dsv4/status.h"

namespace dsv4::model {

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kI64;
}

// A `device` tensor of `shape` holding `values` (numel(shape) of them).
template <typename T>
Result<Tensor> upload(const std::vector<T>& values, Shape shape, Device device) {
  DSV4_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "upload: %zu values for %s",
             values.size(), shape.to_string().c_str());
  DSV4_ASSIGN_OR_RETURN(Tensor tensor, Tensor::empty(dtype_of<T>(), shape, device));
  const TensorView host =
      TensorView::contiguous(const_cast<T*>(values.data()), dtype_of<T>(), Device::kCpu, shape);
  DSV4_RETURN_IF_ERROR(copy_tensor(tensor.view(), host));
  return tensor;
}

}  // namespace dsv4::model
