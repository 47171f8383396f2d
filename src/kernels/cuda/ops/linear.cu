// cuda::linear: y[T, N] = x[T, K] · w[N, K]ᵀ in f32 (and block_diagonal_linear, G such products
// side by side in one call). A bf16 weight runs on the tensor cores with many rows of x
// (linear_tensor_cores.cu) and with 2-16 (linear_few_rows_tensor_cores.cu), both exact to f32 by
// a three-way bf16 split of x; the rest by one of two CUDA-core kernels:
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
// The weight is f32 or bf16 (a device keeps a bf16 checkpoint's linear weights in bf16, half the
// bytes a decode step streams: checkpoint/to_device.h); it widens exactly, so on the CUDA-core
// kernels either gives the same bits. Not batch-invariant across the four kernels: a row's sum
// order depends on which one the call's shape picks (each alone is: a few-rows block treats its
// ≤ 8 tokens alike, a tensor-core tile its 128).
// No TF32 and no float atomics: the forward must match transformers' fp32 reference to 1e-4 per
// row (TF32's 10-bit mantissa alone costs ~1e-3), and a fixed order per output makes the result
// deterministic. (cuBLAS would be faster, but this toolkit ships only its shared libraries, and
// every dsv4 binary links the kernels statically so that it runs on the device machine as built.)
//
// Dimension letters: T tokens (rows of x), N output features (rows of w), K input features.
#include "base/float_convert.h"
#include "kernels/contracts.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm/dense/linear_tensor_cores.h"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kTile = 64;  // rows of x and of w per block
constexpr int kSlab = 16;  // K per shared-memory stage
constexpr int kPatch = 4;  // each thread's outputs per dimension
constexpr int kThreads = (kTile / kPatch) * (kTile / kPatch);  // 256
static_assert(kTile * kSlab == kThreads * 4, "each thread stages 4 values of each operand");

// Read-only rows of f32 or of bf16 bits (a weight, contracts.h's WeightRows), widened to f32.
template <typename T>
struct Rows {
  const T* data;
  int64_t n_rows, n_cols, row_stride;
  __device__ const T* row(int64_t r) const { return data + r * row_stride; }
};
__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(uint16_t v) { return bf16_to_float(v); }

Rows<float> rows_of(const RowMatrix& m) { return {m.data, m.n_rows, m.n_cols, m.row_stride}; }
template <typename T>
Rows<T> rows_of(const WeightRows& w) {
  return {static_cast<const T*>(w.data), w.n_rows, w.n_cols, w.row_stride};
}

// Stages rows [row0, row0 + kTile) × cols [k0, k0 + kSlab) of m, transposed to smem[k][row],
// zero outside the matrix.
template <typename T>
__device__ void stage_slab(const Rows<T>& m, int64_t row0, int64_t k0,
                           float (&smem)[kSlab][kTile + 1]) {
  for (int i = threadIdx.x; i < kTile * kSlab; i += kThreads) {
    const int r = i / kSlab, k = i % kSlab;
    const int64_t row = row0 + r, col = k0 + k;
    smem[k][r] = row < m.n_rows && col < m.n_cols ? widen(m.row(row)[col]) : 0.0f;
  }
}

template <typename W>
__global__ void __launch_bounds__(kThreads) linear_kernel(Rows<float> x, Rows<W> w, RowMatrix y) {
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
constexpr int kChunk = 8;  // most tokens of one block
constexpr int kVec = 4;    // K elements a lane loads at once: 16 bytes of f32, 8 of bf16

__device__ __forceinline__ float4 load4(const float* p) {
  return __ldg(reinterpret_cast<const float4*>(p));
}
__device__ __forceinline__ float4 load4(const uint16_t* p) {
  const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));  // bf16 is a float's upper half
  return make_float4(float_from_bits(v.x << 16), float_from_bits(v.x & 0xffff0000u),
                     float_from_bits(v.y << 16), float_from_bits(v.y & 0xffff0000u));
}

