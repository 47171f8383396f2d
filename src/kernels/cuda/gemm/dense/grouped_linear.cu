// The dense experts' grouped GEMM (cuda::grouped_linear, ops/moe_dispatch.cu): y[r, :] =
// x[r, :] · w[g]ᵀ for the rows r of group g, one warp per output element (f32 dot products:
// correct and simple, for the dense-expert test models; NVFP4 experts go through the NVFP4
// family's grouped kernels).
//
// Dimension letters: R grouped rows, K input features, N output features, G groups.
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/gemm/dense/kernels.h"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// Block (r, tile): warp w computes y[r, tile·8 + w] with the matrix of r's group.
__global__ void grouped_linear_kernel(RowMatrix x, const float* w, const int32_t* offsets,
                                      int64_t n_groups, int64_t n, RowMatrix y) {
  const int64_t r = blockIdx.x;
  const int64_t col = blockIdx.y * int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  // The group of row r: the last g with offsets[g] <= r (empty groups share an offset).
  int64_t lo = 0, hi = n_groups;  // invariant: offsets[lo] <= r < offsets[hi]
  if (offsets[0] != 0 || offsets[n_groups] != x.n_rows) __trap();  // a bug in the caller
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (offsets[mid] <= r ? lo : hi) = mid;
  }
  if (col >= n) return;
  const float* a = x.data + r * x.row_stride;
  const float* b = w + (lo * n + col) * x.n_cols;
  float dot = 0.0f;
  for (int64_t i = threadIdx.x % 32; i < x.n_cols; i += 32) dot += a[i] * b[i];
  dot = warp_reduce(dot, SumOp{});
  if (threadIdx.x % 32 == 0) y.data[r * y.row_stride + col] = dot;
}

}  // namespace

void launch_grouped_linear(const RowMatrix& x, const float* w, const int32_t* offsets,
                           int64_t n_groups, const RowMatrix& y) {
  if (x.n_rows == 0 || y.n_cols == 0) return;
  const dim3 grid(static_cast<unsigned>(x.n_rows),
                  static_cast<unsigned>(ceil_div(y.n_cols, kWarpsPerBlock)));
  grouped_linear_kernel<<<grid, kWarpsPerBlock * 32, 0, op_stream()>>>(x, w, offsets, n_groups,
                                                                      y.n_cols, y);
  check_launch();
}

}  // namespace dsv4::kernels::cuda
