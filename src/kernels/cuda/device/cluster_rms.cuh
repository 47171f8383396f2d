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

// This thread's lane's elements lane + q · kRmsNormLanes (q < kPerLane) of a row of n, in
// registers, with the norm weight's (1 where there is none, which scales exactly); v past n
// is left to the kernel and never read.
template <int kPerLane>
struct ClusterRow {
  float v[kPerLane];
  float w[kPerLane];
  int64_t lane, n;

  // The weight's loads go out here, before the row's arithmetic and reduction wait on anything.
  __device__ ClusterRow(int64_t n_cols, const float* weight) : lane(cluster_lane()), n(n_cols) {
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) w[q] = weight && holds(q) ? weight[index(q)] : 1.0f;
  }
  __device__ int64_t index(int q) const { return lane + int64_t{q} * kRmsNormLanes; }
  __device__ bool holds(int q) const { return index(q) < n; }

  // The row's inverse RMS: the lane's squares added in element order (a float's square is exact
  // in float64, so a fused multiply-add gives the same bits), then cluster_inv_rms.
  __device__ float inv_rms(float eps) const {
    double sum_sq = 0.0;
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) {
      if (holds(q)) sum_sq += static_cast<double>(v[q]) * v[q];
    }
    return cluster_inv_rms(sum_sq, n, eps);
  }

  // out[i] = v · inv_rms · w: rms_norm's expression.
  __device__ void store_normed(float* out, float inv_rms) const {
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) {
      if (holds(q)) out[index(q)] = v[q] * inv_rms * w[q];
    }
  }
};

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
