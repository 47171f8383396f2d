// fp8_ws_gemm_sm90: the block-scaled FP8 GEMM for many rows (README.md, "Large M"), after the
// design of DeepGEMM's sm90 FP8 GEMM: TMA loads, a warp-specialised producer/consumer ring,
// wgmma e4m3 × e4m3 → f32, and the promotion of every 128-column block's partial sum into an
// f32 accumulator with the two block scales.
//
// A CTA tile is kTileM tokens (wgmma's M: two consumer warpgroups of kTileM / 2, one or two
// m64 halves each) × 128 weight rows (wgmma's N: one row of B's block scales), walked
// persistently. A stage is one 128-column K block of both operands: two TMA boxes of kTileM and
// 128 rows × 128 bytes in the 128-byte swizzle, exactly what wgmma's descriptors read.
//
//   warpgroup 0 (producer, 40 registers): one thread waits for a free slot (`empty`), announces
//     the stage's bytes on `full` and issues the two TMA copies; the ring runs ahead across tiles,
//     so the next tile's loads overlap this tile's epilogue.
//   warpgroups 1, 2 (consumers, 232 registers): per K block wait `full`, then per m64 half
//     issue 4 × wgmma m64n128k32 into a fresh partial sum, wait for them and promote:
//     acc = fma(a_scale[row] · b_scale, partial, acc); after the last half free the slot. One
//     consumer's promotion overlaps the other's wgmma, which keeps the tensor cores fed.
//
// Groups (params.h): a 128-row tile lies in one group; its A boxes start at the group's column
// g·K and its scales at g·Kb, so G groups are one persistent launch over all G·R rows' tiles.
//
// Dimension letters: M tokens (rows of A and D), N weight rows, K, Kb = ceil(K/128).
#pragma once

#include <cuda.h>  // CUtensorMap (a type only: nothing links libcuda)

#include <cstdint>

#include "kernels/cuda/device/fp8_mma.cuh"
#include "kernels/cuda/device/sm90_ptx.cuh"
#include "kernels/cuda/gemm/fp8/config.h"
#include "kernels/cuda/gemm/fp8/params.h"

