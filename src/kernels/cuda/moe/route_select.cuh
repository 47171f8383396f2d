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

// Token t's k-th choice of the biased top-K, warp-wide: the best (value, expert) of `biased`
// (larger first, then the lower id), which is then marked taken. Expert e lives in lane e % 32,
// register e / 32.
__device__ __forceinline__ int take_best(float (&biased)[kMaxExpertsPerLane], int lane) {
  float best = -FLT_MAX;
  int expert = INT32_MAX;
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i) {
    if (biased[i] > best) best = biased[i], expert = lane + 32 * i;  // first = lowest id
  }
  warp_argmax(best, expert);
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i) {
    if (lane + 32 * i == expert) biased[i] = -INFINITY;  // taken
  }
  return expert;
}

// Warp-wide (all 32 lanes): token t's K experts and weights from its scores `score_in` [E]
// (sqrt(softplus(logits))) and the selection bias `bias` [E] (nullptr: none), written to
// `chosen` / `weight` [K+1] with the shared expert E as slot K; each chosen expert's entry of
// `counts` goes up by one. Every pointer may be global or shared memory. Hash routing
// (p.tid2eid) reads only the K entries of score_in it picks, so the router need not write the
// others. Lane k < K ends up holding slot k: the weights' divisions and the counts run in
// parallel, and the sum that divides them is added in slot order, as cpu::moe_route does.
__device__ __forceinline__ void select_experts(const RouterParams& p, const float* score_in,
                                               const float* bias, int t, int lane, int* counts,
                                               int* chosen, float* weight) {
  int my_expert = 0;
  float my_score = 0.0f;
  if (p.tid2eid) {
    if (lane < p.k_used) {
      my_expert = static_cast<int>(p.tid2eid[p.token_ids[t] * p.k_used + lane]);
      my_score = score_in[my_expert];
    }
  } else {
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
    for (int k = 0; k < p.k_used; ++k) {
      const int expert = take_best(biased, lane);
      float mine = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxExpertsPerLane; ++i) {
        if (lane + 32 * i == expert) mine = score[i];
      }
      const float s = __shfl_sync(0xffffffffu, mine, expert % 32);
      if (lane == k) my_expert = expert, my_score = s;
    }
  }
  float sum = 0.0f;
  for (int k = 0; k < p.k_used; ++k) sum = __fadd_rn(sum, __shfl_sync(0xffffffffu, my_score, k));
  if (lane < p.k_used) {
    chosen[lane] = my_expert;
    weight[lane] = __fmul_rn(__fdiv_rn(my_score, __fadd_rn(sum, 1e-20f)), p.route_scale);
    atomicAdd(&counts[my_expert], 1);
  } else if (lane == p.k_used) {
    chosen[lane] = p.n_experts, weight[lane] = 1.0f;
  }
}

}  // namespace dsv4::kernels::cuda::moe
