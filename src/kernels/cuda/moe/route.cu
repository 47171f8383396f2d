// The router: f32 logits x · gateᵀ (a tiled SIMT GEMM, split over D when T is small so that a
// decode step still spreads the gate's E·D floats over the whole GPU), then one warp per token
// for sqrt(softplus), the biased top-K (or the hash table), renormalisation and the route scale,
// exactly as cpu::moe_route orders its f32 operations. No float atomics: the split-K partial
// sums are added in split order by the selecting warp.
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token.
#include <cuda_bf16.h>

#include <cfloat>

#include "base/float_convert.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe/kernels.h"
#include "kernels/cuda/pair_layout.cuh"
#include "kernels/cuda/moe/route_select.cuh"

namespace dsv4::kernels::cuda::moe {
namespace {

constexpr int kTile = 64;           // tokens × experts of one block
constexpr int kTileK = 16;          // D elements per smem stage
constexpr int kLogitThreads = 256;  // 16 × 16 threads, 4 × 4 outputs each
constexpr int kSelectThreads = 256;

// logits[split, t, e] = Σ_{d in split} x[t, d] · gate[e, d].
__global__ void __launch_bounds__(kLogitThreads) router_logits_kernel(RouterParams p) {
  __shared__ float smem_x[kTileK][kTile + 4];
  __shared__ float smem_gate[kTileK][kTile + 4];
  const int t0 = blockIdx.y * kTile, e0 = blockIdx.x * kTile;
  const int d_per_split = p.dim / p.logits_splits;
  const int d_begin = blockIdx.z * d_per_split, d_end = d_begin + d_per_split;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int load_row = threadIdx.x / 4, load_col = (threadIdx.x % 4) * 4;
  float acc[4][4] = {};
  for (int d0 = d_begin; d0 < d_end; d0 += kTileK) {
    const int t = t0 + load_row, e = e0 + load_row;
    float4 xv = make_float4(0.f, 0.f, 0.f, 0.f), gv = xv;
    if (t < p.n_tokens)
      xv = *reinterpret_cast<const float4*>(p.x + int64_t{t} * p.dim + d0 + load_col);
    if (e < p.n_experts) {
      gv = *reinterpret_cast<const float4*>(p.gate + int64_t{e} * p.dim + d0 + load_col);
    }
    smem_x[load_col + 0][load_row] = xv.x, smem_x[load_col + 1][load_row] = xv.y;
    smem_x[load_col + 2][load_row] = xv.z, smem_x[load_col + 3][load_row] = xv.w;
    smem_gate[load_col + 0][load_row] = gv.x, smem_gate[load_col + 1][load_row] = gv.y;
    smem_gate[load_col + 2][load_row] = gv.z, smem_gate[load_col + 3][load_row] = gv.w;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = smem_x[kk][ty + 16 * i], b[i] = smem_gate[kk][tx + 16 * i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  float* out = p.logits + int64_t{blockIdx.z} * p.n_tokens * p.n_experts;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int t = t0 + ty + 16 * i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = e0 + tx + 16 * j;
      if (t < p.n_tokens && e < p.n_experts) out[int64_t{t} * p.n_experts + e] = acc[i][j];
    }
  }
}

// One block per token. All threads first add up the split-K partial logits (each thread its
// experts, the splits' loads independent so they overlap) into shared scores; then warp 0
// selects, with expert e in lane e % 32, register e / 32.
__global__ void __launch_bounds__(kSelectThreads) router_select_kernel(RouterParams p) {
  __shared__ float smem_score[32 * kMaxExpertsPerLane];
  const int lane = threadIdx.x % 32, t = blockIdx.x;
  for (int e = threadIdx.x; e < p.n_experts; e += kSelectThreads) {
    const float* partial = p.logits + int64_t{t} * p.n_experts + e;
    const int64_t split_stride = int64_t{p.n_tokens} * p.n_experts;
    float logit = 0.0f;
#pragma unroll 16
    for (int s = 0; s < p.logits_splits; ++s) logit += partial[s * split_stride];
    smem_score[e] = sqrt_softplus(logit);
  }
  if (p.x_bf16 != nullptr) {
    const float* row = p.x + int64_t{t} * p.dim;
    uint16_t* dst = p.x_bf16 + int64_t{t} * p.dim;
    for (int d = threadIdx.x; d < p.dim; d += kSelectThreads) {
      dst[pair_layout_index(d)] = float_to_bf16(row[d]);
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) select_experts(p, smem_score, t, lane, p.counts);
}

}  // namespace

void launch_router(const RouterParams& p, cudaStream_t stream) {
  DSV4_CHECK(p.dim % (kTileK * p.logits_splits) == 0 && p.n_experts <= 32 * kMaxExpertsPerLane,
             "router: D %d, splits %d, E %d", p.dim, p.logits_splits, p.n_experts);
  const dim3 grid((p.n_experts + kTile - 1) / kTile, (p.n_tokens + kTile - 1) / kTile,
                  p.logits_splits);
  router_logits_kernel<<<grid, kLogitThreads, 0, stream>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
  router_select_kernel<<<p.n_tokens, kSelectThreads, 0, stream>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dsv4::kernels::cuda::moe
