// rms_norm's sum of squares over a thread block cluster (sm_90): one row spread over
// kRmsClusterBlocks blocks, one lane of kRmsNormLanes a thread (kernels/ops.h has the order), so
// a decode step's one or few wide rows keep 8 SMs busy instead of one. Each block adds its
// lanes pairwise, the blocks read each other's sums through distributed shared memory and add
// them pairwise in block order: the CPU's tree. Used by rms_norm and by the mHC kernels that
// norm the rows they compute.
//
// A thread keeps its lane's elements of the row in registers (ClusterRow) from their loads to
// the scaled stores. At decode sizes the kernels are latency-bound: a lane's 4 (block input) or
// 16 (mHC streams) elements loaded, then written, then read back one after the other are as many
// dependent memory round trips (a store may alias a later load, so the compiler cannot hoist the
// loads), where registers make the row one round trip whatever its width.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>
#include <type_traits>

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

// A cluster's row in registers: thread g holds lane g (RegisterRow<1, kPerLane>), its
// elements g + q · kRmsNormLanes in v[q][0].
template <int kPerLane>
using ClusterRow = RegisterRow<1, kPerLane>;
template <int kPerLane>
__device__ ClusterRow<kPerLane> cluster_row(const float* row, int64_t n, const float* weight) {
  return {row, cluster_lane(), n, weight};
}

// The inverse RMS of a cluster's row in registers; cluster_rms_done() before the thread exits.
template <int kPerLane>
__device__ float cluster_inv_rms(const ClusterRow<kPerLane>& row, float eps) {
  return cluster_inv_rms(row.sum_of_squares(), row.n, eps);
}

// The elements a lane holds for the widest row a ClusterRow kernel takes; wider rows run the
// kernels that stream the row.
inline constexpr int kMaxLaneElements = 32;

// launch(std::integral_constant<int, k>{}) for the fewest of 4, 16 or kMaxLaneElements elements
// a lane that hold a row of n (the block inputs' 4096 or 7168, the mHC streams' 16384 or
// 28672): three instantiations of each kernel. False, launching nothing, past them.
template <typename Launch>
bool launch_with_lane_elements(int64_t n, Launch&& launch) {
  const int64_t per_lane = ceil_div(n, kRmsNormLanes);
  if (per_lane <= 4) {
    launch(std::integral_constant<int, 4>{});
  } else if (per_lane <= 16) {
    launch(std::integral_constant<int, 16>{});
  } else if (per_lane <= kMaxLaneElements) {
    launch(std::integral_constant<int, kMaxLaneElements>{});
  } else {
    return false;
  }
  return true;
}

}  // namespace dsv4::kernels::cuda
