// cuda::sparse_attention: one block per (query, head). The block finds the query's candidate
// rows (both sources, in order; index −1 skipped), computes their scaled logits a warp per
// candidate (lanes over the head dim, so each row is read in coalesced lines) into shared
// memory, the max and the denominator with the sink (block reductions), then Σ_j p_j · row_j a
// warp per share of the candidates, lanes over the head dim, the warps' partials added in warp
// order. Same math as the CPU reference (kernels/cpu/attention.cpp) up to the f32 summation
// order of the dot products, the reductions and that sum.
//
// Why warps over the candidates: with a thread per candidate each thread walked its own
// 512-float row, a dependent chain of loads and multiply-adds, and a thread per output dim
// walked every candidate, one load latency each: a decode step's 64 blocks took ~70 µs a layer
// (ncu, H200, session 21); with a warp per candidate for the logits only, 27 µs (H100).
//
// Dimension letters: T tokens, H heads, Dh head dim, Kw / Kc candidates per query of the window
// and extra sources.
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

struct AttentionArgs {
  const float* q;  // [T, H, Dh]
  CandidateSource window, extra;
  const float* sinks;  // [H]
  float scale;
  int64_t n_heads, head_dim;
  float* out;  // [T, H, Dh]
};

// How many of query t's extra candidates it may see: all, or with causal compressed entries
// those whose block is complete at its position (one division a query, not one a candidate).
__device__ int64_t visible_extra(const AttentionArgs& a, int64_t t) {
  const CandidateSource& e = a.extra;
  return e.positions == nullptr ? e.n_candidates
                                : visible_entries(e.positions[t], e.ratio, e.n_candidates);
}

// The kv row of query t's candidate j (window first), or −1 for "no candidate" (index −1, or an
// extra candidate at or past n_extra_visible).
__device__ int32_t candidate_row(const AttentionArgs& a, int64_t t, int64_t j,
                                 int64_t n_extra_visible) {
  const CandidateSource& src = j < a.window.n_candidates ? a.window : a.extra;
  if (j >= a.window.n_candidates) {
    j -= a.window.n_candidates;
    if (j >= n_extra_visible) return -1;
  }
  const int32_t row = src.indices[t * src.index_stride + j];
  if (row >= src.n_rows) __trap();  // the model built the indices: a bug
  return row < 0 ? -1 : row;
}

// Row elements a lane loads at once (up to 32·16 = 512 of a row, V4's head dim): a warp's
// loads of a candidate's row all in flight before its multiply-adds use them.
constexpr int kDimsPerLane = 16;
constexpr int kAttentionWarps = kRowThreads / 32;

// Dynamic shared memory: the query [Dh], the logits, then probabilities [Kw + Kc], the
// candidates' kv rows [Kw + Kc], and each warp's partial output [warps][Dh].
size_t attention_smem_bytes(int64_t head_dim, int64_t n_candidates) {
  return sizeof(float) * static_cast<size_t>(head_dim * (1 + kAttentionWarps) + n_candidates) +
         sizeof(int32_t) * static_cast<size_t>(n_candidates);
}

// q · row over the head dim, the same in every lane of the warp.
__device__ float warp_dot(const float* q, const float* row, int64_t head_dim, int lane) {
  float dot = 0.0f;
  for (int64_t d0 = 0; d0 < head_dim; d0 += 32 * kDimsPerLane) {
    float v[kDimsPerLane];
#pragma unroll
    for (int k = 0; k < kDimsPerLane; ++k) {
      const int64_t d = d0 + lane + 32 * k;
      v[k] = d < head_dim ? row[d] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kDimsPerLane; ++k) {
      const int64_t d = d0 + lane + 32 * k;
      if (d < head_dim) dot += q[d] * v[k];
    }
  }
  return warp_reduce(dot, SumOp{});
}

