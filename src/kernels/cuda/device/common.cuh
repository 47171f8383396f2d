// Helpers the small CUDA ops share (device code; included only by .cu files): grid sizing,
// block-wide reductions with a fixed tree (so a result never depends on timing: determinism
// without atomics), and the device view of an f32 operand as rows
// (kernels/row_matrix.h: the same contract checks as the CPU reference, then a plain struct that
// kernels take by value, row r at data + r * row_stride).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/contracts.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"
#include "kernels/row_matrix.h"

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

// rms_norm's sum of squares in its lane order (ops.h, kRmsNormLanes), the CPU's bits: a thread
// holds a run of neighbouring lanes, a warp 32 runs, a block its warps, a cluster its blocks,
// and each level adds its parts pairwise, neighbours first, as the CPU's tree does.

// The pairwise sum of v[0, kCount), kCount a power of two: neighbours first.
template <int kCount>
__device__ __forceinline__ double pairwise_sum(double (&v)[kCount]) {
  static_assert((kCount & (kCount - 1)) == 0, "a power of two");
#pragma unroll
  for (int stride = 1; stride < kCount; stride *= 2) {
#pragma unroll
    for (int j = 0; j < kCount; j += 2 * stride) v[j] += v[j + stride];
  }
  return v[0];
}

// The sum of squares of lanes [first_lane, first_lane + kLanes) of a row of n. Each lane adds its
// elements in turn; kRowUnroll passes' loads go out before their additions.
template <int kLanes>
__device__ double lanes_sum_of_squares(const float* row, int64_t n, int64_t first_lane) {
  constexpr int64_t kStep = kRmsNormLanes;
  double lanes[kLanes] = {};
  int64_t i = first_lane;
  for (; i + (kRowUnroll - 1) * kStep + kLanes <= n; i += kRowUnroll * kStep) {
    float v[kRowUnroll][kLanes];
#pragma unroll
    for (int k = 0; k < kRowUnroll; ++k) {
#pragma unroll
      for (int l = 0; l < kLanes; ++l) v[k][l] = row[i + k * kStep + l];
    }
#pragma unroll
    for (int k = 0; k < kRowUnroll; ++k) {
#pragma unroll
      for (int l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(v[k][l]) * v[k][l];
    }
  }
  for (; i < n; i += kStep) {
#pragma unroll
    for (int l = 0; l < kLanes; ++l) {
      if (i + l < n) lanes[l] += static_cast<double>(row[i + l]) * row[i + l];
    }
  }
  return pairwise_sum(lanes);
}

// The warp's 32 values added pairwise, neighbours first (lane i and i ^ offset add the same two
// values, so every lane ends with the same bits).
__device__ __forceinline__ double warp_pairwise_sum(double v) {
  for (int offset = 1; offset < 32; offset *= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// A block of kThreads (a multiple of 32, at most 1024) adds its threads' values pairwise, in
// thread order; every thread gets the sum. A later call's first barrier protects `partial`.
template <int kThreads>
__device__ double block_pairwise_sum(double v) {
  constexpr int kWarps = kThreads / 32;
  __shared__ double partial[kWarps];
  v = warp_pairwise_sum(v);
  __syncthreads();  // a previous call's reads of `partial` are done
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  double warps[kWarps];
#pragma unroll
  for (int w = 0; w < kWarps; ++w) warps[w] = partial[w];
  return pairwise_sum(warps);
}

// 1 / sqrt(mean(row²) + eps) as rms_norm computes it, from the float64 sum of squares.
__device__ __forceinline__ float inv_rms_of(double sum_sq, int64_t n, float eps) {
  return 1.0f / sqrtf(static_cast<float>(sum_sq / n) + eps);
}

// The inverse RMS of a row of n, one block of kThreads a row, the same in every thread. Its
// reduction ends every thread's reads of the row (a barrier), so the row may be rewritten in
// place after it.
template <int kThreads>
__device__ float row_inv_rms(const float* row, int64_t n, float eps) {
  static_assert(kThreads % 32 == 0 && kRmsNormLanes % kThreads == 0, "lanes split evenly");
  constexpr int kLanes = static_cast<int>(kRmsNormLanes / kThreads);
  const double own = lanes_sum_of_squares<kLanes>(row, n, int64_t{threadIdx.x} * kLanes);
  return inv_rms_of(block_pairwise_sum<kThreads>(own), n, eps);
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
