// nvfp4_small_m_sm90: the decode-sized NVFP4 GEMM (≤ 64 rows per group per pass), memory-bound
// on the weights. Swap-AB: each warp computes D[tokens, 16 weight rows]ᵀ with mma.sync
// m16n8k16, the weights as the row-major A operand decoded straight from registers (never
// staged in shared memory), the tokens as the B operand from a swizzled shared-memory copy of
// the CTA's K slice. K is split over the grid; partial sums are reduced with f32 atomics into a
// zeroed accumulator (README.md).
//
// K permutation: an mma k16 step may consume any 16 K indices as long as A and B agree. Thread
// (g = lane/4, t = lane%4) owns the 32 consecutive codes [32 t, 32 t + 32) of its two rows in a
// 128-wide chunk (one 16-byte load per row); in step s it supplies physical K 32 t + 4 s + {0,1}
// as logical {2t, 2t+1} and 32 t + 4 s + {2,3} as {2t+8, 2t+9}, and reads the same K of its
// token g from shared memory.
//
// Dimension letters: T tokens, N weight rows, K input features, G groups.
#pragma once

#include <cstdint>

#include "kernels/cuda/gemm/nvfp4/config.h"
#include "kernels/cuda/device/nvfp4_decode.cuh"
#include "kernels/cuda/gemm/nvfp4/params.h"
#include "kernels/cuda/device/sm90_ptx.cuh"
#include "kernels/cuda/gemm/nvfp4/tile_table.cuh"

namespace dsv4::kernels::cuda::sm90 {

// Shared-memory byte offset of 16-byte unit c (0..15) of 128-element chunk `chunk` of token
// `token`. XOR-ing bit 1 with c's bit 3 and bit 0 with the token's parity makes the 8 lanes of
// a quarter warp (g in {0,1}, t in 0..3, same j) hit 8 distinct bank groups.
__device__ __forceinline__ int small_swizzle(int token, int chunk, int c, int row_bytes) {
  const int physical = c ^ ((c >> 3) << 1) ^ (token & 1);
  return token * row_bytes + chunk * 256 + physical * 16;
}

// Tokens [tok0, tok0 + n_tok) × K [k0, k0 + n_chunks·128) of A into shared memory, zeros outside.
template <int kTiles>
__device__ __forceinline__ void load_tokens(const Nvfp4GemmParams& p, int tok0, int n_tok,
                                            int k0, int n_chunks, uint8_t* smem_tokens) {
  const int row_bytes = n_chunks * 256, units = kTiles * 8 * n_chunks * 16;
  for (int u = threadIdx.x; u < units; u += kSmallThreads) {
    const int token = u / (n_chunks * 16), chunk = (u / 16) % n_chunks, c = u % 16;
    const int col = k0 + chunk * kSmallChunk + c * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (token < n_tok && col < p.k) {
      v = *reinterpret_cast<const uint4*>(p.a + (int64_t)(tok0 + token) * p.lda + col);
    }
    *reinterpret_cast<uint4*>(smem_tokens + small_swizzle(token, chunk, c, row_bytes)) = v;
  }
}

// One 128-wide chunk: 8 k16 steps of mma for each live token tile.
template <int kTiles>
__device__ __forceinline__ void mma_chunk(const uint4& codes_lo, const uint4& codes_hi,
                                          uint32_t scales_lo, uint32_t scales_hi,
                                          const uint8_t* smem_tokens, int chunk, int row_bytes,
                                          int live_tiles, float (&acc)[kTiles][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const uint32_t lo_words[4] = {codes_lo.x, codes_lo.y, codes_lo.z, codes_lo.w};
  const uint32_t hi_words[4] = {codes_hi.x, codes_hi.y, codes_hi.z, codes_hi.w};
  const uint32_t scale_lo[2] = {ue4m3_to_bf16x2(scales_lo & 0xffu), ue4m3_to_bf16x2(scales_lo >> 8)};
  const uint32_t scale_hi[2] = {ue4m3_to_bf16x2(scales_hi & 0xffu), ue4m3_to_bf16x2(scales_hi >> 8)};
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    uint32_t a[4], row_g[2], row_g8[2];
    decode4((lo_words[s / 2] >> (16 * (s % 2))) & 0xffffu, scale_lo[s / 4], row_g);
    decode4((hi_words[s / 2] >> (16 * (s % 2))) & 0xffffu, scale_hi[s / 4], row_g8);
    a[0] = row_g[0];
    a[1] = row_g8[0];
    a[2] = row_g[1];
    a[3] = row_g8[1];
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
      if (tile >= live_tiles) break;
      const int token = tile * 8 + g;
      const uint2 b = *reinterpret_cast<const uint2*>(
          smem_tokens + small_swizzle(token, chunk, 4 * t + s / 2, row_bytes) + (s % 2) * 8);
      mma_bf16_16816(acc[tile], a, b.x, b.y);
    }
  }
}

