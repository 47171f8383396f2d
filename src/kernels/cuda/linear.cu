// cuda::linear: y[T, N] = x[T, K] · w[N, K]ᵀ in f32, a classic shared-memory tiled SGEMM. Both
// operands are K-contiguous rows, so a block stages a [64, 16] slab of each, transposed into
// shared memory, and every thread accumulates a 4×4 patch of y over K in order. No TF32 and no
// split-K: the forward must match transformers' fp32 reference to 1e-4 per row (TF32's 10-bit
// mantissa alone costs ~1e-3), and a fixed order per output makes the result deterministic.
// (cuBLAS would be faster, but this toolkit ships only its shared libraries, and every dsv4
// binary links the kernels statically so that it runs on the device machine as built.)
//
// Dimension letters: T tokens (rows of x), N output features (rows of w), K input features.
#include "kernels/contracts.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kTile = 64;  // rows of x and of w per block
constexpr int kSlab = 16;  // K per shared-memory stage
constexpr int kPatch = 4;  // each thread's outputs per dimension
constexpr int kThreads = (kTile / kPatch) * (kTile / kPatch);  // 256
static_assert(kTile * kSlab == kThreads * 4, "each thread stages 4 values of each operand");

// Stages rows [row0, row0 + kTile) × cols [k0, k0 + kSlab) of m, transposed to smem[k][row],
// zero outside the matrix.
__device__ void stage_slab(const RowMatrix& m, int64_t row0, int64_t k0,
                           float (&smem)[kSlab][kTile + 1]) {
  for (int i = threadIdx.x; i < kTile * kSlab; i += kThreads) {
    const int r = i / kSlab, k = i % kSlab;
    const int64_t row = row0 + r, col = k0 + k;
    smem[k][r] = row < m.n_rows && col < m.n_cols ? m.data[row * m.row_stride + col] : 0.0f;
  }
}

__global__ void __launch_bounds__(kThreads) linear_kernel(RowMatrix x, RowMatrix w, RowMatrix y) {
  __shared__ float smem_x[kSlab][kTile + 1];
  __shared__ float smem_w[kSlab][kTile + 1];
  const int64_t row0 = blockIdx.y * int64_t{kTile}, col0 = blockIdx.x * int64_t{kTile};
  const int tr = threadIdx.x / (kTile / kPatch), tc = threadIdx.x % (kTile / kPatch);
  float acc[kPatch][kPatch] = {};
  for (int64_t k0 = 0; k0 < x.n_cols; k0 += kSlab) {
    stage_slab(x, row0, k0, smem_x);
    stage_slab(w, col0, k0, smem_w);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kSlab; ++k) {
      float a[kPatch], b[kPatch];
#pragma unroll
      for (int i = 0; i < kPatch; ++i) {
        a[i] = smem_x[k][tr + i * (kTile / kPatch)];
        b[i] = smem_w[k][tc + i * (kTile / kPatch)];
      }
#pragma unroll
      for (int i = 0; i < kPatch; ++i) {
#pragma unroll
        for (int j = 0; j < kPatch; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPatch; ++i) {
    const int64_t row = row0 + tr + i * (kTile / kPatch);
#pragma unroll
    for (int j = 0; j < kPatch; ++j) {
      const int64_t col = col0 + tc + j * (kTile / kPatch);
      if (row < y.n_rows && col < y.n_cols) y.data[row * y.row_stride + col] = acc[i][j];
    }
  }
}

}  // namespace

void linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  const auto [a, b, c] = linear_operands(x, w, y);
  if (a.n_rows == 0 || b.n_rows == 0) return;
  DSV4_CHECK(ceil_div(a.n_rows, kTile) <= 65535, "linear: %lld rows in one call",
             (long long)a.n_rows);
  const dim3 grid(static_cast<unsigned>(ceil_div(b.n_rows, kTile)),
                  static_cast<unsigned>(ceil_div(a.n_rows, kTile)));
  linear_kernel<<<grid, kThreads, 0, op_stream()>>>(a, b, c);
  check_launch();
}

}  // namespace dsv4::kernels::cuda
