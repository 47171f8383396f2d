// The tensor-core kernels of cuda::linear: f32 x and y, a bf16 weight, exact to f32 by splitting x
// into three bf16 (bf16_split.cuh). linear.cu asks whether a call fits one and runs it.
#pragma once

#include <cstdint>

#include "kernels/contracts.h"

namespace dsv4::kernels::cuda {

// Whether the call (n_groups block-diagonal groups; 1 for a plain linear) runs on the tensor
// cores: a bf16 weight with 16-byte aligned rows of a multiple of 8, at least 32 rows of x and
// enough 128 × 128 tiles to spread over the GPU.
bool linear_tensor_cores_fit(const LinearOperands& o, int64_t n_groups);

// A call as the tensor-core kernels take it by value: x, the bf16 weight's bits and y with their
// row strides, T, N (every group's outputs), K (one group's) and the outputs a group has (N for a
// plain linear; output n reads x's columns from (n / group_rows)·K).
struct TensorCoreOperands {
  const float* x;
  const uint16_t* w;
  float* y;
  int64_t x_stride, w_stride, y_stride;
  int t, n, k, group_rows;
};
TensorCoreOperands tensor_core_operands(const LinearOperands& o, int64_t n_groups);

void linear_tensor_cores(const LinearOperands& o, int64_t n_groups);

// linear_few_rows_tensor_cores.cu: whether the call runs there: a bf16 weight with 16-byte
// aligned rows, K a multiple of 32, groups of a multiple of 16 outputs, 2-16 rows of x in
// 16-byte aligned rows (a decode step of a batch), and enough 16-output tiles to beat the CUDA
// cores (at least 32, and 128 at 2-4 rows).
bool linear_few_rows_tensor_cores_fit(const LinearOperands& o, int64_t n_groups);

void linear_few_rows_tensor_cores(const LinearOperands& o, int64_t n_groups);

}  // namespace dsv4::kernels::cuda
