// rms_norm's sum of squares over a thread block cluster (sm_90): one row spread over
// kRmsClusterBlocks blocks, one lane of kRmsNormLanes a thread (kernels/ops.h has the order), so
// a decode step's one or few wide rows keep 8 SMs busy instead of one. Each block adds its
// lanes pairwise, the blocks read each other's sums through distributed shared memory and add
// them pairwise in block order: the CPU's tree. Used by rms_norm and by the mHC kernels that
// norm the rows they compute.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/contracts.h"
#include "kernels/cuda/device/common.cuh"

namespace dsv4::kernels::cuda {

inline constexpr int kRmsClusterBlocks = 8;  // the portable cluster size
inline constexpr int kRmsClusterThreads = static_cast<int>(kRmsNormLanes / kRmsClusterBlocks);
inline constexpr int64_t kMaxClusterRows = 65535;  // a grid [kRmsClusterBlocks, rows]: gridDim.y

// This thread's lane of its cluster's row.
__device__ __forceinline__ int64_t cluster_lane() {
  return int64_t{cooperative_groups::this_cluster().block_rank()} * kRmsClusterThreads +
         threadIdx.x;
}

// The row's inverse RMS (rms_norm's expression) from every thread's lane sum: each lane's
// squares added in float64 in element order. Every thread of the cluster calls it once, and
// later cluster_rms_done() before it exits.
__device__ inline float cluster_inv_rms(double lane_sum, int64_t n, float eps) {
  __shared__ double block_sum;
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const double own = block_pairwise_sum<kRmsClusterThreads>(lane_sum);
  if (threadIdx.x == 0) block_sum = own;
  cluster.sync();  // every block's sum written
  double sums[kRmsClusterBlocks];
#pragma unroll
  for (int b = 0; b < kRmsClusterBlocks; ++b) sums[b] = *cluster.map_shared_rank(&block_sum, b);
  return inv_rms_of(pairwise_sum(sums), n, eps);
}

// No block leaves while another may still read its block sum.
__device__ __forceinline__ void cluster_rms_done() { cooperative_groups::this_cluster().sync(); }

}  // namespace dsv4::kernels::cuda
