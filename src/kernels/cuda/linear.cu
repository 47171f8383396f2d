// cuda::linear: y[T, N] = x[T, K] · w[N, K]ᵀ in f32, by one of two kernels:
// - a classic shared-memory tiled SGEMM for many rows and wide outputs: both operands are
//   K-contiguous rows, so a block stages a [64, 16] slab of each, transposed into shared memory,
//   and every thread accumulates a 4×4 patch of y over K in order;
// - a few-rows kernel for decode steps and narrow outputs (mHC's 24 mixes of a 16384-wide
//   residual, a router), where 64×64 tiles leave most SMs idle while one block walks all of K
//   (measured on the H200: 29 µs a call on the tiny test model's decode step, most of its time).
//   A block owns a few outputs for ≤ 8 tokens and its warps split K; partial sums meet in a
//   fixed tree.
// No TF32 and no float atomics: the forward must match transformers' fp32 reference to 1e-4 per
// row (TF32's 10-bit mantissa alone costs ~1e-3), and a fixed order per output makes the result
// deterministic. (cuBLAS would be faster, but this toolkit ships only its shared libraries, and
// every dsv4 binary links the kernels statically so that it runs on the device machine as built.)
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

// ---- few rows ----
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 8;  // tokens of one block

// Block (x, y) computes outputs [kCols·x, +kCols) of tokens [8·y, +8): warp w sums the K slice
// [w·K/8, (w+1)·K/8), each lane every 32nd element of it (coalesced rows of w and x), then the
// lanes meet by a shuffle tree and the warps in shared memory, in warp order. Rows past the
// matrices read their last row and are never stored.
template <int kCols>
__global__ void __launch_bounds__(kThreads) linear_few_rows_kernel(RowMatrix x, RowMatrix w,
                                                                   RowMatrix y) {
  __shared__ float partial[kWarps][kCols][kChunk];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n0 = blockIdx.x * int64_t{kCols}, t0 = blockIdx.y * int64_t{kChunk};
  const int64_t k_begin = warp * x.n_cols / kWarps, k_end = (warp + 1) * x.n_cols / kWarps;
  const float* w_rows[kCols];
  const float* x_rows[kChunk];
#pragma unroll
  for (int c = 0; c < kCols; ++c) w_rows[c] = w.data + min(n0 + c, w.n_rows - 1) * w.row_stride;
#pragma unroll
  for (int t = 0; t < kChunk; ++t) x_rows[t] = x.data + min(t0 + t, x.n_rows - 1) * x.row_stride;
  float acc[kCols][kChunk] = {};
#pragma unroll 4
  for (int64_t k = k_begin + lane; k < k_end; k += 32) {
    float wk[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) wk[c] = __ldg(w_rows[c] + k);
#pragma unroll
    for (int t = 0; t < kChunk; ++t) {
      const float xk = __ldg(x_rows[t] + k);
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[c][t] = fmaf(wk[c], xk, acc[c][t]);
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
#pragma unroll
    for (int t = 0; t < kChunk; ++t) {
      const float sum = warp_reduce(acc[c][t], SumOp{});
      if (lane == 0) partial[warp][c][t] = sum;
    }
  }
  __syncthreads();
  if (threadIdx.x >= kCols * kChunk) return;
  const int c = threadIdx.x / kChunk, t = threadIdx.x % kChunk;
  if (n0 + c >= y.n_cols || t0 + t >= y.n_rows) return;
  float sum = partial[0][c][t];
  for (int v = 1; v < kWarps; ++v) sum += partial[v][c][t];
  y.data[(t0 + t) * y.row_stride + n0 + c] = sum;
}

// Four outputs a block where there are enough of them to fill the GPU, else one.
void launch_few_rows(const RowMatrix& x, const RowMatrix& w, const RowMatrix& y) {
  const auto chunks = static_cast<unsigned>(ceil_div(x.n_rows, kChunk));
  if (w.n_rows >= 1024) {
    linear_few_rows_kernel<4><<<dim3(static_cast<unsigned>(ceil_div(w.n_rows, 4)), chunks),
                                kThreads, 0, op_stream()>>>(x, w, y);
  } else {
    linear_few_rows_kernel<1><<<dim3(static_cast<unsigned>(w.n_rows), chunks), kThreads, 0,
                                op_stream()>>>(x, w, y);
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
  // The tiled kernel where it has rows to share a tile and blocks for every SM (132 on the
  // H200), else the few-rows one (then T < 64 · 128, so its grid's y stays small).
  if (a.n_rows > 2 * kChunk && grid.x * grid.y >= 128) {
    linear_kernel<<<grid, kThreads, 0, op_stream()>>>(a, b, c);
  } else {
    launch_few_rows(a, b, c);
  }
  check_launch();
}

}  // namespace dsv4::kernels::cuda