namespace dsv4::kernels::cuda::sm90 {

struct Fp8TileCoord {
  int64_t m0;  // first token
  int64_t n0;  // first weight row
};

// Tile t of the persistent walk: token tiles kFp8Panel at a time, weight tiles inside a panel,
// so the CTAs running at once share a few token tiles and a band of weights, both in L2.
template <int kTileM>
__device__ __forceinline__ Fp8TileCoord fp8_tile(int64_t t, int64_t m_tiles, int64_t n_tiles) {
  const int64_t per_panel = kFp8Panel * n_tiles;
  const int64_t panel = t / per_panel, in_panel = t - panel * per_panel;
  const int64_t width = min(int64_t{kFp8Panel}, m_tiles - panel * kFp8Panel);
  return {(panel * kFp8Panel + in_panel % width) * kTileM, (in_panel / width) * kFp8TileN};
}

struct Fp8WsShape {
  int64_t m_tiles, n_tiles;
  int k_blocks;
};

// ---- producer: thread 0 of warpgroup 0 ----
template <int kTileM>
__device__ __forceinline__ void fp8_ws_produce(const Fp8GemmParams& p, const Fp8WsShape& shape,
                                               const void* a_map, const void* b_map,
                                               uint8_t* smem_ring, uint64_t* full,
                                               uint64_t* empty) {
  constexpr int kStages = fp8_stages(kTileM), kStageBytes = fp8_stage_bytes(kTileM);
  uint32_t it = 0;
  for (int64_t tile = blockIdx.x; tile < shape.m_tiles * shape.n_tiles; tile += gridDim.x) {
    const Fp8TileCoord c = fp8_tile<kTileM>(tile, shape.m_tiles, shape.n_tiles);
    const int a_column = static_cast<int>(fp8_group_offsets(p, shape.k_blocks, c.n0).a_column);
    for (int kb = 0; kb < shape.k_blocks; ++kb, ++it) {
      const int slot = it % kStages;
      mbar_wait(&empty[slot], ((it / kStages) & 1) ^ 1);
      uint8_t* stage = smem_ring + slot * kStageBytes;
      mbar_arrive_expect_tx(&full[slot], kStageBytes);  // boxes count whole, zero fill too
      tma_load_2d(stage, a_map, &full[slot], a_column + kb * kFp8TileK, static_cast<int>(c.m0));
      tma_load_2d(stage + kTileM * kFp8TileK, b_map, &full[slot], kb * kFp8TileK,
                  static_cast<int>(c.n0));
    }
  }
}

// ---- consumer: the K loop of one tile ----
// Thread (warpgroup g, warp w, lane l) holds, for each m64 half h, tokens
// m0 + kTileM/2 · g + 64 h + 16 w + l/4 (+ 8) and weight columns n0 + 8 j + 2 (l%4) + {0, 1} of
// wgmma's accumulator layout (fp8_mma.cuh).
template <int kTileM>
__device__ __forceinline__ int64_t fp8_first_row(const Fp8TileCoord& c, int group, int half) {
  return c.m0 + kTileM / 2 * group + 64 * half + 16 * ((threadIdx.x / 32) % 4) +
         threadIdx.x % 32 / 4;
}

template <int kTileM>
__device__ __forceinline__ void fp8_ws_tile_k_loop(const Fp8GemmParams& p, const Fp8WsShape& shape,
                                                   const Fp8TileCoord& c, int group,
                                                   const uint8_t* smem_ring, uint64_t* full,
                                                   uint64_t* empty, uint32_t& it,
                                                   float (&acc)[kTileM / 128][64]) {
  constexpr int kHalves = kTileM / 128, kStages = fp8_stages(kTileM);
  constexpr int kStageBytes = fp8_stage_bytes(kTileM);
  // Rows past M hold zeros (TMA's fill); their scale is read from row M - 1 and never stored.
  const Fp8GroupOffsets offsets = fp8_group_offsets(p, shape.k_blocks, c.n0);
  const float* a_scales = p.a_scales + offsets.a_scales_column;
  const float* a_scale[kHalves][2];
  float next_a[kHalves][2];
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    const int64_t row = fp8_first_row<kTileM>(c, group, h);
    a_scale[h][0] = a_scales + min(row, p.m - 1) * offsets.a_scales_stride;
    a_scale[h][1] = a_scales + min(row + 8, p.m - 1) * offsets.a_scales_stride;
    next_a[h][0] = a_scale[h][0][0], next_a[h][1] = a_scale[h][1][0];
  }
  const float* b_scale = p.b_scales + (c.n0 / kFp8TileN) * shape.k_blocks;
  float next_b = b_scale[0];
  float partial[64];
  for (int kb = 0; kb < shape.k_blocks; ++kb, ++it) {
    float scale[kHalves][2];
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      scale[h][0] = next_a[h][0] * next_b, scale[h][1] = next_a[h][1] * next_b;
    }
    if (kb + 1 < shape.k_blocks) {  // the next block's scales load under this block's wgmma
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        next_a[h][0] = a_scale[h][0][kb + 1], next_a[h][1] = a_scale[h][1][kb + 1];
      }
      next_b = b_scale[kb + 1];
    }
    const int slot = it % kStages;
    mbar_wait(&full[slot], (it / kStages) & 1);
    const uint8_t* stage = smem_ring + slot * kStageBytes;
    const uint8_t* b_tile = stage + kTileM * kFp8TileK;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      const uint8_t* a_tile = stage + (kTileM / 2 * group + 64 * h) * kFp8TileK;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kFp8TileK / 32; ++kk) {
        wgmma_m64n128k32_e4m3(partial, smem_descriptor(a_tile + 32 * kk),
                              smem_descriptor(b_tile + 32 * kk), kk > 0 ? 1 : 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_operands(partial);
      if (h == kHalves - 1 && threadIdx.x % 32 == 0) mbar_arrive(&empty[slot]);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        acc[h][4 * j + 0] = fmaf(scale[h][0], partial[4 * j + 0], acc[h][4 * j + 0]);
        acc[h][4 * j + 1] = fmaf(scale[h][0], partial[4 * j + 1], acc[h][4 * j + 1]);
        acc[h][4 * j + 2] = fmaf(scale[h][1], partial[4 * j + 2], acc[h][4 * j + 2]);
        acc[h][4 * j + 3] = fmaf(scale[h][1], partial[4 * j + 3], acc[h][4 * j + 3]);
      }
    }
  }
}

