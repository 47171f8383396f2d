// cuda::sparse_attention, by one of two kernels. Few queries (decode): one block per (query,
// head), below. Many queries (prefill): one block per (query, group of kGroupHeads heads),
// further below, so that a candidate's kv row, which every head of the query reads, comes from
// L2 once a group instead of once a head.
//
// One block per (query, head): the block finds the query's candidate
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
// (ncu, H200); with a warp per candidate for the logits only, 27 µs (H100).
//
// Dimension letters: T tokens, H heads, Dh head dim, Kw / Kc candidates per query of the window
// and extra sources.
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cuda/attention/candidates.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"

namespace dsv4::kernels::cuda {
namespace {

// Row elements a lane loads at once (up to 32·16 = 512 of a row, V4's head dim): a warp's
// loads of a candidate's row all in flight before its multiply-adds use them.
constexpr int kDimsPerLane = 16;
// Warps of a (query, head) block: 32, so that a decode query's ~130-640 candidates leave each
// warp a short chain. With 8, a V4-Flash decode launch at position 255 took 78-115 µs for its 64
// blocks, each warp walking ~24 candidates one load latency after another; with 32 it takes
// ~27 µs (ncu, H100; docs/bench_log.md, "V4-Flash shapes": the decode step's attention).
constexpr int kAttentionWarps = 32;
constexpr int kAttentionThreads = 32 * kAttentionWarps;

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

__global__ void __launch_bounds__(kAttentionThreads) sparse_attention_kernel(AttentionArgs a) {
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
  const float* window_kv = source_rows(a.window, t);
  const float* extra_kv = source_rows(a.extra, t);
  const auto row_of = [&](int64_t j) {
    const float* kv = j < a.window.n_candidates ? window_kv : extra_kv;
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

// ---- many queries: a block per (query, group of heads) ----
// At a prefill the (query, head) blocks above read each candidate row once per head (64 heads ×
// 130-190 rows × 2 KB a query at a 256-token prompt, twice: logits, then the sum); ncu put
// sparse_attention at 34.5 % of a V4-Flash prefill (8 × 256 tokens, H100). Here a
// block takes kGroupHeads heads and stages candidate rows in shared memory, where every thread
// reads them: for the logits slabs of 64 rows × 128 dims, a thread per (candidate, 4 heads), so
// one row load feeds 16 multiply-adds; for the sum chunks of 16 whole rows, a thread per (4
// heads, 4 dims per 256). 1.9× the (query, head) kernel on that prefill (docs/bench.md). Head
// dims a multiple of 4 (16-byte loads); each output is one thread's sum in a fixed order,
// deterministic.
constexpr int kGroupHeads = 16;
constexpr int kLogitRows = 64, kSlabDims = 128;  // logits: rows × dims staged at a time
constexpr int kSumRows = 16;                     // the sum: whole rows staged at a time
constexpr int kHeadsThreads = kRowThreads;       // 256: (candidate, 4 heads) for the logits
static_assert(kHeadsThreads == kLogitRows * kGroupHeads / 4, "a thread per (row, 4 heads)");

// Shared floats of a staged row of n dims (padded by 4 so the rows a warp reads start in
// different banks).
__host__ __device__ constexpr int64_t padded(int64_t n) { return n + 4; }

// Floats of the staging buffer: the larger of the logits' slab and the sum's chunk.
__host__ __device__ constexpr int64_t staging_floats(int64_t head_dim) {
  return kLogitRows * padded(kSlabDims) > kSumRows * padded(head_dim)
             ? kLogitRows * padded(kSlabDims)
             : kSumRows * padded(head_dim);
}

// Dynamic shared memory: the group's queries [kGroupHeads][Dh+4], the staging buffer, the
// probabilities [Kw + Kc][kGroupHeads] and the candidate rows [Kw + Kc].
size_t heads_smem_bytes(int64_t head_dim, int64_t n_candidates) {
  return sizeof(float) *
             static_cast<size_t>(kGroupHeads * padded(head_dim) + staging_floats(head_dim) +
                                 n_candidates * kGroupHeads) +
         sizeof(int32_t) * static_cast<size_t>(n_candidates);
}

// Dims [d0, d0 + n_dims) of candidate rows c0 .. c0 + n_rows − 1 into dst (row stride
// padded(n_dims)), zeros for a missing candidate: a warp a row, lanes over its 16-byte units (no
// division in the index math: a 64-bit one per unit had cost more than the arithmetic).
__device__ void stage_rows(const AttentionArgs& a, const int32_t* rows, int64_t n_candidates,
                           int64_t c0, int n_rows, int64_t d0, int n_dims, float* dst) {
  const int lane = threadIdx.x % 32;
  for (int c = threadIdx.x / 32; c < n_rows; c += blockDim.x / 32) {
    const int64_t j = c0 + c;
    const bool live = j < n_candidates && rows[j] >= 0;
    const float* kv = j < a.window.n_candidates ? a.window.kv : a.extra.kv;
    const float* src = live ? kv + int64_t{rows[j]} * a.head_dim + d0 : nullptr;
    float* row = dst + c * padded(n_dims);
    for (int d = 4 * lane; d < n_dims; d += 128) {
      const float4 v = live ? __ldg(reinterpret_cast<const float4*>(src + d))
                            : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      *reinterpret_cast<float4*>(row + d) = v;
    }
  }
}

// smem_p[j][h] = scale · q_h · row_j for the block's candidates (−inf for a missing one).
__device__ void group_logits(const AttentionArgs& a, const int32_t* rows, int64_t n_candidates,
                             const float* smem_q, float* slab, float* smem_p) {
  const int c = threadIdx.x % kLogitRows, hq = threadIdx.x / kLogitRows;  // heads 4hq .. 4hq+3
  const int64_t dq = padded(a.head_dim);
  for (int64_t c0 = 0; c0 < n_candidates; c0 += kLogitRows) {
    float dot[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t d0 = 0; d0 < a.head_dim; d0 += kSlabDims) {
      const int n_dims = static_cast<int>(min(int64_t{kSlabDims}, a.head_dim - d0));
      __syncthreads();  // the previous slab read (and, first, the queries and rows listed)
      stage_rows(a, rows, n_candidates, c0, kLogitRows, d0, n_dims, slab);
      __syncthreads();
      const float* r = slab + c * padded(n_dims);
      for (int d = 0; d < n_dims; d += 4) {
        const float4 rv = *reinterpret_cast<const float4*>(r + d);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const float4 qv = *reinterpret_cast<const float4*>(smem_q + (4 * hq + k) * dq + d0 + d);
          dot[k] += qv.x * rv.x;
          dot[k] += qv.y * rv.y;
          dot[k] += qv.z * rv.z;
          dot[k] += qv.w * rv.w;
        }
      }
    }
    const int64_t j = c0 + c;
    if (j >= n_candidates) continue;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      smem_p[j * kGroupHeads + 4 * hq + k] = rows[j] >= 0 ? dot[k] * a.scale : -INFINITY;
    }
  }
}

__global__ void __launch_bounds__(kHeadsThreads) sparse_attention_heads_kernel(AttentionArgs a) {
  extern __shared__ float4 smem_heads[];
  const int64_t n_groups = (a.n_heads + kGroupHeads - 1) / kGroupHeads;
  const int64_t t = blockIdx.x / n_groups, h0 = blockIdx.x % n_groups * kGroupHeads;
  const int64_t n_candidates = a.window.n_candidates + a.extra.n_candidates;
  const int64_t n_extra_visible = visible_extra(a, t);
  const int64_t dp = padded(a.head_dim);
  float* smem_q = reinterpret_cast<float*>(smem_heads);
  float* staging = smem_q + kGroupHeads * dp;
  float* smem_p = staging + staging_floats(a.head_dim);  // [candidate][head]
  auto* rows = reinterpret_cast<int32_t*>(smem_p + n_candidates * kGroupHeads);
  for (int h = threadIdx.x / 32; h < kGroupHeads; h += blockDim.x / 32) {  // a warp a head
    const float* q = a.q + (t * a.n_heads + h0 + h) * a.head_dim;
    for (int d = threadIdx.x % 32; d < a.head_dim; d += 32) {
      smem_q[h * dp + d] = h0 + h < a.n_heads ? q[d] : 0.0f;
    }
  }
  for (int64_t j = threadIdx.x; j < n_candidates; j += blockDim.x) {
    rows[j] = candidate_row(a, t, j, n_extra_visible);
  }
  group_logits(a, rows, n_candidates, smem_q, staging, smem_p);
  __syncthreads();
  // Softmax with the sink: warp w heads 2w, 2w + 1, lanes over the candidates.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int hh = 0; hh < 2; ++hh) {
    const int h = 2 * warp + hh;
    if (h0 + h >= a.n_heads) break;
    const float sink = a.sinks[h0 + h];
    float max_logit = sink;
    for (int64_t j = lane; j < n_candidates; j += 32) {
      max_logit = fmaxf(max_logit, smem_p[j * kGroupHeads + h]);
    }
    max_logit = warp_reduce(max_logit, MaxOp{});
    float denom = 0.0f;
    for (int64_t j = lane; j < n_candidates; j += 32) {
      float& p = smem_p[j * kGroupHeads + h];
      p = expf(p - max_logit);  // exp(−inf) = 0 for a missing candidate
      denom += p;
    }
    denom = warp_reduce(denom, SumOp{}) + expf(sink - max_logit);
    for (int64_t j = lane; j < n_candidates; j += 32) smem_p[j * kGroupHeads + h] /= denom;
  }
  // Σ_j p_j · row_j: thread (g, s) heads 4g .. 4g + 3 and dims 4s + 256 i .. + 3 (i = 0, 1, ...).
  const int g = threadIdx.x / 64, s4 = threadIdx.x % 64 * 4;
  constexpr int kDimSteps = 4;  // head dims up to 4 · 256 = 1024
  float acc[4][kDimSteps][4] = {};
  for (int64_t c0 = 0; c0 < n_candidates; c0 += kSumRows) {
    __syncthreads();  // the probabilities written; the previous chunk read
    stage_rows(a, rows, n_candidates, c0, kSumRows, 0, static_cast<int>(a.head_dim), staging);
    __syncthreads();
    const int64_t n_in_chunk = min(int64_t{kSumRows}, n_candidates - c0);
    for (int c = 0; c < n_in_chunk; ++c) {
      const float4 p = *reinterpret_cast<const float4*>(smem_p + (c0 + c) * kGroupHeads + 4 * g);
      const float pv[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
      for (int i = 0; i < kDimSteps; ++i) {
        const int64_t d = s4 + 256 * i;
        if (d >= a.head_dim) break;
        const float4 r = *reinterpret_cast<const float4*>(staging + c * dp + d);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          acc[k][i][0] += pv[k] * r.x;
          acc[k][i][1] += pv[k] * r.y;
          acc[k][i][2] += pv[k] * r.z;
          acc[k][i][3] += pv[k] * r.w;
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t h = h0 + 4 * g + k;
    if (h >= a.n_heads) break;
#pragma unroll
    for (int i = 0; i < kDimSteps; ++i) {
      const int64_t d = s4 + 256 * i;
      if (d >= a.head_dim) break;
      *reinterpret_cast<float4*>(a.out + (t * a.n_heads + h) * a.head_dim + d) =
          make_float4(acc[k][i][0], acc[k][i][1], acc[k][i][2], acc[k][i][3]);
    }
  }
}

// The group kernel when the queries alone fill the GPU (a prefill) and its shapes fit it.
// Launches kernel(a) on `blocks` blocks of `threads` with that much dynamic shared memory.
void launch_with_smem(void (*kernel)(AttentionArgs), int64_t blocks, int threads, size_t smem_bytes,
                      const AttentionArgs& a) {
  if (smem_bytes > 48 * 1024) allow_dynamic_smem(kernel, static_cast<int>(smem_bytes));
  kernel<<<static_cast<unsigned>(blocks), threads, smem_bytes, op_stream()>>>(a);
}

// Decode rows over their own sequences' caches (per-row sources) always take the (query, head)
// kernel: each row then gets the bits of a call of its row alone, whatever the batch.
bool runs_by_head_groups(const AttentionArgs& a, int64_t n_tokens, size_t smem_bytes) {
  return a.window.addresses == nullptr && n_tokens >= 64 && a.head_dim % 4 == 0 &&
         a.head_dim <= 1024 && smem_bytes <= 200 * 1024;
}

}  // namespace

void sparse_attention(const SparseAttentionParams& p) {
  const AttentionArgs a = attention_args(p);
  const int64_t n_tokens = p.q.size(0), n_heads = a.n_heads, head_dim = a.head_dim;
  if (n_tokens * n_heads == 0) return;
  const int64_t n_candidates = a.window.n_candidates + a.extra.n_candidates;
  const size_t group_smem = heads_smem_bytes(head_dim, n_candidates);
  if (runs_by_head_groups(a, n_tokens, group_smem)) {
    launch_with_smem(sparse_attention_heads_kernel,
                     n_tokens * ((n_heads + kGroupHeads - 1) / kGroupHeads), kHeadsThreads,
                     group_smem, a);
  } else {
    launch_with_smem(sparse_attention_kernel, n_tokens * n_heads, kAttentionThreads,
                     attention_smem_bytes(head_dim, n_candidates), a);
  }
  check_launch();
}

}  // namespace dsv4::kernels::cuda
