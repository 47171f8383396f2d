// Activations the model allocates per call: f32 or i32 tensors on the device of the weights.
// The CPU reference allocates freely; the CUDA runtime will hand in persistent buffers instead.
#pragma once

#include "base/buffer.h"

namespace dsv4::model {

inline Result<Tensor> scratch(DType dtype, Shape shape, Device device) {
  return Tensor::empty(dtype, shape, device);
}

}  // namespace dsv4::model
