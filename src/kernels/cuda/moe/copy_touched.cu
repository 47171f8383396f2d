// Expert offload's step copy: the routed experts a call's routing touched, from mapped host
// memory (checkpoint/expert_offload.h) to device buffers of the same layout, before the expert
// kernels run. Which experts is known only on the device (the active list the routing front
// wrote), so the copy is a kernel, not copy-engine transfers: those would need the list on the
// host, a synchronisation in the middle of the layer. The expert kernels read host memory
// in place at 14-17 GB/s (docs/bench_log.md, "Expert offload"): each warp has a few loads in flight
// and waits on them. Here every thread keeps kLoadsInFlight 16-byte loads in flight and does
// nothing else, so PCIe, not latency, sets the rate.
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/moe/kernels.h"

namespace dsv4::kernels::cuda::moe {
namespace {

constexpr int kCopyThreads = 512;
constexpr int kCopyBlocksPerSm = 2;
constexpr int kLoadsInFlight = 4;

// The 16-byte word `i` of an expert's bulk (its four regions one after the other): where it is
// read and where it is written.
struct WordAddress {
  const uint4* from;
  uint4* to;
};

__device__ WordAddress locate(const TouchedExpertCopy& p, int expert, int64_t i) {
  int r = 0;
  while (r + 1 < kExpertBulkRegions && i >= p.region_words[r]) i -= p.region_words[r++];
  const int64_t word = int64_t{expert} * p.region_words[r] + i;
  return {reinterpret_cast<const uint4*>(p.from[r]) + word,
          reinterpret_cast<uint4*>(p.to[r]) + word};
}

// Blocks stride over each touched expert's words in turn; the shared expert (the last active
// group, group E) has no routed weights and is skipped.
__global__ void __launch_bounds__(kCopyThreads) copy_touched_kernel(TouchedExpertCopy p) {
  const int n_routed = p.active[p.n_experts + 1] - 1;
  int64_t expert_words = 0;
  for (int r = 0; r < kExpertBulkRegions; ++r) expert_words += p.region_words[r];
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int a = 0; a < n_routed; ++a) {
    const int expert = p.active[a];
    for (int64_t base = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; base < expert_words;
         base += stride * kLoadsInFlight) {
      WordAddress at[kLoadsInFlight];
      uint4 words[kLoadsInFlight];
#pragma unroll
      for (int j = 0; j < kLoadsInFlight; ++j) {
        const int64_t i = base + j * stride;
        if (i < expert_words) {
          at[j] = locate(p, expert, i);
          words[j] = *at[j].from;
        }
      }
#pragma unroll
      for (int j = 0; j < kLoadsInFlight; ++j) {
        if (base + j * stride < expert_words) *at[j].to = words[j];
      }
    }
  }
}

}  // namespace

void launch_copy_touched(const TouchedExpertCopy& p, cudaStream_t stream) {
  copy_touched_kernel<<<sm_count() * kCopyBlocksPerSm, kCopyThreads, 0, stream>>>(p);
  check_launch();
}

}  // namespace dsv4::kernels::cuda::moe
