// fp8_stream_gemm_sm90: the block-scaled FP8 GEMM at decode sizes (M ≤ 64), written as a stream
// of the weights (README.md, "Small M"): one launch, the weights read once with non-caching
// 16-byte loads, several K blocks' loads in flight per lane, no atomics.
//
// Work. A tile of 16 weight rows (the MMA's M: swap-AB, tokens are the n8 columns) belongs to
// a cluster of S CTAs (S = 1, 2, 4 or 8, the launch's cluster size), whose S · kWarps warps take
// its K blocks in turn: warp w of CTA r, global warp r · kWarps + w, takes blocks gw,
// gw + S · kWarps, … Per K block a warp runs 4 mma.sync m16n8k32 per 8-token chunk into a fresh
// partial sum and promotes it as the contract says: acc = fma(a_scale[token] · b_scale,
// partial, acc). The warps' sums meet in shared memory; with S > 1 the cluster's CTAs read each
// other's through distributed shared memory, each finishing a share of the tile's outputs. Every
// output adds its S · kWarps partials in global warp order whichever CTA adds them, so the bits
// are a function of the plan alone (deterministic, no atomics). Splitting K over a cluster puts
// a narrow weight's few tiles on more SMs: 64 tiles (wq_a) on 128 CTAs.
//
// K order inside a block. Lane (g, c) = (lane / 4, lane % 4) loads the 32 bytes [32 c, 32 c + 32)
// of the block for weight rows g and g + 8 (the 4 lanes of a row read its 128 contiguous
// bytes), and the same 32 bytes of token g's row. MMA q (0..3) takes bytes [8 q, 8 q + 8) of
// each: its K is a permutation of the block's, the same for both operands, so the sum is the
// block's.
//
// Groups (params.h): a tile lies in one group, whose A columns and scales it reads.
//
// Dimension letters: M tokens (rows of A and D), N weight rows, K, Kb = ceil(K/128), S CTAs of
// a cluster.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/cuda/device/fp8_mma.cuh"
#include "kernels/cuda/device/mma_sync.cuh"
#include "kernels/cuda/gemm/fp8/config.h"
#include "kernels/cuda/gemm/fp8/params.h"

namespace dsv4::kernels::cuda::sm90 {

// The 32 bytes of one row at `bytes` as two 16-byte loads, zero past column k_end (K is a
// multiple of 16, so a 16-byte piece is all in or all out).
template <bool kWeights>
__device__ __forceinline__ void fp8_load32(const uint8_t* bytes, int64_t column, int64_t k_end,
                                           uint4 (&out)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (column + 16 * h < k_end) {
      if constexpr (kWeights) {
        out[h] = load_weights_once(bytes + 16 * h);
      } else {
        out[h] = *reinterpret_cast<const uint4*>(bytes + 16 * h);
      }
    } else {
      out[h] = make_uint4(0, 0, 0, 0);
    }
  }
}

// One K block of one 8-token chunk: partial = Σ over the block (4 MMAs), then promoted.
// w0, w1: this lane's 32 bytes of rows g and g + 8; x: token g's.
__device__ __forceinline__ void fp8_stream_block(const uint4 (&w0)[2], const uint4 (&w1)[2],
                                                 const uint4 (&x)[2], float scale_t0,
                                                 float scale_t1, float (&acc)[4]) {
  const uint32_t w0_words[8] = {w0[0].x, w0[0].y, w0[0].z, w0[0].w,
                                w0[1].x, w0[1].y, w0[1].z, w0[1].w};
  const uint32_t w1_words[8] = {w1[0].x, w1[0].y, w1[0].z, w1[0].w,
                                w1[1].x, w1[1].y, w1[1].z, w1[1].w};
  const uint32_t x_words[8] = {x[0].x, x[0].y, x[0].z, x[0].w, x[1].x, x[1].y, x[1].z, x[1].w};
  float partial[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint32_t a[4] = {w0_words[2 * q], w1_words[2 * q], w0_words[2 * q + 1],
                           w1_words[2 * q + 1]};
    mma_e4m3_16832(partial, a, x_words[2 * q], x_words[2 * q + 1], partial);
  }
  acc[0] = fmaf(scale_t0, partial[0], acc[0]);
  acc[1] = fmaf(scale_t1, partial[1], acc[1]);
  acc[2] = fmaf(scale_t0, partial[2], acc[2]);
  acc[3] = fmaf(scale_t1, partial[3], acc[3]);
}

