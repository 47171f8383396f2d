// Activations the model allocates per call (f32 or i32 tensors on the device of the weights;
// the CPU reference allocates freely), and views into them.
#pragma once

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

}  // namespace dsv4::model