// accum[token, n] += alpha · acc: thread (g, t) holds rows n0+g (d0, d1) and n0+g+8 (d2, d3) for
// tokens 8 tile + 2t (d0, d2) and 8 tile + 2t + 1 (d1, d3).
template <int kTiles>
__device__ __forceinline__ void reduce_tokens(const Nvfp4GemmParams& p, int tok0, int n_tok,
                                              int n0, float alpha, const float (&acc)[kTiles][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t ld = p.accum == p.d ? p.ldd : p.n;
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int token = tile * 8 + 2 * t + (i % 2), n = n0 + g + 8 * (i / 2);
      if (token < n_tok && n < p.n) {
        atomicAdd(p.accum + (int64_t)(tok0 + token) * ld + n, alpha * acc[tile][i]);
      }
    }
  }
}

template <int kTiles>
__global__ void __launch_bounds__(kSmallThreads)
    nvfp4_small_m_sm90_kernel(const __grid_constant__ Nvfp4GemmParams p, int n_chunks) {
  static_assert(kTiles >= 1 && kTiles <= kSmallMaxTiles, "1..8 token tiles of 8");
  static_assert(kSmallChunk == 4 * 32, "4 threads × 32 codes per row and chunk");
  extern __shared__ __align__(16) uint8_t smem_tokens[];
  __shared__ int s_offsets[kMaxGroups + 1];
  __shared__ int s_group;

  const int n_groups = p.offsets == nullptr ? 1 : p.n_groups;
  load_group_offsets(p, s_offsets);
  const int g = find_nonempty_group(s_offsets, n_groups, blockIdx.z, &s_group);
  if (g < 0) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, t = lane % 4;
  const int n0 = blockIdx.x * kSmallRows + warp * 16;
  const int k0 = blockIdx.y * n_chunks * kSmallChunk;
  const int row_bytes = n_chunks * 256;
  const float alpha = p.a_global != nullptr ? p.a_global[0] * p.b_global[g] : p.b_global[g];
  const int64_t packed_row = p.kp / 2, scale_row = p.kp / 16;
  const int64_t row_a = (int64_t)g * p.n + min(n0 + gid, p.n - 1);
  const int64_t row_b = (int64_t)g * p.n + min(n0 + gid + 8, p.n - 1);

  for (int tok0 = s_offsets[g]; tok0 < s_offsets[g + 1]; tok0 += kTiles * 8) {
    const int n_tok = min(kTiles * 8, s_offsets[g + 1] - tok0);
    const int live_tiles = (n_tok + 7) / 8;
    __syncthreads();  // the previous pass is done reading the token slice
    load_tokens<kTiles>(p, tok0, n_tok, k0, n_chunks, smem_tokens);
    __syncthreads();
    float acc[kTiles][4] = {};
    for (int batch = 0; batch < n_chunks; batch += kSmallBatch) {
      uint4 codes[kSmallBatch][2];
      uint32_t scales[kSmallBatch][2];
#pragma unroll
      for (int i = 0; i < kSmallBatch; ++i) {
        const int64_t kc = k0 / kSmallChunk + batch + i;
        const bool live = batch + i < n_chunks && kc * kSmallChunk + 32 * t < p.kp;
        const int64_t code_offset = kc * 64 + 16 * t, scale_offset = kc * 8 + 2 * t;
        codes[i][0] = live ? load_weights_once<false>(p.b_packed + row_a * packed_row + code_offset)
                           : make_uint4(0, 0, 0, 0);
        codes[i][1] = live ? load_weights_once<false>(p.b_packed + row_b * packed_row + code_offset)
                           : make_uint4(0, 0, 0, 0);
        scales[i][0] = live ? *reinterpret_cast<const uint16_t*>(p.b_scale + row_a * scale_row +
                                                                 scale_offset) : 0u;
        scales[i][1] = live ? *reinterpret_cast<const uint16_t*>(p.b_scale + row_b * scale_row +
                                                                 scale_offset) : 0u;
      }
#pragma unroll
      for (int i = 0; i < kSmallBatch; ++i) {
        if (batch + i >= n_chunks) break;
        mma_chunk<kTiles>(codes[i][0], codes[i][1], scales[i][0], scales[i][1], smem_tokens,
                          batch + i, row_bytes, live_tiles, acc);
      }
    }
    reduce_tokens<kTiles>(p, tok0, n_tok, n0, alpha, acc);
  }
}

}  // namespace dsv4::kernels::cuda::sm90
