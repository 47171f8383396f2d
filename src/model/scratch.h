// Activations the model allocates per call (f32 or i32 tensors on the device of the weights;
// the CPU reference allocates freely), and views into them.
#pragma once

#include <span>

#include "base/buffer.h"

namespace dsv4::model {

inline Result<Tensor> scratch(DType dtype, Shape shape, Device device) {
  return Tensor::empty(dtype, shape, device);
}

// Columns [begin, end) of a row-major f32 matrix [R, C], sharing memory: the rows stay strided,
// which the dense ops accept (so a fused projection's halves need no copy).
inline TensorView columns(const TensorView& matrix, int64_t begin, int64_t end) {
  DSV4_CHECK(matrix.rank() == 2 && matrix.dtype == DType::kF32 && 0 <= begin && begin <= end &&
                 end <= matrix.size(1),
             "columns [%lld, %lld) of %s", (long long)begin, (long long)end,
             matrix.shape.to_string().c_str());
  TensorView view = matrix;
  view.data = static_cast<float*>(matrix.data) + begin;
  view.shape[1] = end - begin;
  return view;
}

// The views as one [Σ n, …] view, when each is contiguous and starts where the one before ends
// (rows of one buffer, as a caller that lays out a step's per-sequence outputs makes them); else
// an empty view. One copy then moves them all, not one a view.
inline TensorView joined_rows(std::span<const TensorView> views) {
  if (views.empty()) return TensorView{};
  const TensorView& front = views.front();
  auto* next = static_cast<char*>(front.data);
  int64_t n_rows = 0;
  for (const TensorView& view : views) {
    if (view.data != next || !view.is_contiguous() || view.dtype != front.dtype ||
        view.rank() != front.rank() || view.rank() == 0) {
      return TensorView{};
    }
    for (int64_t d = 1; d < view.rank(); ++d) {
      if (view.size(d) != front.size(d)) return TensorView{};
    }
    next += view.bytes();
    n_rows += view.size(0);
  }
  Shape shape = front.shape;
  shape[0] = n_rows;
  return TensorView::contiguous(front.data, front.dtype, front.device, shape);
}

}  // namespace dsv4::model
