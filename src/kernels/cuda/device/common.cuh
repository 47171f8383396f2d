// Helpers the small CUDA ops share (device code; included only by .cu files): grid sizing,
// block-wide reductions with a fixed tree (so a result never depends on timing: determinism
// without atomics), and the device view of an f32 operand as rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cpu/row_matrix.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace dsv4::kernels::cuda {

// Threads of a row-per-block kernel: a multiple of 32, at most 32 warps (block_reduce).
inline constexpr int kRowThreads = 256;
// Threads of an element-per-thread kernel.
inline constexpr int kElementThreads = 256;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for n elements at kElementThreads each (at least one, so a launch is always valid).
inline unsigned element_blocks(int64_t n) {
  return static_cast<unsigned>(n > 0 ? ceil_div(n, kElementThreads) : 1);
}

// The same contract checks as the CPU reference (kernels/cpu/row_matrix.h), then a plain struct
// that kernels take by value: row r starts at data + r * row_stride.
using cpu::as_rows;
using cpu::RowMatrix;

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op>
__device__ T warp_reduce(T value, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// The reduction of every thread's value over the block, returned to all threads. blockDim.x is
// a multiple of 32 and at most 1024. The tree is fixed by the thread layout, so the same inputs
// give the same bits on every run.
template <typename T, typename Op>
__device__ T block_reduce(T value, Op op) {
  __shared__ T smem_partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  value = warp_reduce(value, op);
  __syncthreads();  // smem_partial may still be read by a previous call
  if (lane == 0) smem_partial[warp] = value;
  __syncthreads();
  T total = smem_partial[0];
  for (int w = 1; w < n_warps; ++w) total = op(total, smem_partial[w]);
  return total;
}

// Loads per thread in flight in a row kernel's passes. One block streams a whole row, and a
// plain strided loop waits one load latency per element a thread: a 16384-wide row (the
// hyper-connection streams at one token) takes 34 µs that way (ncu, H200).
inline constexpr int kRowUnroll = 8;

// 1 / sqrt(mean(row²) + eps) of a row of n, the same in every thread of the block (one block a
// row). The sum of squares is accumulated in double, as the CPU reference does.
__device__ inline float row_inv_rms(const float* row, int64_t n, float eps) {
  double sum_sq = 0.0;
  int64_t i = threadIdx.x;
  for (; i + (kRowUnroll - 1) * int64_t{blockDim.x} < n; i += kRowUnroll * int64_t{blockDim.x}) {
    float v[kRowUnroll];
#pragma unroll
    for (int k = 0; k < kRowUnroll; ++k) v[k] = row[i + k * blockDim.x];
#pragma unroll
    for (int k = 0; k < kRowUnroll; ++k) sum_sq += static_cast<double>(v[k]) * v[k];
  }
  for (; i < n; i += blockDim.x) sum_sq += static_cast<double>(row[i]) * row[i];
  sum_sq = block_reduce(sum_sq, SumOp{});
  return 1.0f / sqrtf(static_cast<float>(sum_sq / n) + eps);
}

// The current device's SM count, for persistent grids (read once: one device per process, the
// EP ranks being processes).
inline int sm_count() {
  static const int count = [] {
    int device = 0, n = 0;
    DSV4_CUDA_CHECK(cudaGetDevice(&device));
    DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  }();
  return count;
}

// Checks the launch that was just made (configuration errors surface here, faults later).
inline void check_launch() { DSV4_CUDA_CHECK(cudaGetLastError()); }

}  // namespace dsv4::kernels::cuda
