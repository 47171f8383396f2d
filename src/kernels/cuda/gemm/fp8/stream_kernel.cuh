// fp8_stream_gemm_sm90: the block-scaled FP8 GEMM at decode sizes (M ≤ 64), written as a stream
// of the weights (README.md, "Small M"): one launch, the weights read once with non-caching
// 16-byte loads, several K blocks' loads in flight per lane, no split-K atomics.
//
// Work. A CTA owns 16 weight rows (the MMA's M: swap-AB, tokens are the n8 columns) and computes
// their outputs for every token; its kWarps warps take K blocks warp, warp + kWarps, … and meet
// in shared memory, added in warp order (deterministic). Per K block a warp runs 4 mma.sync
// m16n8k32 per 8-token chunk into a fresh partial sum and promotes it as the contract says:
// acc = fma(a_scale[token] · b_scale, partial, acc).
//
// K order inside a block. Lane (g, c) = (lane / 4, lane % 4) loads the 32 bytes [32 c, 32 c + 32)
// of the block for weight rows g and g + 8 (the 4 lanes of a row read its 128 contiguous
// bytes), and the same 32 bytes of token g's row. MMA q (0..3) takes bytes [8 q, 8 q + 8) of
// each: its K is a permutation of the block's, the same for both operands, so the sum is the
// block's.
//
// Dimension letters: M tokens (rows of A and D), N weight rows, K, Kb = ceil(K/128).
#pragma once

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

template <int kWarps, int kChunks>
__global__ void __launch_bounds__(kWarps * 32)
    fp8_stream_gemm_sm90_kernel(const __grid_constant__ Fp8GemmParams p) {
  static_assert(kWarps * kChunks <= 32, "the reduction's shared memory: ≤ 16 KB");
  static_assert(kChunks * 8 <= kFp8StreamMaxTokens, "tokens are kChunks n8 chunks");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int64_t n0 = int64_t{blockIdx.x} * kFp8StreamRows;
  const int k_blocks = static_cast<int>((p.k + kFp8TileK - 1) / kFp8TileK);
  // Rows past N read row N - 1 and tokens past M token M - 1: their outputs are never stored.
  const uint8_t* w_row0 = p.b + min(n0 + g, p.n - 1) * p.ldb + 32 * c;
  const uint8_t* w_row1 = p.b + min(n0 + g + 8, p.n - 1) * p.ldb + 32 * c;
  const float* b_scales = p.b_scales + (n0 / kFp8TileN) * k_blocks;

  float acc[kChunks][4];
#pragma unroll
  for (int q = 0; q < kChunks; ++q) acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0.0f;

  for (int kb0 = warp; kb0 < k_blocks; kb0 += kWarps * kFp8StreamBatch) {
    uint4 w0[kFp8StreamBatch][2], w1[kFp8StreamBatch][2];
#pragma unroll
    for (int i = 0; i < kFp8StreamBatch; ++i) {
      const int64_t column = int64_t{kb0 + i * kWarps} * kFp8TileK + 32 * c;
      const int64_t k_end = kb0 + i * kWarps < k_blocks ? p.k : 0;
      fp8_load32<true>(w_row0 + column - 32 * c, column, k_end, w0[i]);
      fp8_load32<true>(w_row1 + column - 32 * c, column, k_end, w1[i]);
    }
#pragma unroll
    for (int i = 0; i < kFp8StreamBatch; ++i) {
      const int kb = kb0 + i * kWarps;
      if (kb >= k_blocks) break;
      const float b_scale = b_scales[kb];
      const int64_t column = int64_t{kb} * kFp8TileK + 32 * c;
#pragma unroll
      for (int q = 0; q < kChunks; ++q) {
        uint4 x[2];
        const int64_t token = min(int64_t{8 * q + g}, p.m - 1);
        fp8_load32<false>(p.a + token * p.k + column, column, p.k, x);
        const int64_t t0 = min(int64_t{8 * q + 2 * c}, p.m - 1);
        const int64_t t1 = min(int64_t{8 * q + 2 * c + 1}, p.m - 1);
        fp8_stream_block(w0[i], w1[i], x, p.a_scales[t0 * k_blocks + kb] * b_scale,
                         p.a_scales[t1 * k_blocks + kb] * b_scale, acc[q]);
      }
    }
  }

  // Warp partials [warp][16 rows][8 kChunks tokens], then summed in warp order per output.
  __shared__ float smem_partial[kWarps][kFp8StreamRows][kChunks * 8];
#pragma unroll
  for (int q = 0; q < kChunks; ++q) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      smem_partial[warp][g + 8 * (e / 2)][8 * q + 2 * c + e % 2] = acc[q][e];
  }
  __syncthreads();
  for (int o = threadIdx.x; o < kFp8StreamRows * kChunks * 8; o += kWarps * 32) {
    const int row = o % kFp8StreamRows, token = o / kFp8StreamRows;
    if (token >= p.m || n0 + row >= p.n) continue;
    float sum = smem_partial[0][row][token];
    for (int w = 1; w < kWarps; ++w) sum += smem_partial[w][row][token];
    p.d[token * p.ldd + n0 + row] = sum;
  }
}

}  // namespace dsv4::kernels::cuda::sm90
