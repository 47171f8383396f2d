// Launchers of the dense GEMM kernels: the linear's four, each for the calls plan.cpp gives it
// (launch.cu calls them): the tensor-core ones (f32 x and y, a bf16 weight, exact to f32 by
// splitting x into three bf16: bf16_split.cuh) and the CUDA-core ones; and the dense experts'
// grouped GEMM. Plain C++.
#pragma once

#include <cstdint>

#include "kernels/contracts.h"
#include "kernels/cuda/gemm/dense/plan.h"

namespace dsv4::kernels::cuda {

// A call as the tensor-core kernels take it by value: x, the weight and y with their row
// strides, T, N (every group's outputs), K (one group's) and the outputs a group has (N for a
// plain linear; output n reads x's columns from (n / group_rows)·K). The weight is bf16 bits
// (w), or e4m3 codes (w8, w_stride bytes a row) with their power-of-two 128 × 128 block scales,
// which the kernels decode to the same bf16 (device/fp8_decode.cuh).
struct TensorCoreOperands {
  const float* x;
  const uint16_t* w;
  float* y;
  int64_t x_stride, w_stride, y_stride;
  int t, n, k, group_rows;
  const uint8_t* w8 = nullptr;
  const float* w_scales = nullptr;  // [ceil(N/128), scale_cols]
  int64_t scale_cols = 0;
};
TensorCoreOperands tensor_core_operands(const LinearOperands& o, int64_t n_groups);

// linear_tensor_cores.cu: many rows (DenseKernel::kTensorCores).
void linear_tensor_cores(const LinearOperands& o, int64_t n_groups);

// linear_few_rows_tensor_cores.cu: 2-16 rows (DenseKernel::kFewRowsTensorCores), `warps` a CTA.
void linear_few_rows_tensor_cores(const LinearOperands& o, int64_t n_groups, int warps);

// linear_cuda_cores.cu: DenseKernel::kTiled and kFewRows.
void linear_cuda_cores(const LinearOperands& o, int64_t n_groups, const DensePlan& plan);

// linear_narrow.cu: many rows, few outputs, one group (DenseKernel::kNarrow).
void linear_narrow(const LinearOperands& o, const DensePlan& plan);

// grouped_linear.cu: y [R, N] = each row of x [R, K] times its group's w [G, N, K] (f32), the
// groups by the device row offsets [G+1] (cuda::grouped_linear has checked the shapes).
void launch_grouped_linear(const RowMatrix& x, const float* w, const int32_t* offsets,
                           int64_t n_groups, const RowMatrix& y);

}  // namespace dsv4::kernels::cuda
