// weight_stream_probe: how fast can the decode kernels' weight access patterns read HBM, with
// no decode and no MMA? The W4A16 decode kernel (gemm/nvfp4/expert_stream.cu) runs at ~1.7-2 TB/s on
// the weights it touches; this separates the access pattern from the work done per byte.
// Loads only (each lane XORs what it read, one word per lane is stored so nothing is dead),
// on V4-Flash's decode-step shape: 7 gate-up matrices [2·2048, 4096] NVFP4 codes (58.7 MB),
// rotated over 8 copies so that no launch finds its bytes in L2.
//
// Patterns, each with expert_stream's load (load_weights_once) kDepth steps ahead in a
// register ring:
//   rows-64   expert_stream's: warp = 16-row m-tile (rows j and F + j for 8 j), lane (g, c)
//             reads 16 bytes of each of its two rows per step, a row's 4 lanes 64 contiguous
//             bytes; one warp load touches 8 rows.
//   rows-128  the same rows, 32 bytes per lane and row per step (a row's lanes 128 bytes).
//   tiled     the same bytes per warp and step, contiguous: a warp's step is one 1 KB block
//             (as if the loader stored each m-tile's K steps tile-major).
// Median of 15 timed batches of 8 launches (CUDA events), after 3 warm-up batches.
//   usage: weight_stream_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/pair_layout.cuh"

namespace dsv4::bench {
namespace {

constexpr int kExperts = 7, kFfn = 2048, kRows = 2 * kFfn, kRowBytes = 4096 / 2;
constexpr int64_t kMatrixBytes = int64_t{kRows} * kRowBytes;
constexpr int kCopies = 8;
constexpr int kWarps = 4;

enum class Pattern { kRows64, kRows128, kTiled };

__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

// Block (x, y): y = matrix, x = block of kWarps m-tiles; warp w streams m-tile x·kWarps + w.
// Per step every pattern reads 2 × 16 bytes a lane (rows-128: 2 × 32 bytes, half the steps).
template <Pattern kPattern, int kDepth>
__global__ void __launch_bounds__(32 * kWarps) probe_kernel(const uint8_t* weights, uint32_t* sink) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int mt = blockIdx.x * kWarps + warp;
  const uint8_t* matrix = weights + blockIdx.y * kMatrixBytes;
  constexpr int kLoadsPerStep = kPattern == Pattern::kRows128 ? 4 : 2;
  constexpr int kStepBytes = kPattern == Pattern::kRows128 ? 128 : 64;  // per row
  constexpr int kSteps = kRowBytes / kStepBytes;
  const uint8_t* lo = matrix + int64_t{mt * 8 + g} * kRowBytes + c * (kStepBytes / 4);
  const uint8_t* hi = lo + int64_t{kFfn} * kRowBytes;
  // tiled: m-tile mt's 16 rows × 2 KB stored as kSteps blocks of 1 KB.
  const uint8_t* tile = matrix + int64_t{mt} * 16 * kRowBytes + lane * 16;
  auto issue = [&](int s, uint4 (&v)[kLoadsPerStep]) {
    if constexpr (kPattern == Pattern::kTiled) {
      v[0] = kernels::cuda::load_weights_once(tile + s * 1024);
      v[1] = kernels::cuda::load_weights_once(tile + s * 1024 + 512);
    } else {
#pragma unroll
      for (int i = 0; i < kLoadsPerStep / 2; ++i) {
        v[2 * i] = kernels::cuda::load_weights_once(lo + s * kStepBytes + 16 * i);
        v[2 * i + 1] = kernels::cuda::load_weights_once(hi + s * kStepBytes + 16 * i);
      }
    }
  };
  uint4 ring[kDepth][kLoadsPerStep];
#pragma unroll
  for (int d = 0; d < kDepth; ++d) issue(d, ring[d]);
  uint32_t acc = 0;
  for (int s0 = 0; s0 < kSteps; s0 += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
#pragma unroll
      for (int i = 0; i < kLoadsPerStep; ++i) acc ^= fold(ring[d][i]);
      if (s0 + d + kDepth < kSteps) issue(s0 + d + kDepth, ring[d]);
    }
  }
  sink[(blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x] = acc;
}

template <Pattern kPattern, int kDepth>
double probe_tb_per_s(const uint8_t* copies, uint32_t* sink) {
  const dim3 grid(kFfn / 8 / kWarps, kExperts);
  cudaEvent_t start, stop;
  DSV4_CUDA_CHECK(cudaEventCreate(&start));
  DSV4_CUDA_CHECK(cudaEventCreate(&stop));
  constexpr int kBatch = 8, kWarmup = 3, kRepeats = 15;
  std::vector<float> ms;
  for (int r = 0; r < kWarmup + kRepeats; ++r) {
    DSV4_CUDA_CHECK(cudaEventRecord(start));
    for (int i = 0; i < kBatch; ++i) {
      probe_kernel<kPattern, kDepth><<<grid, 32 * kWarps>>>(
          copies + (r * kBatch + i) % kCopies * kExperts * kMatrixBytes, sink);
    }
    DSV4_CUDA_CHECK(cudaEventRecord(stop));
    DSV4_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    DSV4_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    if (r >= kWarmup) ms.push_back(t / kBatch);
  }
  DSV4_CUDA_CHECK(cudaGetLastError());
  DSV4_CUDA_CHECK(cudaEventDestroy(start));
  DSV4_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return kExperts * kMatrixBytes / (ms[ms.size() / 2] * 1e-3) / 1e12;
}

}  // namespace
}  // namespace dsv4::bench

int main() {
  using namespace dsv4::bench;
  uint8_t* copies = nullptr;
  uint32_t* sink = nullptr;
  const int64_t bytes = int64_t{kCopies} * kExperts * kMatrixBytes;
  DSV4_CUDA_CHECK(cudaMalloc(&copies, bytes));
  DSV4_CUDA_CHECK(cudaMemset(copies, 0x5a, bytes));
  DSV4_CUDA_CHECK(cudaMalloc(&sink, sizeof(uint32_t) * kExperts * (kFfn / 8 / kWarps) * 32 * kWarps));
  std::printf("| pattern | steps ahead | TB/s (weights read, median of 15) |\n|---|---:|---:|\n");
  std::printf("| rows-64 (expert_stream) | 4 | %.2f |\n", probe_tb_per_s<Pattern::kRows64, 4>(copies, sink));
  std::printf("| rows-64 | 8 | %.2f |\n", probe_tb_per_s<Pattern::kRows64, 8>(copies, sink));
  std::printf("| rows-128 | 2 | %.2f |\n", probe_tb_per_s<Pattern::kRows128, 2>(copies, sink));
  std::printf("| rows-128 | 4 | %.2f |\n", probe_tb_per_s<Pattern::kRows128, 4>(copies, sink));
  std::printf("| tiled | 4 | %.2f |\n", probe_tb_per_s<Pattern::kTiled, 4>(copies, sink));
  std::printf("| tiled | 8 | %.2f |\n", probe_tb_per_s<Pattern::kTiled, 8>(copies, sink));
  DSV4_CUDA_CHECK(cudaFree(copies));
  DSV4_CUDA_CHECK(cudaFree(sink));
  return 0;
}