// D[row, n] = acc, two adjacent n a store where D's rows allow.
__device__ __forceinline__ void fp8_ws_store(const Fp8GemmParams& p, int64_t n0, int64_t row0,
                                             const float (&acc)[64]) {
  const int lane = threadIdx.x % 32;
  const bool pairs = p.ldd % 2 == 0 && reinterpret_cast<uintptr_t>(p.d) % 8 == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = row0 + 8 * h;
    if (row >= p.m) continue;
    float* d_row = p.d + row * p.ldd;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int64_t n = n0 + 8 * j + 2 * (lane % 4);
      const float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
      if (pairs && n + 1 < p.n) {
        *reinterpret_cast<float2*>(d_row + n) = make_float2(v0, v1);
      } else {
        if (n < p.n) d_row[n] = v0;
        if (n + 1 < p.n) d_row[n + 1] = v1;
      }
    }
  }
}

template <int kTileM>
__device__ __forceinline__ void fp8_ws_consume(const Fp8GemmParams& p, const Fp8WsShape& shape,
                                               const uint8_t* smem_ring, uint64_t* full,
                                               uint64_t* empty) {
  constexpr int kHalves = kTileM / 128;
  const int group = threadIdx.x / 128 - 1;
  float acc[kHalves][64];
  uint32_t it = 0;
  for (int64_t tile = blockIdx.x; tile < shape.m_tiles * shape.n_tiles; tile += gridDim.x) {
    const Fp8TileCoord c = fp8_tile<kTileM>(tile, shape.m_tiles, shape.n_tiles);
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[h][i] = 0.0f;
    }
    fp8_ws_tile_k_loop<kTileM>(p, shape, c, group, smem_ring, full, empty, it, acc);
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      fp8_ws_store(p, c.n0, fp8_first_row<kTileM>(c, group, h), acc[h]);
    }
  }
}

// a_map: A e4m3 [M, G·K], b_map: B e4m3 [N, K] at row stride ldb; boxes of kTileM and 128 rows ×
// 128 bytes in the 128-byte swizzle, zero fill past the edges (launch.cu encodes them).
template <int kTileM>
__global__ void __launch_bounds__(kFp8WsThreads, 1)
    fp8_ws_gemm_sm90_kernel(const __grid_constant__ Fp8GemmParams p,
                            const __grid_constant__ CUtensorMap a_map,
                            const __grid_constant__ CUtensorMap b_map) {
  static_assert(kTileM == 128 || kTileM == 256, "a consumer warpgroup holds one or two m64 halves");
  static_assert(kFp8TileK == 128 && kFp8TileN == 128,
                "a stage is one 128-byte swizzle row of K per operand row; wgmma N is 128");
  static_assert(kFp8WsThreads == 3 * 128, "a producer and two consumer warpgroups");
  constexpr int kStages = fp8_stages(kTileM);
  extern __shared__ uint8_t smem_bytes[];
  // Aligned by an offset from the shared array, so the compiler keeps the shared address space.
  const uint32_t misalignment = smem_addr(smem_bytes) % kFp8SmemAlign;
  uint8_t* smem_ring = smem_bytes + (misalignment == 0 ? 0 : kFp8SmemAlign - misalignment);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem_ring + kStages * fp8_stage_bytes(kTileM));
  uint64_t* empty = full + kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);   // the producer's expect_tx arrival
      mbar_init(&empty[s], 8);  // one arrival per consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();
  const Fp8WsShape shape{(p.m + kTileM - 1) / kTileM, (p.n + kFp8TileN - 1) / kFp8TileN,
                         static_cast<int>((p.k + kFp8TileK - 1) / kFp8TileK)};
  if (threadIdx.x < 128) {
    setmaxnreg_dec<kFp8ProducerRegs>();
    if (threadIdx.x == 0) fp8_ws_produce<kTileM>(p, shape, &a_map, &b_map, smem_ring, full, empty);
  } else {
    setmaxnreg_inc<kFp8ConsumerRegs>();
    fp8_ws_consume<kTileM>(p, shape, smem_ring, full, empty);
  }
}

}  // namespace dsv4::kernels::cuda::sm90
