// The routing decision of one token, shared by the router kernels (route.cu for any T,
// route_small.cu for decode): sqrt(softplus) scores, the biased top-K (or the hash table),
// renormalisation and the route scale, in cpu::moe_route's order of f32 operations.
//
// Dimension letters: E routed experts, K experts per token.
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/cuda/moe/kernels.h"

namespace dsv4::kernels::cuda::moe {

inline constexpr int kMaxExpertsPerLane = 16;  // E ≤ 512

__device__ __forceinline__ float sqrt_softplus(float logit) {
  const float softplus = logit > 20.0f ? logit : log1pf(expf(logit));
  return sqrtf(softplus);
}

// The best (value, expert) of a warp: larger value first, then the lower expert id.
__device__ __forceinline__ void warp_argmax(float& value, int& expert) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other_value = __shfl_xor_sync(0xffffffffu, value, offset);
    const int other_expert = __shfl_xor_sync(0xffffffffu, expert, offset);
    if (other_value > value || (other_value == value && other_expert < expert)) {
      value = other_value, expert = other_expert;
    }
  }
}

// Warp-wide (all 32 lanes): token t's K experts and weights from its scores `score_in` [E] and
// the selection bias `bias` [E] (nullptr: none), written to `chosen` / `weight` [K+1] with the
// shared expert E as slot K; each chosen expert's entry of `counts` goes up by one. Every
// pointer may be global or shared memory. Expert e lives in lane e % 32, register e / 32.
__device__ __forceinline__ void select_experts(const RouterParams& p, const float* score_in,
                                               const float* bias, int t, int lane, int* counts,
                                               int* chosen, float* weight) {
  float score[kMaxExpertsPerLane], biased[kMaxExpertsPerLane];
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i) {
    const int e = lane + 32 * i;
    score[i] = biased[i] = -FLT_MAX;
    if (e < p.n_experts) {
      score[i] = score_in[e];
      biased[i] = bias ? score[i] + bias[e] : score[i];
    }
  }
  float sum = 0.0f;
  for (int k = 0; k < p.k_used; ++k) {
    int expert;
    if (p.tid2eid) {
      expert = static_cast<int>(p.tid2eid[p.token_ids[t] * p.k_used + k]);
    } else {
      float best = -FLT_MAX;
      expert = INT32_MAX;
#pragma unroll
      for (int i = 0; i < kMaxExpertsPerLane; ++i) {
        if (biased[i] > best) best = biased[i], expert = lane + 32 * i;  // first = lowest id
      }
      warp_argmax(best, expert);
#pragma unroll
      for (int i = 0; i < kMaxExpertsPerLane; ++i) {
        if (lane + 32 * i == expert) biased[i] = -INFINITY;  // taken
      }
    }
    float mine = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxExpertsPerLane; ++i) {
      if (lane + 32 * i == expert) mine = score[i];
    }
    const float s = __shfl_sync(0xffffffffu, mine, expert % 32);
    sum = __fadd_rn(sum, s);
    if (lane == 0) chosen[k] = expert, weight[k] = s;
  }
  __syncwarp();
  if (lane == 0) {
    for (int k = 0; k < p.k_used; ++k) {
      weight[k] = __fmul_rn(__fdiv_rn(weight[k], __fadd_rn(sum, 1e-20f)), p.route_scale);
      atomicAdd(&counts[chosen[k]], 1);
    }
    chosen[p.k_used] = p.n_experts, weight[p.k_used] = 1.0f;
  }
}

}  // namespace dsv4::kernels::cuda::moe
