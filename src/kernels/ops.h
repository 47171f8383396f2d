// The device-agnostic ops the model is written against. Every op has a CPU reference
// (kernels/cpu/) and, where it matters for speed, a CUDA implementation (kernels/cuda/) with
// the same contract; ops.cpp dispatches on the tensors' device and is the only place in the
// tree that branches on it. Tensors are TensorViews; shapes are in the comments.
//
// Dimension letters: T tokens, D model width, N output features, K input features, E experts.
#pragma once

#include "base/tensor.h"
#include "dsv4/status.h"

namespace dsv4::kernels {

}  // namespace dsv4::kernels
