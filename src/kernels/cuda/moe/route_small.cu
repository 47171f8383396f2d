// The routing front at decode sizes (T ≤ kSmallRouteTokens): router logits, top-K and the
// permutation in two launches and without the counts memset, since at one token the general
// chain (memset, split-K logits tiles, per-token select, warp-per-group permutation) costs as
// much as streaming the experts.
//
//   route_logits_small_kernel   kWarpsPerExpert warps per expert, each a strided 1/8 of D
//                               for all T tokens (gate rows read once, 16 B per lane, every SM
//                               busy); the parts are added in a fixed order, and the block
//                               stores the scores sqrt(softplus(logit)) [T, E]. Hash-routed
//                               layers run a block per (token, slot) instead, for that one
//                               score: T·K gate rows instead of all E (96 KB, not 4 MB, at
//                               V4-Flash's T = 1). Also writes x as bf16 in the pair layout for
//                               the fused expert kernels, and zeroes the m-tile counts of the
//                               down kernel's fused combine (they are read two launches later).
//   route_select_small_kernel   one block: the bias into shared memory before the PDL wait,
//                               then a warp per token selects (route_select.cuh) from the
//                               scores in global memory into shared memory, counts there too
//                               (then stored, not added, to p.counts), offsets and the active
//                               list by a block scan, then each (token, slot) finds its row by
//                               counting the earlier entries of its group: the order
//                               permute.cu produces.
//
// Why two launches and not one whose last block to finish selects: that block needs a counter
// that is zero when the grid starts, and the workspace is the caller's scratch, so a memset
// would have to come first, a graph node that costs what the PDL hand-over (the select block
// already launched and waiting) costs now.
//
// Deterministic: no float atomics, integer atomics only for counts.
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token.
#include <algorithm>
#include <cub/block/block_scan.cuh>

#include "base/float_convert.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/pair_layout.cuh"
#include "kernels/cuda/device/pdl.cuh"
#include "kernels/cuda/moe/kernels.h"
#include "kernels/cuda/moe/route_select.cuh"

