// The read ceiling (read_ceiling.cu): the fastest a single kernel launch reads N bytes of HBM,
// timed as the GEMM benchmarks time a call (kBatch launches in one CUDA graph, each reading its
// own copy of the bytes, the copies together larger than 4× the L2). Shared by read_ceiling
// and the benchmarks that hold a decode-size GEMM against it (fp8_gemm_bench).
//
// The read kernel: a grid of blocks per SM (each size its best of 1, 2, 3 and 4 blocks of 512
// threads an SM), 16-byte non-caching loads, 4 independent loads in flight per thread per trip.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench_harness.h"
#include "kernels/cuda/device/mma_sync.cuh"

namespace dsv4::bench {

inline constexpr int kThreads = 512;
inline constexpr int64_t kRotateBytes = 256ll << 20;  // > 4 × the 50 MB L2

__device__ __forceinline__ uint4 load(const uint4* p) {
  return kernels::cuda::load_weights_once(reinterpret_cast<const uint8_t*>(p));
}

__global__ void __launch_bounds__(kThreads)
    read_kernel(const uint4* data, int64_t n, int32_t* sink) {
  uint32_t fold = 0;
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = load(data + i + j * stride);
#pragma unroll
    for (int j = 0; j < 4; ++j) fold ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = load(data + i);
    fold ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (fold == 0x9e3779b9u)
    sink[blockIdx.x] = static_cast<int32_t>(fold);  // never in practice; keeps the loads live
}

// µs per launch reading `bytes` (a copy per launch, rotated), with `blocks_per_sm`.
inline double read_us(int64_t bytes, int blocks_per_sm, int n_sm, const std::vector<Tensor>& copies,
                      const Tensor& sink) {
  const int64_t n = bytes / 16;
  const int grid = blocks_per_sm * n_sm;
  return graph_us_per_call([&](int i) {
    read_kernel<<<grid, kThreads, 0, kernels::cuda::op_stream()>>>(
        copies[static_cast<size_t>(i) % copies.size()].view().data_as<const uint4>(), n,
        sink.view().data_as<int32_t>());
    DSV4_CUDA_CHECK(cudaGetLastError());
  });
}

struct ReadCeiling {
  double us;   // a launch, at its best grid
  int blocks;  // blocks an SM of that grid
};

// The best of 1-4 blocks an SM reading `bytes` (rounded down to 16), on fresh rotated copies.
inline ReadCeiling read_ceiling(int64_t bytes, int n_sm) {
  bytes = bytes / 16 * 16;
  const int n_copies = static_cast<int>(std::clamp<int64_t>(kRotateBytes / bytes + 1, 2, 64));
  std::vector<Tensor> copies;
  for (int c = 0; c < n_copies; ++c) {
    copies.push_back(device_tensor(DType::kU8, {bytes}));
    DSV4_CUDA_CHECK(cudaMemset(copies.back().view().data, c + 1, bytes));
  }
  const Tensor sink = device_tensor(DType::kI32, {8 * n_sm});
  ReadCeiling best{1e30, 0};
  for (const int blocks : {1, 2, 3, 4}) {
    const double us = read_us(bytes, blocks, n_sm, copies, sink);
    if (us < best.us) best = {us, blocks};
  }
  return best;
}

}  // namespace dsv4::bench
