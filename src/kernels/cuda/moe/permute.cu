// Token → expert permutation and the combine back, without host synchronisation and without
// float atomics. One block per group (E routed experts + the shared expert) finds its row offset
// by summing the counts before it; its 32 warps split the (token, slot) entries into 32
// contiguous segments, count their group's entries in them with ballots, take the prefix of the
// warps before them, and place their entries with ballots again: rows come out sorted by group
// and, inside a group, by (token, slot), the order cpu::moe_group produces. (One warp walking all
// T·(K+1) entries took 690 µs at V4-Flash T = 8192.) The combine gathers by token, so every
// output is summed by one thread in a fixed order.
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token,
// S = T·(K+1) grouped rows.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/moe_combine.cuh"
#include "kernels/cuda/moe/kernels.h"
#include "kernels/cuda/device/pdl.cuh"

namespace dsv4::kernels::cuda::moe {
namespace {

constexpr int kPermuteWarps = 32;

__global__ void __launch_bounds__(32 * kPermuteWarps)
    permute_kernel(const int* sel_expert, const int* counts, int n_tokens, int k_used,
                   int n_experts, int* offsets, int* active, int* row_token, int* row_of) {
  __shared__ int warp_counts[kPermuteWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int group = blockIdx.x;
  int offset = 0, n_nonempty = 0;
  for (int g = lane; g < group; g += 32) {
    const int count = counts[g];  // g < group ≤ E: a routed expert
    offset += count;
    n_nonempty += count > 0;
  }
  for (int delta = 16; delta > 0; delta /= 2) {
    offset += __shfl_xor_sync(0xffffffffu, offset, delta);
    n_nonempty += __shfl_xor_sync(0xffffffffu, n_nonempty, delta);
  }
  const int count = group < n_experts ? counts[group] : n_tokens;
  if (threadIdx.x == 0) {
    offsets[group] = offset;
    if (count > 0) active[n_nonempty] = group;
    if (group == n_experts) {
      offsets[group + 1] = offset + count;
      active[n_experts + 1] = n_nonempty + 1;  // n_active: the shared expert is never empty
    }
  }
  if (count == 0) return;  // block-uniform
  // This warp's segment, a whole number of 32-entry ballots.
  const int n_entries = n_tokens * (k_used + 1);
  const int segment = (n_entries + 32 * kPermuteWarps - 1) / (32 * kPermuteWarps) * 32;
  const int begin = warp * segment, end = min(n_entries, begin + segment);
  auto ballot_at = [&](int base) {
    const int i = base + lane;
    return __ballot_sync(0xffffffffu, i < end && sel_expert[i] == group);
  };
  int mine = 0;
  for (int base = begin; base < end; base += 32) mine += __popc(ballot_at(base));
  if (lane == 0) warp_counts[warp] = mine;
  __syncthreads();
  for (int w = 0; w < warp; ++w) offset += warp_counts[w];
  for (int base = begin; base < end; base += 32) {
    const unsigned ballot = ballot_at(base);
    if (ballot >> lane & 1u) {
      const int i = base + lane, row = offset + __popc(ballot & ((1u << lane) - 1));
      row_token[row] = i / (k_used + 1);
      row_of[i] = row;
    }
    offset += __popc(ballot);
  }
}

// Block (t, y): token t, columns [y·kCombineColumns, +kCombineColumns); each thread owns 4
// consecutive columns (one block per token left a decode step's combine on one SM).
constexpr int kCombineThreads = 256;
constexpr int kCombineColumns = 4 * kCombineThreads;
__global__ void combine_kernel(const float* down, const int* row_of, const float* sel_weight,
                               int k_used, int dim, bool with_shared, float* y) {
  pdl_wait();  // the expert outputs
  const int t = blockIdx.x;
  __shared__ TokenRoutes routes;
  if (threadIdx.x < 32) token_routes_by_warp(row_of, sel_weight, t, k_used, routes);
  __syncthreads();
  const int d_end = min(dim, static_cast<int>(blockIdx.y + 1) * kCombineColumns);
  for (int d = blockIdx.y * kCombineColumns + threadIdx.x * 4; d < d_end; d += kCombineColumns) {
    const float4 acc = combine_columns<float4>(routes, k_used, with_shared, down, dim, d);
    *reinterpret_cast<float4*>(y + int64_t{t} * dim + d) = acc;
  }
}

}  // namespace

void launch_permute(const int* sel_expert, const int* counts, int n_tokens, int k_used,
                    int n_experts, int* offsets, int* active, int* row_token, int* row_of,
                    cudaStream_t stream) {
  permute_kernel<<<n_experts + 1, 32 * kPermuteWarps, 0, stream>>>(
      sel_expert, counts, n_tokens, k_used, n_experts, offsets, active, row_token, row_of);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

void launch_combine(const float* down, const int* row_of, const float* sel_weight, int n_tokens,
                    int k_used, int dim, float* y, cudaStream_t stream, bool with_shared) {
  DSV4_CHECK(k_used <= kMaxExpertsPerToken && dim % 4 == 0, "combine: K %d, D %d", k_used, dim);
  const dim3 grid(n_tokens, (dim + kCombineColumns - 1) / kCombineColumns);
  launch_pdl(combine_kernel, grid, kCombineThreads, 0, stream, down, row_of, sel_weight, k_used,
             dim, with_shared, y);
}

}  // namespace dsv4::kernels::cuda::moe