namespace dsv4::kernels::cuda::moe {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kWarpsPerExpert = 8;  // a block per expert: ~2 per SM at E = 256
constexpr int kExpertsPerBlock = kWarps / kWarpsPerExpert;
constexpr int kMaxK = 16;
constexpr int kMaxEntries = kSmallRouteTokens * (kMaxK + 1);
constexpr int kGroupsPerThread = 3;  // E + 1 ≤ 513 groups over 256 threads
// Scan value of a group: its row count above kFlagBits bits of "non-empty" (≤ 513 of them).
constexpr int kFlagBits = 10;

// The experts and tokens of logits block b: score routing, expert b for every token; hash
// routing (p.tid2eid), only (token, slot) b's expert for that token, the one logit its
// selection reads, since the hash table picks the experts and the scores only weigh them. The
// hash grid's blocks past T·K have no logit (n_tokens 0): they are there for x's bf16 copy.
struct LogitsWork {
  int expert, t_begin, n_tokens;
};

__device__ __forceinline__ LogitsWork logits_work(const RouterParams& p) {
  if (p.tid2eid == nullptr) return {static_cast<int>(blockIdx.x), 0, p.n_tokens};
  if (static_cast<int>(blockIdx.x) >= p.n_tokens * p.k_used) return {0, 0, 0};
  const int t = blockIdx.x / p.k_used, k = blockIdx.x % p.k_used;
  return {static_cast<int>(p.tid2eid[p.token_ids[t] * p.k_used + k]), t, 1};
}

// Logits blocks: one per expert, or for hash routing one per (token, slot) and at least one per
// kThreads elements of x, so that its bf16 copy is one element a thread as on the score grid
// (a few blocks looping over it would add an L2 round trip per element to the grid's end).
int logits_blocks(const RouterParams& p) {
  if (p.tid2eid == nullptr) return p.n_experts;
  return std::max(p.n_tokens * p.k_used, (p.n_tokens * p.dim + kThreads - 1) / kThreads);
}

__global__ void __launch_bounds__(kThreads) route_logits_small_kernel(RouterParams p) {
  static_assert(kExpertsPerBlock == 1, "one expert a block: logits_work");
  __shared__ float smem_part[kWarps][kSmallRouteTokens];
  pdl_trigger();  // the select block may launch now; it waits for these scores
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const LogitsWork work = logits_work(p);
  const int part = warp % kWarpsPerExpert, n4 = p.dim / 4;
  // A token's products and sums are the same whichever tokens share the block: acc[j] is token
  // t_begin + j, so a hash block's logit has the bits the score kernel gives that (token, expert).
  float acc[kSmallRouteTokens] = {};
  if (work.n_tokens > 0) {
    const float4* gate = reinterpret_cast<const float4*>(p.gate + int64_t{work.expert} * p.dim);
    const float4* x = reinterpret_cast<const float4*>(p.x + int64_t{work.t_begin} * p.dim);
#pragma unroll 4
    for (int i = part * 32 + lane; i < n4; i += 32 * kWarpsPerExpert) {
      const float4 g = __ldg(gate + i);
#pragma unroll
      for (int t = 0; t < kSmallRouteTokens; ++t) {
        if (t < work.n_tokens) {
          const float4 v = __ldg(x + int64_t{t} * n4 + i);
          acc[t] = fmaf(v.x, g.x, acc[t]);
          acc[t] = fmaf(v.y, g.y, acc[t]);
          acc[t] = fmaf(v.z, g.z, acc[t]);
          acc[t] = fmaf(v.w, g.w, acc[t]);
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kSmallRouteTokens; ++t) {
    for (int offset = 16; offset > 0; offset /= 2) {
      acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], offset);
    }
    if (lane == 0) smem_part[warp][t] = acc[t];
  }
  __syncthreads();
  // The score, not the logit: the select block then only reads (sqrt(softplus) spread over the
  // grid instead of T·E of them in one block).
  if (threadIdx.x < work.n_tokens) {
    const int t = threadIdx.x;
    float logit = 0.0f;
    for (int q = 0; q < kWarpsPerExpert; ++q) logit += smem_part[q][t];
    p.logits[int64_t{work.t_begin + t} * p.n_experts + work.expert] = sqrt_softplus(logit);
  }
  if (p.mtile_rows_done != nullptr) {
    for (int i = blockIdx.x * kThreads + threadIdx.x; i < p.n_mtiles; i += gridDim.x * kThreads) {
      p.mtile_rows_done[i] = 0;
    }
  }
  if (p.x_bf16 != nullptr) {
    const int n = p.n_tokens * p.dim;
    for (int i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) {
      const int row = i / p.dim, d = i % p.dim;
      p.x_bf16[int64_t{row} * p.dim + pair_layout_index(d)] = float_to_bf16(p.x[i]);
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    route_select_small_kernel(RouterParams p, PermuteOutputs out) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int smem_count[32 * kMaxExpertsPerLane + 1];
  __shared__ int smem_offset[32 * kMaxExpertsPerLane + 1];
  __shared__ int smem_sel[kMaxEntries];
  __shared__ float smem_weight[kMaxEntries];
  __shared__ float smem_bias[32 * kMaxExpertsPerLane];
  pdl_trigger();  // the expert kernel may launch now (and prefetch the shared expert)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n_groups = p.n_experts + 1, n_entries = p.n_tokens * (p.k_used + 1);
  // What needs no scores (the bias is a weight, the counts start fixed) before the wait, so
  // the selection after it touches only shared memory and the scores.
  for (int e = threadIdx.x; p.bias != nullptr && e < p.n_experts; e += kThreads) {
    smem_bias[e] = p.bias[e];
  }
  for (int g = threadIdx.x; g < n_groups; g += kThreads) {
    smem_count[g] = g == p.n_experts ? p.n_tokens : 0;
  }
  __syncthreads();
  pdl_wait();               // the scores
  if (warp < p.n_tokens) {  // straight from global memory: each score is read once
    const int entry = warp * (p.k_used + 1);
    select_experts(p, p.logits + int64_t{warp} * p.n_experts,
                   p.bias != nullptr ? smem_bias : nullptr, warp, lane, smem_count,
                   smem_sel + entry, smem_weight + entry);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n_entries; i += kThreads) {
    p.sel_expert[i] = smem_sel[i];
    p.sel_weight[i] = smem_weight[i];
  }

  int value[kGroupsPerThread];
#pragma unroll
  for (int j = 0; j < kGroupsPerThread; ++j) {
    const int g = threadIdx.x * kGroupsPerThread + j;
    const int count = g < n_groups ? smem_count[g] : 0;
    value[j] = (count << kFlagBits) | (count > 0 ? 1 : 0);
  }
  Scan(scan_storage).ExclusiveSum(value, value);
#pragma unroll
  for (int j = 0; j < kGroupsPerThread; ++j) {
    const int g = threadIdx.x * kGroupsPerThread + j;
    if (g >= n_groups) break;
    const int offset = value[j] >> kFlagBits, n_nonempty = value[j] & ((1 << kFlagBits) - 1);
    const int count = smem_count[g];
    smem_offset[g] = offset;
    out.offsets[g] = offset;
    if (g < p.n_experts) p.counts[g] = count;
    if (count > 0) out.active[n_nonempty] = g;
    if (g == p.n_experts) {
      out.offsets[g + 1] = offset + count;
      out.active[p.n_experts + 1] = n_nonempty + 1;  // n_active: the shared expert is never empty
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n_entries; i += kThreads) {
    const int g = smem_sel[i];
    int row = smem_offset[g];
#pragma unroll 8  // independent loads: up to T·(K+1) of them at T = 8
    for (int j = 0; j < i; ++j) row += smem_sel[j] == g;
    out.row_token[row] = i / (p.k_used + 1);
    out.row_of[i] = row;
  }
}

}  // namespace

void launch_route_small(const RouterParams& p, const PermuteOutputs& out, cudaStream_t stream) {
  DSV4_CHECK(p.n_tokens <= kSmallRouteTokens && p.k_used <= kMaxK &&
                 p.n_experts + 1 <= kThreads * kGroupsPerThread &&
                 p.n_experts <= 32 * kMaxExpertsPerLane && p.dim % 4 == 0,
             "small router: T %d, K %d, E %d, D %d", p.n_tokens, p.k_used, p.n_experts, p.dim);
  route_logits_small_kernel<<<logits_blocks(p), kThreads, 0, stream>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
  launch_pdl(route_select_small_kernel, 1, kThreads, 0, stream, p, out);
}

}  // namespace dsv4::kernels::cuda::moe
