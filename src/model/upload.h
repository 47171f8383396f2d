// Host-built bookkeeping (positions, candidate indices) moved to the device the model runs on.
// On the CPU this is one copy; the values are small (one row per token).
#pragma once

#include <cstring>
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

// While a decode step is captured into a graph (decode_graph.h), its uploads copy from pinned
// host slots, one an upload in order, which each replay rewrites with that step's values (a
// captured copy reads the same host address on every replay, and a pageable temporary is gone
// by then).
class UploadSlots {
 public:
  virtual ~UploadSlots() = default;
  // Pinned host memory of `bytes` for the next upload.
  virtual Result<void*> next(size_t bytes) = 0;
};

// This thread's slots while it captures a step, else null.
inline UploadSlots*& capturing_upload_slots() {
  thread_local UploadSlots* slots = nullptr;
  return slots;
}

// A `device` tensor of `shape` holding `values` (numel(shape) of them).
template <typename T>
Result<Tensor> upload(const std::vector<T>& values, Shape shape, Device device) {
  DSV4_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "upload: %zu values for %s",
             values.size(), shape.to_string().c_str());
  DSV4_ASSIGN_OR_RETURN(Tensor tensor, Tensor::empty(dtype_of<T>(), shape, device));
  void* source = const_cast<T*>(values.data());
  if (UploadSlots* slots = capturing_upload_slots(); slots != nullptr && device != Device::kCpu) {
    DSV4_ASSIGN_OR_RETURN(source, slots->next(values.size() * sizeof(T)));
    std::memcpy(source, values.data(), values.size() * sizeof(T));
  }
  const TensorView host = TensorView::contiguous(source, dtype_of<T>(), Device::kCpu, shape);
  DSV4_RETURN_IF_ERROR(copy_tensor(tensor.view(), host));
  return tensor;
}

}  // namespace dsv4::model
