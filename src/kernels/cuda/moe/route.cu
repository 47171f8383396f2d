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
#include "kernels/cuda/device/pair_layout.cuh"
#include "kernels/cuda/moe/route_select.cuh"

namespace dsv4::kernels::cuda::moe {
namespace {

constexpr int kTileK = 16;          // D elements per shared-memory stage
constexpr int kLogitThreads = 256;  // 16 × 16 threads
constexpr int kSelectThreads = 256;

// logits[split, t, e] = Σ_{d in split} x[t, d] · gate[e, d], one kTile × kTile (tokens ×
// experts) tile per block, each thread kTile/16 × kTile/16 outputs: rows ty·4 + i + 64·h and
// columns tx·4 + j + 64·h, so a thread's operands are float4 reads (broadcast for x, 16
// consecutive float4 for the gate: conflict-free). Two shared-memory stages: the next K step's
// global loads are in registers while this one multiplies, one barrier per step. Each output
// adds its products in d order, whatever the tile, so the tile never changes a bit.
template <int kTile>
__global__ void __launch_bounds__(kLogitThreads) router_logits_kernel(RouterParams p) {
  constexpr int kPerThread = kTile / 16, kHalves = kPerThread / 4;
  constexpr int kLoadsPerThread = kTile * kTileK / 4 / kLogitThreads;  // float4 per operand
  __shared__ __align__(16) float smem_x[2][kTileK][kTile + 4];
  __shared__ __align__(16) float smem_gate[2][kTileK][kTile + 4];
  const int t0 = blockIdx.y * kTile, e0 = blockIdx.x * kTile;
  const int d_per_split = p.dim / p.logits_splits;
  const int d_begin = blockIdx.z * d_per_split, d_end = d_begin + d_per_split;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int load_row = threadIdx.x / 4, load_col = (threadIdx.x % 4) * 4;

  float4 x_next[kLoadsPerThread], gate_next[kLoadsPerThread];
  auto load = [&](int d0) {
#pragma unroll
    for (int l = 0; l < kLoadsPerThread; ++l) {
      const int t = t0 + load_row + 64 * l, e = e0 + load_row + 64 * l;
      x_next[l] = gate_next[l] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (t < p.n_tokens)
        x_next[l] = *reinterpret_cast<const float4*>(p.x + int64_t{t} * p.dim + d0 + load_col);
      if (e < p.n_experts)
        gate_next[l] = *reinterpret_cast<const float4*>(p.gate + int64_t{e} * p.dim + d0 + load_col);
    }
  };
  auto store = [&](int stage) {
#pragma unroll
    for (int l = 0; l < kLoadsPerThread; ++l) {
      const int r = load_row + 64 * l;
      const float4 xv = x_next[l], gv = gate_next[l];
      smem_x[stage][load_col + 0][r] = xv.x, smem_x[stage][load_col + 1][r] = xv.y;
      smem_x[stage][load_col + 2][r] = xv.z, smem_x[stage][load_col + 3][r] = xv.w;
      smem_gate[stage][load_col + 0][r] = gv.x, smem_gate[stage][load_col + 1][r] = gv.y;
      smem_gate[stage][load_col + 2][r] = gv.z, smem_gate[stage][load_col + 3][r] = gv.w;
    }
  };

  float acc[kPerThread][kPerThread] = {};
  load(d_begin);
  store(0);
  __syncthreads();
  int stage = 0;
  for (int d0 = d_begin; d0 < d_end; d0 += kTileK) {
    const bool more = d0 + kTileK < d_end;
    if (more) load(d0 + kTileK);
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[kPerThread], b[kPerThread];
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        const float4 av = *reinterpret_cast<const float4*>(&smem_x[stage][kk][64 * h + 4 * ty]);
        const float4 bv = *reinterpret_cast<const float4*>(&smem_gate[stage][kk][64 * h + 4 * tx]);
        a[4 * h] = av.x, a[4 * h + 1] = av.y, a[4 * h + 2] = av.z, a[4 * h + 3] = av.w;
        b[4 * h] = bv.x, b[4 * h + 1] = bv.y, b[4 * h + 2] = bv.z, b[4 * h + 3] = bv.w;
      }
#pragma unroll
      for (int i = 0; i < kPerThread; ++i)
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (more) store(stage ^ 1);
    __syncthreads();
    stage ^= 1;
  }
  float* out = p.logits + int64_t{blockIdx.z} * p.n_tokens * p.n_experts;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int t = t0 + 64 * (i / 4) + 4 * ty + i % 4;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int e = e0 + 64 * (j / 4) + 4 * tx + j % 4;
      if (t < p.n_tokens && e < p.n_experts) out[int64_t{t} * p.n_experts + e] = acc[i][j];
    }
  }
}

template <int kTile>
void launch_logits(const RouterParams& p, cudaStream_t stream) {
  const dim3 grid((p.n_experts + kTile - 1) / kTile, (p.n_tokens + kTile - 1) / kTile,
                  p.logits_splits);
  router_logits_kernel<kTile><<<grid, kLogitThreads, 0, stream>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
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
  if (threadIdx.x < 32) {
    const int64_t entry = int64_t{t} * (p.k_used + 1);
    select_experts(p, smem_score, p.bias, t, lane, p.counts, p.sel_expert + entry,
                   p.sel_weight + entry);
  }
}

}  // namespace

void launch_router(const RouterParams& p, cudaStream_t stream) {
  // K < 32: select_experts leaves slot k to lane k and the shared slot K to lane K.
  DSV4_CHECK(p.dim % (kTileK * p.logits_splits) == 0 && p.n_experts <= 32 * kMaxExpertsPerLane &&
                 p.k_used < 32,
             "router: D %d, splits %d, E %d, K %d", p.dim, p.logits_splits, p.n_experts,
             p.k_used);
  if (router_logit_tile(p.n_tokens) == 128) {
    launch_logits<128>(p, stream);
  } else {
    launch_logits<64>(p, stream);
  }
  router_select_kernel<<<p.n_tokens, kSelectThreads, 0, stream>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dsv4::kernels::cuda::moe
