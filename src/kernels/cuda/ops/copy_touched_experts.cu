// Expert offload's step copy (kernels/ops.h copy_touched_experts; bit-identical to the CPU's):
// the routed experts a call's routing touched, from mapped host memory
// (checkpoint/expert_offload.h) to device buffers of the same layout, before the expert kernels
// run. Which experts is known only on the device (the active list the routing front wrote), so
// the copy is a kernel, not copy-engine transfers: those would need the list on the host, a
// synchronisation in the middle of the layer. The expert kernels read host memory in place at
// 14-17 GB/s (docs/bench_log.md, "Expert offload"): each warp has a few loads in flight and
// waits on them. Here every thread keeps kLoadsInFlight 16-byte loads in flight and does nothing
// else, so PCIe, not latency, sets the rate.
//
// Dimension letters: E routed experts.
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kCopyThreads = 512;
constexpr int kCopyBlocksPerSm = 2;
constexpr int kLoadsInFlight = 4;

struct TouchedExpertCopy {
  const int* active;  // [E+2], the count at [E+1]
  int n_experts;
  const uint4* from[kExpertBulkRegions];     // mapped host memory, 16-byte aligned
  uint4* to[kExpertBulkRegions];             // device, the same layout
  int64_t region_words[kExpertBulkRegions];  // 16-byte words of one expert in each region
};

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
  return {p.from[r] + word, p.to[r] + word};
}

// Blocks stride over each touched expert's words in turn; groups outside [0, E) (the shared
// expert's group E) have no routed weights and are skipped.
__global__ void __launch_bounds__(kCopyThreads) copy_touched_experts_kernel(TouchedExpertCopy p) {
  const int n_active = p.active[p.n_experts + 1];
  int64_t expert_words = 0;
  for (int r = 0; r < kExpertBulkRegions; ++r) expert_words += p.region_words[r];
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int a = 0; a < n_active; ++a) {
    const int expert = p.active[a];
    if (expert < 0 || expert >= p.n_experts) continue;
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

void copy_touched_experts(const TensorView& active, const ExpertBulkCopies& from,
                          const ExpertBulkCopies& to) {
  const TouchedExpertsOperands op = touched_experts_operands(active, from, to);
  TouchedExpertCopy p{op.active, static_cast<int>(op.n_experts), {}, {}, {}};
  for (int r = 0; r < kExpertBulkRegions; ++r) {
    p.from[r] = reinterpret_cast<const uint4*>(op.from[r]);
    p.to[r] = reinterpret_cast<uint4*>(op.to[r]);
    p.region_words[r] = op.expert_bytes[r] / 16;
  }
  copy_touched_experts_kernel<<<sm_count() * kCopyBlocksPerSm, kCopyThreads, 0, op_stream()>>>(p);
  check_launch();
}

}  // namespace dsv4::kernels::cuda
