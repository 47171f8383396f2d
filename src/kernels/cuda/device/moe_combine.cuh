// The weighted combine of one token's expert outputs, shared by the combine kernel
// (moe/permute.cu) and the down kernel's fused combine (gemm/nvfp4/expert_stream.cu): y = Σ over
// the token's routed slots, in grouped-row order, of weight · down[row], then + down[shared row];
// each step one rounded f32 multiply and add, as cpu::moe_combine and cpu::add do, so both give
// the same bits.
//
// Dimension letters: D model width, K experts per token.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dsv4::kernels::cuda::moe {

inline constexpr int kMaxExpertsPerToken = 16;

// A token's routed rows sorted by grouped row, their weights, and its shared-expert row.
struct TokenRoutes {
  int rows[kMaxExpertsPerToken];
  float weights[kMaxExpertsPerToken];
  int shared_row;
};

__device__ __forceinline__ TokenRoutes token_routes(const int* row_of, const float* sel_weight,
                                                    int t, int k_used) {
  TokenRoutes r;
  for (int k = 0; k < k_used; ++k) {  // insertion sort by grouped row: cpu::moe_combine's order
    const int row = row_of[t * (k_used + 1) + k];
    const float w = sel_weight[t * (k_used + 1) + k];
    int j = k;
    for (; j > 0 && r.rows[j - 1] > row; --j) {
      r.rows[j] = r.rows[j - 1], r.weights[j] = r.weights[j - 1];
    }
    r.rows[j] = row, r.weights[j] = w;
  }
  r.shared_row = row_of[t * (k_used + 1) + k_used];
  return r;
}

// token_routes for a whole block, written once into shared memory by its first warp: lane k
// takes slot k and finds its place by counting the smaller rows (a token's rows are distinct),
// so the order is token_routes' and no thread keeps the arrays in local memory.
__device__ __forceinline__ void token_routes_by_warp(const int* row_of, const float* sel_weight,
                                                     int t, int k_used, TokenRoutes& r) {
  const int lane = threadIdx.x % 32;
  const int* slots = row_of + t * (k_used + 1);
  const bool mine = lane < k_used;
  const int row = mine ? slots[lane] : 0;
  int rank = 0;
  for (int j = 0; j < k_used; ++j) rank += __shfl_sync(0xffffffffu, row, j) < row;
  if (mine) r.rows[rank] = row, r.weights[rank] = sel_weight[t * (k_used + 1) + lane];
  if (lane == 0) r.shared_row = slots[k_used];
}

__device__ __forceinline__ float combine_step(float acc, float w, float o) {
  return __fadd_rn(acc, __fmul_rn(w, o));
}
__device__ __forceinline__ float4 combine_step(float4 acc, float w, float4 o) {
  return make_float4(combine_step(acc.x, w, o.x), combine_step(acc.y, w, o.y),
                     combine_step(acc.z, w, o.z), combine_step(acc.w, w, o.w));
}
__device__ __forceinline__ float add_shared(float acc, float s) { return __fadd_rn(acc, s); }
__device__ __forceinline__ float4 add_shared(float4 acc, float4 s) {
  return make_float4(__fadd_rn(acc.x, s.x), __fadd_rn(acc.y, s.y), __fadd_rn(acc.z, s.z),
                     __fadd_rn(acc.w, s.w));
}

// Columns [d, d + sizeof(V)/4) of the token's combined output. The down rows are read through
// L2 (ld.cg): in the fused combine other warps of the same grid wrote them.
template <typename V>
__device__ __forceinline__ V combine_columns(const TokenRoutes& r, int k_used, bool with_shared,
                                             const float* down, int dim, int d) {
  V acc{};
#pragma unroll 4  // four rows' loads in flight before their adds, which stay in order
  for (int k = 0; k < k_used; ++k) {
    acc = combine_step(acc, r.weights[k],
                       __ldcg(reinterpret_cast<const V*>(down + int64_t{r.rows[k]} * dim + d)));
  }
  if (with_shared) {
    const V* shared = reinterpret_cast<const V*>(down + int64_t{r.shared_row} * dim + d);
    acc = add_shared(acc, __ldcg(shared));
  }
  return acc;
}

}  // namespace dsv4::kernels::cuda::moe
