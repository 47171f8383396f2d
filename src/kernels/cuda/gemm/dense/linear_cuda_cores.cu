// The dense linear on the CUDA cores, y[T, N] = x[T, K] · w[N, K]ᵀ in f32 with an f32 or bf16
// weight, for the calls plan.cpp gives them (every call the tensor cores do not take: f32
// weights, few rows, unaligned rows). Two kernels:
// - a classic shared-memory tiled SGEMM for many rows and wide outputs: both operands are
//   K-contiguous rows, so a block stages a [64, 16] slab of each, transposed into shared memory,
//   and every thread accumulates a 4×4 patch of y over K in order;
// - a few-rows kernel for one-token decode steps, f32 weights and narrow outputs (mHC's 24
//   mixes of a 16384-wide residual, a router), where 64×64 tiles leave most SMs idle while one
//   block walks all of K (measured on the H200: 29 µs a call on the tiny test model's decode
//   step, most of its time).
//   A block owns a few outputs for ≤ 8 tokens and its warps split K (or each walks all of K
//   for its own outputs); partial sums meet in a fixed tree. On the H200 it streams the bf16
//   lm_head at one token at the copy rate (bench/kernels/linear_bench.cu, docs/bench.md).
// Their operands' views (f32, bf16 or e4m3 weights, all widened to the same f32) are in
// cuda_core_rows.cuh; linear_narrow.cu takes the few-rows kernel's many-row calls.
//
// Dimension letters: T tokens (rows of x), N output features (rows of w), K input features.
#include "kernels/contracts.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/gemm/dense/config.h"
#include "kernels/cuda/gemm/dense/cuda_core_rows.cuh"
#include "kernels/cuda/gemm/dense/kernels.h"