// The tile's outputs from the partial sums of every warp of the cluster: output o = (row,
// token) of [16 rows][8 kChunks tokens] is finished by CTA o % S (thread o / S of it, in steps),
// adding the S · kWarps partials in global warp order.
template <int kWarps, int kChunks>
__device__ __forceinline__ void fp8_stream_store(
    const Fp8GemmParams& p, int64_t n0,
    float (&smem_partial)[kWarps][kFp8StreamRows][kChunks * 8]) {
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int split = static_cast<int>(cluster.num_blocks()), rank = cluster.block_rank();
  for (int o = rank + split * threadIdx.x; o < kFp8StreamRows * kChunks * 8;
       o += split * kWarps * 32) {
    const int row = o % kFp8StreamRows, token = o / kFp8StreamRows;
    if (token >= p.m || n0 + row >= p.n) continue;
    float sum = 0.0f;
    for (int r = 0; r < split; ++r) {
      const float(*partial)[kFp8StreamRows][kChunks * 8] =
          split == 1 ? smem_partial : cluster.map_shared_rank(smem_partial, r);
      for (int w = 0; w < kWarps; ++w) sum += partial[w][row][token];
    }
    p.d[token * p.ldd + n0 + row] = sum;
  }
}

template <int kWarps, int kChunks>
__global__ void __launch_bounds__(kWarps * 32)
    fp8_stream_gemm_sm90_kernel(const __grid_constant__ Fp8GemmParams p) {
  static_assert(kWarps * kChunks <= 32, "the reduction's shared memory: ≤ 16 KB");
  static_assert(kChunks * 8 <= kFp8StreamMaxTokens, "tokens are kChunks n8 chunks");
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int split = static_cast<int>(cluster.num_blocks());
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int first_warp = static_cast<int>(cluster.block_rank()) * kWarps + warp;
  const int warp_stride = split * kWarps;
  const int64_t n0 = int64_t{blockIdx.x / split} * kFp8StreamRows;
  const int k_blocks = static_cast<int>((p.k + kFp8TileK - 1) / kFp8TileK);
  // The tile's group's columns of A (params.h); the strides fit 32 bits (launch.cu checks).
  const Fp8GroupOffsets group = fp8_group_offsets(p, k_blocks, n0);
  const int a_stride = static_cast<int>(group.a_stride);
  const int a_scales_stride = static_cast<int>(group.a_scales_stride);
  // Rows past N read row N - 1 and tokens past M token M - 1: their outputs are never stored.
  const uint8_t* w_row0 = p.b + min(n0 + g, p.n - 1) * p.ldb + 32 * c;
  const uint8_t* w_row1 = p.b + min(n0 + g + 8, p.n - 1) * p.ldb + 32 * c;
  const float* b_scales = p.b_scales + (n0 / kFp8TileN) * k_blocks;
  const uint8_t* a = p.a + group.a_column;
  const float* a_scales = p.a_scales + group.a_scales_column;

  float acc[kChunks][4];
#pragma unroll
  for (int q = 0; q < kChunks; ++q) acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0.0f;

  for (int kb0 = first_warp; kb0 < k_blocks; kb0 += warp_stride * kFp8StreamBatch) {
    uint4 w0[kFp8StreamBatch][2], w1[kFp8StreamBatch][2];
#pragma unroll
    for (int i = 0; i < kFp8StreamBatch; ++i) {
      const int64_t column = int64_t{kb0 + i * warp_stride} * kFp8TileK + 32 * c;
      const int64_t k_end = kb0 + i * warp_stride < k_blocks ? p.k : 0;
      fp8_load32<true>(w_row0 + column - 32 * c, column, k_end, w0[i]);
      fp8_load32<true>(w_row1 + column - 32 * c, column, k_end, w1[i]);
    }
#pragma unroll
    for (int i = 0; i < kFp8StreamBatch; ++i) {
      const int kb = kb0 + i * warp_stride;
      if (kb >= k_blocks) break;
      const float b_scale = b_scales[kb];
      const int64_t column = int64_t{kb} * kFp8TileK + 32 * c;
#pragma unroll
      for (int q = 0; q < kChunks; ++q) {
        uint4 x[2];
        const int last = static_cast<int>(p.m) - 1;  // M ≤ 64
        const int token = min(8 * q + g, last);
        fp8_load32<false>(a + token * a_stride + column, column, p.k, x);
        const int t0 = min(8 * q + 2 * c, last), t1 = min(8 * q + 2 * c + 1, last);
        fp8_stream_block(w0[i], w1[i], x, a_scales[t0 * a_scales_stride + kb] * b_scale,
                         a_scales[t1 * a_scales_stride + kb] * b_scale, acc[q]);
      }
    }
  }

  // Warp partials [warp][16 rows][8 kChunks tokens], then summed in global warp order.
  __shared__ float smem_partial[kWarps][kFp8StreamRows][kChunks * 8];
#pragma unroll
  for (int q = 0; q < kChunks; ++q) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      smem_partial[warp][g + 8 * (e / 2)][8 * q + 2 * c + e % 2] = acc[q][e];
  }
  if (split == 1) {
    __syncthreads();
    fp8_stream_store<kWarps, kChunks>(p, n0, smem_partial);
  } else {
    cluster.sync();  // every CTA's partials written and visible to the cluster
    fp8_stream_store<kWarps, kChunks>(p, n0, smem_partial);
    cluster.sync();  // no CTA leaves while another may still read its partials
  }
}

}  // namespace dsv4::kernels::cuda::sm90
