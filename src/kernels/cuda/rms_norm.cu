// cuda::rms_norm: one block per row. The sum of squares is accumulated in double, as the CPU
// reference does, so the two differ only by the order of that sum (far below f32 rounding);
// the scaling is the same f32 expression, x · inv_rms · weight.
#include "kernels/contracts.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

__global__ void rms_norm_kernel(RowMatrix in, RowMatrix out, const float* weight, float eps) {
  const float* src = in.data + blockIdx.x * in.row_stride;
  float* dst = out.data + blockIdx.x * out.row_stride;
  const float inv_rms = row_inv_rms(src, in.n_cols, eps);
  for (int64_t i = threadIdx.x; i < in.n_cols; i += blockDim.x) {
    dst[i] = src[i] * inv_rms * (weight ? weight[i] : 1.0f);
  }
}

}  // namespace

void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y) {
  const auto [in, out, w] = rms_norm_operands(x, weight, y);
  if (in.n_rows == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(in.n_rows), kRowThreads, 0, op_stream()>>>(in, out, w,
                                                                                     eps);
  check_launch();
}

}  // namespace dsv4::kernels::cuda
