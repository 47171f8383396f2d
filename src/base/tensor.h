// TensorView: a non-owning, typed view of memory on one device - the currency of every op in
// src/kernels/ops.h. Shapes are row-major [outer, ..., inner] with strides in elements.
// Owning storage is base/buffer.h's Tensor.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "base/check.h"
#include "base/dtype.h"

namespace dsv4 {

enum class Device { kCpu, kCuda };

// Enough for every tensor DeepSeek-V4 has ([E, 2F, D] stacked experts, [B, T, H, Dh] attention).
inline constexpr int kMaxDims = 5;

struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> sizes) {
    DSV4_CHECK(sizes.size() <= kMaxDims, "rank %zu over kMaxDims", sizes.size());
    for (int64_t size : sizes) dims[rank++] = size;
  }

  int64_t operator[](int i) const { return dims[i]; }
  int64_t& operator[](int i) { return dims[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  bool operator==(const Shape& other) const {
    if (rank != other.rank) return false;
    for (int i = 0; i < rank; ++i) {
      if (dims[i] != other.dims[i]) return false;
    }
    return true;
  }
  bool operator!=(const Shape& other) const { return !(*this == other); }
  // "[64, 128]", the form every error message uses.
  std::string to_string() const {
    std::string s = "[";
    for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  Shape shape;
  std::array<int64_t, kMaxDims> stride{};  // in elements

  static TensorView contiguous(void* data, DType dtype, Device device, Shape shape) {
    TensorView view{data, dtype, device, shape, {}};
    int64_t step = 1;
    for (int i = shape.rank - 1; i >= 0; --i) {
      view.stride[i] = step;
      step *= shape[i];
    }
    return view;
  }

  int rank() const { return shape.rank; }
  int64_t size(int dim) const { return shape[dim < 0 ? dim + shape.rank : dim]; }
  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const { return *this == contiguous(data, dtype, device, shape); }
  bool operator==(const TensorView& o) const {
    return data == o.data && dtype == o.dtype && device == o.device && shape == o.shape &&
           stride == o.stride;
  }

  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data);
  }

  // Rows [begin, end) of dimension 0, sharing memory.
  TensorView rows(int64_t begin, int64_t end) const {
    DSV4_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= shape[0], "bad row range");
    TensorView view = *this;
    view.data = static_cast<char*>(data) + begin * stride[0] * static_cast<int64_t>(dtype_size(dtype));
    view.shape[0] = end - begin;
    return view;
  }

  // The same contiguous memory seen with another shape of the same element count.
  TensorView reshaped(Shape new_shape) const {
    DSV4_CHECK(is_contiguous() && new_shape.numel() == numel(), "reshape %s -> %s",
               shape.to_string().c_str(), new_shape.to_string().c_str());
    return contiguous(data, dtype, device, new_shape);
  }
};

}  // namespace dsv4
