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

// A thread's lanes [first_lane, first_lane + kLanes) of a row of n ≤ kPasses · kRmsNormLanes in
// registers: element first_lane + l + p · kRmsNormLanes in v[p][l], with the norm weight's in
// w[p][l] (1 where there is none, which scales exactly). At decode sizes a row kernel is a chain
// of memory latencies: a row loaded for its sum, then loaded again (and the weight for the first
// time) for the scale pass, each a dependent round trip. Held here, a row costs one: every load
// goes out at construction, before the reduction waits on any. v past n is never read
// (sum_of_squares and store_normed skip it, as the callers of normed must): the constructor puts
// 0 there, and a kernel that fills v itself may leave anything (hc_expand_norm's sums of
// products of zeros can be −0.0).
template <int kLanes, int kPasses>
struct RegisterRow {
  float v[kPasses][kLanes];
  float w[kPasses][kLanes];
  int64_t first_lane, n;

  __device__ RegisterRow(const float* row, int64_t first, int64_t n_cols, const float* weight)
      : first_lane(first), n(n_cols) {
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
#pragma unroll
      for (int l = 0; l < kLanes; ++l) {
        v[p][l] = row && holds(p, l) ? row[index(p, l)] : 0.0f;
        w[p][l] = weight && holds(p, l) ? weight[index(p, l)] : 1.0f;
      }
    }
  }
  __device__ int64_t index(int p, int l) const {
    return first_lane + l + int64_t{p} * kRmsNormLanes;
  }
  __device__ bool holds(int p, int l) const { return index(p, l) < n; }

  // lanes_sum_of_squares' sum: each lane's squares in element order, then the lanes pairwise
  // (a float's square is exact in float64, so a fused multiply-add gives the same bits).
  __device__ double sum_of_squares() const {
    double lanes[kLanes] = {};
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
#pragma unroll
      for (int l = 0; l < kLanes; ++l) {
        if (holds(p, l)) lanes[l] += static_cast<double>(v[p][l]) * v[p][l];
      }
    }
    return pairwise_sum(lanes);
  }

  // rms_norm's expression, x · inv_rms · weight.
  __device__ float normed(int p, int l, float inv_rms) const { return v[p][l] * inv_rms * w[p][l]; }
  __device__ void store_normed(float* out, float inv_rms) const {
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
#pragma unroll
      for (int l = 0; l < kLanes; ++l) {
        if (holds(p, l)) out[index(p, l)] = normed(p, l, inv_rms);
      }
    }
  }
};

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

// A block of kThreads' row of n ≤ kPasses · kRmsNormLanes in registers, in row_inv_rms's lanes.
template <int kThreads, int kPasses>
using BlockRow = RegisterRow<static_cast<int>(kRmsNormLanes / kThreads), kPasses>;
template <int kThreads, int kPasses>
__device__ BlockRow<kThreads, kPasses> block_row(const float* row, int64_t n, const float* weight) {
  return {row, int64_t{threadIdx.x} * (kRmsNormLanes / kThreads), n, weight};
}

// The inverse RMS of a block's row in registers (row_inv_rms's, the same bits).
template <int kThreads, int kLanes, int kPasses>
__device__ float block_inv_rms(const RegisterRow<kLanes, kPasses>& row, float eps) {
  static_assert(kThreads * kLanes == kRmsNormLanes, "the block's lanes");
  return inv_rms_of(block_pairwise_sum<kThreads>(row.sum_of_squares()), row.n, eps);
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

// Lets `kernel` take `bytes` of dynamic shared memory, past the 48 KB a launch gets without
// asking. The attribute stays set, so a launcher of a fixed size asks once a process, through a
// function-local static (a driver call each launch would add host time to every decode step):
//   [[maybe_unused]] static const bool allowed = allow_dynamic_smem(kernel, bytes);
// and one whose size follows the shapes asks before each launch that needs more than 48 KB.
template <typename Kernel>
bool allow_dynamic_smem(Kernel* kernel, int bytes) {
  DSV4_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  return true;
}

}  // namespace dsv4::kernels::cuda
