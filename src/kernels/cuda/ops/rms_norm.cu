// cuda::rms_norm: one block per row, its loads batched (common.cuh, kRowUnroll). The sum of squares
// is accumulated in double, as the CPU reference does, so the two differ only by the order of that
// sum (far below f32 rounding); the scaling is the same f32 expression, x · inv_rms · weight.
#include "kernels/contracts.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

// Threads a row: wide rows (the hyper-connection streams, D·M) get a whole block's worth, so a
// decode step's one or few rows are not one SM's 256 threads' serial work.
unsigned row_threads(int64_t n_cols) { return n_cols >= 4096 ? 1024 : kRowThreads; }

__global__ void rms_norm_kernel(RowMatrix in, RowMatrix out, const float* weight, float eps) {
  const float* src = in.data + blockIdx.x * in.row_stride;
  float* dst = out.data + blockIdx.x * out.row_stride;
  const float inv_rms = row_inv_rms(src, in.n_cols, eps);
  // Loads of a batch before its stores: in place (dst = src) each thread rewrites only what it
  // read.
  int64_t i = threadIdx.x;
  for (; i + (kRowUnroll - 1) * int64_t{blockDim.x} < in.n_cols;
       i += kRowUnroll * int64_t{blockDim.x}) {
    float v[kRowUnroll], w[kRowUnroll];
#pragma unroll
    for (int k = 0; k < kRowUnroll; ++k) {
      v[k] = src[i + k * blockDim.x];
      w[k] = weight ? weight[i + k * blockDim.x] : 1.0f;
    }
#pragma unroll
    for (int k = 0; k < kRowUnroll; ++k) dst[i + k * blockDim.x] = v[k] * inv_rms * w[k];
  }
  for (; i < in.n_cols; i += blockDim.x) dst[i] = src[i] * inv_rms * (weight ? weight[i] : 1.0f);
}

}  // namespace

void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y) {
  const auto [in, out, w] = rms_norm_operands(x, weight, y);
  if (in.n_rows == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(in.n_rows), row_threads(in.n_cols), 0, op_stream()>>>(
      in, out, w, eps);
  check_launch();
}

}  // namespace dsv4::kernels::cuda