__global__ void __launch_bounds__(kRowThreads) sparse_attention_kernel(AttentionArgs a) {
  extern __shared__ float smem_attention[];
  const int64_t t = blockIdx.x / a.n_heads, h = blockIdx.x % a.n_heads;
  const int64_t n_candidates = a.window.n_candidates + a.extra.n_candidates;
  const int64_t n_extra_visible = visible_extra(a, t);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* q_global = a.q + blockIdx.x * a.head_dim;
  float* smem_q = smem_attention;
  float* smem_p = smem_q + a.head_dim;
  auto* smem_rows = reinterpret_cast<int32_t*>(smem_p + n_candidates);
  auto* smem_partial = reinterpret_cast<float*>(smem_rows + n_candidates);
  for (int64_t d = threadIdx.x; d < a.head_dim; d += blockDim.x) smem_q[d] = q_global[d];
  for (int64_t j = threadIdx.x; j < n_candidates; j += blockDim.x) {
    smem_rows[j] = candidate_row(a, t, j, n_extra_visible);
  }
  __syncthreads();
  const auto row_of = [&](int64_t j) {
    const float* kv = j < a.window.n_candidates ? a.window.kv : a.extra.kv;
    return kv + int64_t{smem_rows[j]} * a.head_dim;
  };
  const float sink = a.sinks[h];
  float max_logit = sink;
  for (int64_t j = warp; j < n_candidates; j += kAttentionWarps) {
    float logit = -INFINITY;
    if (smem_rows[j] >= 0) {  // the same in every lane
      logit = warp_dot(smem_q, row_of(j), a.head_dim, lane) * a.scale;
      max_logit = fmaxf(max_logit, logit);
    }
    if (lane == 0) smem_p[j] = logit;
  }
  max_logit = block_reduce(max_logit, MaxOp{});
  float denom = 0.0f;
  for (int64_t j = threadIdx.x; j < n_candidates; j += blockDim.x) {
    smem_p[j] = expf(smem_p[j] - max_logit);  // exp(−inf) = 0 for a missing candidate
    denom += smem_p[j];
  }
  denom = block_reduce(denom, SumOp{}) + expf(sink - max_logit);
  for (int64_t j = threadIdx.x; j < n_candidates; j += blockDim.x) smem_p[j] /= denom;
  __syncthreads();
  // Σ_j p_j · row_j: warp w the candidates j ≡ w (mod warps) in order, lanes over the dims (a
  // thread per dim walking every candidate waited one load latency per candidate); the warps'
  // partial sums are then added in warp order.
  for (int64_t d0 = 0; d0 < a.head_dim; d0 += 32 * kDimsPerLane) {
    float acc[kDimsPerLane] = {};
    for (int64_t j = warp; j < n_candidates; j += kAttentionWarps) {
      if (smem_rows[j] < 0) continue;
      const float* row = row_of(j);
      const float p = smem_p[j];
#pragma unroll
      for (int k = 0; k < kDimsPerLane; ++k) {
        const int64_t d = d0 + lane + 32 * k;
        if (d < a.head_dim) acc[k] += p * row[d];
      }
    }
#pragma unroll
    for (int k = 0; k < kDimsPerLane; ++k) {
      const int64_t d = d0 + lane + 32 * k;
      if (d < a.head_dim) smem_partial[warp * a.head_dim + d] = acc[k];
    }
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kAttentionWarps; ++w) sum += smem_partial[w * a.head_dim + d];
    a.out[blockIdx.x * a.head_dim + d] = sum;
  }
}

}  // namespace

void sparse_attention(const SparseAttentionParams& p) {
  const SparseAttentionOperands o = sparse_attention_operands(p);
  const int64_t n_tokens = o.n_tokens, n_heads = o.n_heads, head_dim = o.head_dim;
  AttentionArgs a{p.q.data_as<const float>(),
                  o.window,
                  o.extra,
                  p.sinks.data_as<const float>(),
                  p.scale,
                  n_heads,
                  head_dim,
                  p.out.data_as<float>()};
  if (n_tokens * n_heads == 0) return;
  const size_t smem_bytes =
      attention_smem_bytes(head_dim, a.window.n_candidates + a.extra.n_candidates);
  if (smem_bytes > 48 * 1024) {
    DSV4_CUDA_CHECK(cudaFuncSetAttribute(sparse_attention_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem_bytes)));
  }
  sparse_attention_kernel<<<static_cast<unsigned>(n_tokens * n_heads), kRowThreads, smem_bytes,
                            op_stream()>>>(a);
  check_launch();
}

}  // namespace dsv4::kernels::cuda