// Block (x, y) computes tokens [kTokens·y, +kTokens) of kBlockWarps / kSplit groups of kCols
// outputs. kTokens is the call's T rounded up to 1, 4 or 8: every token costs each weight a
// multiply-add, so a one-token step must not pay for eight (paying for 8, a step is issue-bound,
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
    linear_few_rows_kernel(Rows<float> x, Rows<W> w, RowMatrix y, int64_t group_rows) {
  constexpr int kGroups = kBlockWarps / kSplit;
  constexpr int kStep = kVectors ? kVec : 1;
  __shared__ float partial[kBlockWarps][kCols][kTokens];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n0 = (blockIdx.x * int64_t{kGroups} + warp / kSplit) * kCols;
  const int64_t t0 = blockIdx.y * int64_t{kTokens};
  const int64_t units = x.n_cols / kStep, part = warp % kSplit;
  const int64_t u_begin = part * units / kSplit, u_end = (part + 1) * units / kSplit;
  const W* w_rows[kCols];
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
      for (int c = 0; c < kCols; ++c) wk[c] = load4(w_rows[c] + u * kVec);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        const float4 xk = load4(x_rows[t] + u * kVec);
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          acc[c][t] = fmaf(wk[c].x, xk.x, acc[c][t]);
          acc[c][t] = fmaf(wk[c].y, xk.y, acc[c][t]);
          acc[c][t] = fmaf(wk[c].z, xk.z, acc[c][t]);
          acc[c][t] = fmaf(wk[c].w, xk.w, acc[c][t]);
        }
      }
    } else {
      float wk[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) wk[c] = widen(__ldg(w_rows[c] + u));
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

// Rows a 16-byte (f32) or 8-byte (bf16) load may read kVec elements of at a time.
template <typename T>
bool vector_rows(const Rows<T>& m) {
  return m.n_cols % kVec == 0 && m.row_stride % kVec == 0 &&
         reinterpret_cast<uintptr_t>(m.data) % (kVec * sizeof(T)) == 0;
}

template <int kCols, int kSplit, int kBlockWarps, int kTokens, typename W>
void launch_few_rows_as(const Rows<float>& x, const Rows<W>& w, const RowMatrix& y,
                        int64_t group_rows) {
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
void launch_few_rows_as(const Rows<float>& x, const Rows<W>& w, const RowMatrix& y,
                        int64_t group_rows) {
  if (x.n_rows == 1) return launch_few_rows_as<kCols, kSplit, kBlockWarps, 1>(x, w, y, group_rows);
  if (x.n_rows <= 4) return launch_few_rows_as<kCols, kSplit, kBlockWarps, 4>(x, w, y, group_rows);
  launch_few_rows_as<kCols, kSplit, kBlockWarps, kChunk>(x, w, y, group_rows);
}

// By the number of outputs N: with 8192 and more, a warp walks all of K for 4 of them; from
// 1024 eight warps split K for 4, from 128 for 1; below, 16 warps split K for one (mHC's 24
// mixes of a 16384-wide residual). Four outputs a warp need groups of a multiple of 4.
// Measured on the H200: linear_bench, docs/bench.md.
template <typename W>
void launch_few_rows(const Rows<float>& x, const Rows<W>& w, const RowMatrix& y,
                     int64_t group_rows) {
  const bool fours = group_rows % 4 == 0;
  if (w.n_rows >= 8192 && fours) return launch_few_rows_as<4, 1, 8>(x, w, y, group_rows);
  if (w.n_rows >= 1024 && fours) return launch_few_rows_as<4, 8, 8>(x, w, y, group_rows);
  if (w.n_rows >= 128) return launch_few_rows_as<1, 8, 8>(x, w, y, group_rows);
  launch_few_rows_as<1, 16, 16>(x, w, y, group_rows);
}

// The tiled kernel where it has rows to share a tile and blocks for every SM (132 on the H200),
// else the few-rows one (then T < 64 · 128, so its grid's y stays small). x.n_cols is one
// group's K; the tiled kernel runs group by group.
template <typename W>
void launch(const Rows<float>& x, const Rows<W>& w, const RowMatrix& y, int64_t n_groups) {
  const int64_t group_rows = w.n_rows / n_groups;
  const dim3 grid(static_cast<unsigned>(ceil_div(group_rows, kTile)),
                  static_cast<unsigned>(ceil_div(x.n_rows, kTile)));
  if (x.n_rows <= 2 * kChunk || grid.x * grid.y < 128) {
    return launch_few_rows(x, w, y, group_rows);
  }
  for (int64_t g = 0; g < n_groups; ++g) {
    Rows<float> x_group = x;
    x_group.data += g * x.n_cols;
    Rows<W> w_group = w;
    w_group.data += g * group_rows * w.row_stride;
    w_group.n_rows = group_rows;
    RowMatrix y_group = y;
    y_group.data += g * group_rows;
    y_group.n_cols = group_rows;
    linear_kernel<<<grid, kThreads, 0, op_stream()>>>(x_group, w_group, y_group);
  }
}

void run(const LinearOperands& o, int64_t n_groups) {
  if (o.x.n_rows == 0 || o.w.n_rows == 0) return;
  if (linear_tensor_cores_fit(o, n_groups)) return linear_tensor_cores(o, n_groups);
  if (linear_few_rows_tensor_cores_fit(o, n_groups)) {
    return linear_few_rows_tensor_cores(o, n_groups);
  }
  DSV4_CHECK(ceil_div(o.x.n_rows, kTile) <= 65535, "linear: %lld rows in one call",
             (long long)o.x.n_rows);
  if (o.w.dtype == DType::kBF16) {
    launch(rows_of(o.x), rows_of<uint16_t>(o.w), o.y, n_groups);
  } else {
    launch(rows_of(o.x), rows_of<float>(o.w), o.y, n_groups);
  }
  check_launch();
}

}  // namespace

void linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  run(linear_operands(x, w, y), 1);
}

void block_diagonal_linear(const TensorView& x, const TensorView& w, int64_t n_groups,
                           const TensorView& y) {
  run(block_diagonal_operands(x, w, n_groups, y), n_groups);
}

}  // namespace dsv4::kernels::cuda