namespace dsv4::kernels::cuda {
namespace {

using namespace cuda_core_rows;

constexpr int kTile = kTiledTile;  // rows of x and of w per block
constexpr int kSlab = 16;          // K per shared-memory stage
constexpr int kPatch = 4;          // each thread's outputs per dimension
constexpr int kThreads = (kTile / kPatch) * (kTile / kPatch);  // 256
static_assert(kTile * kSlab == kThreads * 4, "each thread stages 4 values of each operand");

// Stages rows [row0, row0 + kTile) × cols [k0, k0 + kSlab) of m, transposed to smem[k][row],
// zero outside the matrix.
template <typename M>
__device__ void stage_slab(const M& m, int64_t row0, int64_t k0, float (&smem)[kSlab][kTile + 1]) {
  for (int i = threadIdx.x; i < kTile * kSlab; i += kThreads) {
    const int r = i / kSlab, k = i % kSlab;
    const int64_t row = row0 + r, col = k0 + k;
    smem[k][r] = row < m.n_rows && col < m.n_cols ? at(m.row(row), col) : 0.0f;
  }
}

template <typename W>
__global__ void __launch_bounds__(kThreads) linear_kernel(Rows<float> x, W w, RowMatrix y) {
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
constexpr int kChunk = kFewRowsChunk;  // most tokens of one block

// Block (x, y) computes tokens [kTokens·y, +kTokens) of kBlockWarps / kSplit groups of kCols
// outputs. kTokens is the call's T rounded up to 1, 4 or 8: every token costs each weight a
// multiply-add, so a one-token step must not pay for eight (at 8 a decode step was issue-bound,
// 1.2 TB/s; at 1 the lm_head streams at the copy rate, docs/bench.md). The kSplit warps of a
// group split K into equal slices (one warp walks all of K when the outputs alone fill the
// GPU), each lane sums every 32nd element (kVectors: every 32nd run of 4, one 16- or 8-byte
// load) of its slice in order, then the lanes meet by a shuffle tree and the group's warps in
// shared memory, in warp order. The order depends on K, N and whether the rows allow vector
// loads, never on T. Rows past the matrices read their last row and are never stored.
// Block-diagonal (block_diagonal_linear): output n reads x's columns from (n / group_rows)·K on
// (x.n_cols is one group's K); a plain linear is one group of N. A warp's outputs share a group.
template <int kCols, int kSplit, int kBlockWarps, int kTokens, bool kVectors, typename W>
__global__ void __launch_bounds__(32 * kBlockWarps)
    linear_few_rows_kernel(Rows<float> x, W w, RowMatrix y, int64_t group_rows) {
  constexpr int kGroups = kBlockWarps / kSplit;
  constexpr int kStep = kVectors ? kVec : 1;
  __shared__ float partial[kBlockWarps][kCols][kTokens];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n0 = (blockIdx.x * int64_t{kGroups} + warp / kSplit) * kCols;
  const int64_t t0 = blockIdx.y * int64_t{kTokens};
  const int64_t units = x.n_cols / kStep, part = warp % kSplit;
  const int64_t u_begin = part * units / kSplit, u_end = (part + 1) * units / kSplit;
  typename W::Row w_rows[kCols];
  const float* x_rows[kTokens];
#pragma unroll
  for (int c = 0; c < kCols; ++c) w_rows[c] = w.row(min(n0 + c, w.n_rows - 1));
  const int64_t x_col0 = min(n0, w.n_rows - 1) / group_rows * x.n_cols;
#pragma unroll
  for (int t = 0; t < kTokens; ++t) x_rows[t] = x.row(min(t0 + t, x.n_rows - 1)) + x_col0;
  float acc[kCols][kTokens] = {};
#pragma unroll 2
  for (int64_t u = u_begin + lane; u < u_end; u += 32) {
    if constexpr (kVectors) {
      float4 wk[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) wk[c] = load4(w_rows[c], u * kVec);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        const float4 xk = load4(x_rows[t], u * kVec);
#pragma unroll
        for (int c = 0; c < kCols; ++c) acc[c][t] = fma4(wk[c], xk, acc[c][t]);
      }
    } else {
      float wk[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) wk[c] = at(w_rows[c], u);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        const float xk = __ldg(x_rows[t] + u);
#pragma unroll
        for (int c = 0; c < kCols; ++c) acc[c][t] = fmaf(wk[c], xk, acc[c][t]);
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const float sum = warp_reduce(acc[c][t], SumOp{});
      if (lane == 0) partial[warp][c][t] = sum;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kGroups * kCols * kTokens; i += 32 * kBlockWarps) {
    const int group = i / (kCols * kTokens), c = i / kTokens % kCols, t = i % kTokens;
    const int64_t n = (blockIdx.x * int64_t{kGroups} + group) * kCols + c;
    if (n >= y.n_cols || t0 + t >= y.n_rows) continue;
    float sum = partial[group * kSplit][c][t];
    for (int v = 1; v < kSplit; ++v) sum += partial[group * kSplit + v][c][t];
    y.data[(t0 + t) * y.row_stride + n] = sum;
  }
}

template <int kCols, int kSplit, int kBlockWarps, int kTokens, typename W>
void launch_few_rows_as(const Rows<float>& x, const W& w, const RowMatrix& y, int64_t group_rows) {
  const dim3 grid(static_cast<unsigned>(ceil_div(w.n_rows, kBlockWarps / kSplit * kCols)),
                  static_cast<unsigned>(ceil_div(x.n_rows, kTokens)));
  if (vector_rows(x) && vector_rows(w)) {
    linear_few_rows_kernel<kCols, kSplit, kBlockWarps, kTokens, true>
        <<<grid, 32 * kBlockWarps, 0, op_stream()>>>(x, w, y, group_rows);
  } else {
    linear_few_rows_kernel<kCols, kSplit, kBlockWarps, kTokens, false>
        <<<grid, 32 * kBlockWarps, 0, op_stream()>>>(x, w, y, group_rows);
  }
}

template <int kCols, int kSplit, int kBlockWarps, typename W>
void launch_few_rows_as(const Rows<float>& x, const W& w, const RowMatrix& y, int64_t group_rows,
                        int tokens) {
  if (tokens == 1) return launch_few_rows_as<kCols, kSplit, kBlockWarps, 1>(x, w, y, group_rows);
  if (tokens == 4) return launch_few_rows_as<kCols, kSplit, kBlockWarps, 4>(x, w, y, group_rows);
  launch_few_rows_as<kCols, kSplit, kBlockWarps, kChunk>(x, w, y, group_rows);
}

// The plan's shape (plan.cpp: outputs, warps splitting K and warps a block, by N) as template
// constants.
template <typename W>
void launch_few_rows(const Rows<float>& x, const W& w, const RowMatrix& y, int64_t group_rows,
                     const DensePlan& plan) {
  const int shape = plan.cols * 10000 + plan.split * 100 + plan.warps;
  switch (shape) {
    case 40108:
      return launch_few_rows_as<4, 1, 8>(x, w, y, group_rows, plan.tokens);
    case 40808:
      return launch_few_rows_as<4, 8, 8>(x, w, y, group_rows, plan.tokens);
    case 10808:
      return launch_few_rows_as<1, 8, 8>(x, w, y, group_rows, plan.tokens);
    case 11616:
      return launch_few_rows_as<1, 16, 16>(x, w, y, group_rows, plan.tokens);
    default:
      DSV4_CHECK(false, "linear: no few-rows kernel of %d outputs × %d warps in %d", plan.cols,
                 plan.split, plan.warps);
  }
}

// The tiled kernel group by group (x.n_cols is one group's K).
// Group g's weight rows [g·group_rows, +group_rows).
template <typename T>
Rows<T> group_of(Rows<T> w, int64_t g, int64_t group_rows) {
  w.data += g * group_rows * w.row_stride;
  w.n_rows = group_rows;
  return w;
}
Fp8Rows group_of(Fp8Rows w, int64_t g, int64_t group_rows) {
  w.data += g * group_rows * w.row_stride;
  w.first_row += g * group_rows;
  w.n_rows = group_rows;
  return w;
}

template <typename W>
void launch_tiled(const Rows<float>& x, const W& w, const RowMatrix& y, int64_t n_groups) {
  const int64_t group_rows = w.n_rows / n_groups;
  const dim3 grid(static_cast<unsigned>(ceil_div(group_rows, kTile)),
                  static_cast<unsigned>(ceil_div(x.n_rows, kTile)));
  for (int64_t g = 0; g < n_groups; ++g) {
    Rows<float> x_group = x;
    x_group.data += g * x.n_cols;
    const W w_group = group_of(w, g, group_rows);
    RowMatrix y_group = y;
    y_group.data += g * group_rows;
    y_group.n_cols = group_rows;
    linear_kernel<<<grid, kThreads, 0, op_stream()>>>(x_group, w_group, y_group);
  }
}

template <typename W>
void launch(const Rows<float>& x, const W& w, const RowMatrix& y, int64_t n_groups,
            const DensePlan& plan) {
  if (plan.kernel == DenseKernel::kTiled) return launch_tiled(x, w, y, n_groups);
  launch_few_rows(x, w, y, w.n_rows / n_groups, plan);
}

}  // namespace

void linear_cuda_cores(const LinearOperands& o, int64_t n_groups, const DensePlan& plan) {
  DSV4_CHECK(ceil_div(o.x.n_rows, kTile) <= 65535, "linear: %lld rows in one call",
             (long long)o.x.n_rows);
  with_rows(o, [&](const auto& x, const auto& w) { launch(x, w, o.y, n_groups, plan); });
  check_launch();
}

}  // namespace dsv4::kernels::cuda
