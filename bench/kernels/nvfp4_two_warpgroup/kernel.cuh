// nvfp4_dequant_gemm_sm90: the large-M NVFP4 GEMM the warp-specialised kernel replaced (the
// library's gemm/nvfp4/README.md says how they differ), kept for nvfp4_gemm_bench to time beside
// it. A persistent grid walks the output tiles of all groups; per tile, two warpgroups run bf16
// wgmma on 128-byte-swizzled shared memory while every thread decodes the next K step's NVFP4
// weights from a raw cp.async ring into bf16.
//
// Dimension letters: T rows of A and D, N output features, K input features (Kp padded),
// G groups. Tile: kTileM rows × kBN columns × kTileK.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "config.h"
#include "kernels/cuda/device/nvfp4_decode.cuh"
#include "kernels/cuda/gemm/nvfp4/params.h"
#include "kernels/cuda/device/sm90_ptx.cuh"
#include "kernels/cuda/gemm/nvfp4/tile_table.cuh"

namespace dsv4::kernels::cuda::sm90::two_warpgroup {

template <int kBN>
struct WgmmaSmem {
  static constexpr int kA = kSmemA;                          // [kStages][kTileM][64] bf16
  static constexpr int kB = 2 * kBN * kTileK * 2;            // [2][kBN][64] bf16
  static constexpr int kRaw = kStages * kBN * kRawRowBytes;  // [kStages][kBN][48] u8
  static constexpr int kBytes = kA + kB + kRaw + kSmemTable + kSmemAlign;
};

// Starts the copy of one 16-byte part of raw weight row `row` of the tile for K step kt into
// `dst`: parts 0 and 1 are the row's 32 code bytes, part 2 its 4 block-scale bytes (a 48-byte
// raw row, kRawRowBytes); zero-filled past N.
__device__ __forceinline__ void copy_raw_weight_part(const Nvfp4GemmParams& p,
                                                     const TileCoord& tile, int kt, int row,
                                                     int part, uint8_t* dst) {
  const int64_t row_bytes = p.kp / 2, scale_row_bytes = p.kp / 16;
  const int n_row = tile_weight_row(p, tile.col0, row);
  const bool valid = n_row >= 0;
  const int64_t weight_row = (int64_t)tile.group * p.n + n_row;
  if (part < 2) {
    cp_async16(dst, valid ? p.b_packed + weight_row * row_bytes + kt * 32 + part * 16
                          : p.b_packed, valid);
  } else {
    cp_async4(dst, valid ? p.b_scale + weight_row * scale_row_bytes + kt * 4 : p.b_scale, valid);
  }
}

// Issues the cp.async copies of K step kt into ring slot `slot`: the A rows of this thread's
// warpgroup (so only that warpgroup's wgmma reads them) and the raw B codes and scales.
template <int kBN>
__device__ __forceinline__ void load_stage(const Nvfp4GemmParams& p, const TileCoord& tile,
                                           int kt, uint8_t* smem_a, uint8_t* smem_raw) {
  const int warpgroup = threadIdx.x / 128, t = threadIdx.x % 128;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int idx = t + 128 * i, chunk = idx % 8, row = 64 * warpgroup + idx / 8;
    const int col = kt * kTileK + chunk * 8;
    const bool valid = row < tile.n_rows_tile && col < p.k;
    const uint16_t* src = valid ? p.a + (int64_t)(tile.row0 + row) * p.lda + col : p.a;
    cp_async16(smem_a + swizzle128(row, chunk), src, valid);
  }
  for (int idx = threadIdx.x; idx < kBN * 3; idx += kThreads) {
    const int row = idx / 3, part = idx % 3;
    copy_raw_weight_part(p, tile, kt, row, part, smem_raw + row * kRawRowBytes + part * 16);
  }
}

// Raw slot -> bf16 tile: each thread decodes half rows (32 codes, 2 scales) into four swizzled
// 16-byte chunks. Row-major over the CTA so a quarter warp touches 8 consecutive rows: the
// 48-byte raw rows and the swizzle keep both sides free of bank conflicts.
template <int kBN>
__device__ __forceinline__ void decode_b(const uint8_t* smem_raw, uint8_t* smem_b) {
#pragma unroll
  for (int u = threadIdx.x; u < kBN * 2; u += kThreads) {
    const int row = u % kBN, half = u / kBN;
    const uint8_t* raw = smem_raw + row * kRawRowBytes;
    const uint4 codes = *reinterpret_cast<const uint4*>(raw + half * 16);
    const uint32_t scales = *reinterpret_cast<const uint16_t*>(raw + 32 + half * 2);
    const uint32_t scale0 = ue4m3_to_bf16x2(scales & 0xffu), scale1 = ue4m3_to_bf16x2(scales >> 8);
    const uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t out[4];
      decode8(words[j], j < 2 ? scale0 : scale1, out);
      *reinterpret_cast<uint4*>(smem_b + swizzle128(row, half * 4 + j)) =
          make_uint4(out[0], out[1], out[2], out[3]);
    }
  }
}

// This warpgroup's 64 rows × kBN columns += A slot · B bufferᵀ over one K step (4 × k16).
template <int kBN>
__device__ __forceinline__ void mma_stage(const uint8_t* smem_a, const uint8_t* smem_b,
                                          bool first, float (&acc)[kBN / 2]) {
  const uint8_t* a = smem_a + (threadIdx.x / 128) * 64 * 128;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kTileK / 16; ++kk) {
    wgmma_m64k16<kBN>(acc, smem_descriptor(a + kk * 32), smem_descriptor(smem_b + kk * 32),
                      (first && kk == 0) ? 0 : 1);
  }
  wgmma_commit();
}

// D = alpha · acc straight from the wgmma fragment: thread (warp w, lane l) of warpgroup wg
// holds rows 64 wg + 16 w + l/4 (+8) and column pairs 8 j + 2 (l % 4).
template <int kBN, bool kOutBf16>
__device__ __forceinline__ void store_tile(const Nvfp4GemmParams& p, const TileCoord& tile,
                                           const float (&acc)[kBN / 2]) {
  const float alpha = p.a_global != nullptr ? p.a_global[0] * p.b_global[tile.group]
                                            : p.b_global[tile.group];
  const int lane = threadIdx.x % 32;
  const int row_base = 64 * (threadIdx.x / 128) + 16 * ((threadIdx.x % 128) / 32) + lane / 4;
  const bool pairs = p.ldd % 2 == 0;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    const int col = tile.col0 + 8 * j + 2 * (lane % 4);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row_base + 8 * half;
      if (row >= tile.n_rows_tile || col >= p.n) continue;
      const float v0 = alpha * acc[4 * j + 2 * half], v1 = alpha * acc[4 * j + 2 * half + 1];
      const int64_t offset = (int64_t)(tile.row0 + row) * p.ldd + col;
      if constexpr (kOutBf16) {
        __nv_bfloat16* d = static_cast<__nv_bfloat16*>(p.d) + offset;
        if (pairs && col + 1 < p.n) {
          *reinterpret_cast<__nv_bfloat162*>(d) = __floats2bfloat162_rn(v0, v1);
        } else {
          d[0] = __float2bfloat16_rn(v0);
          if (col + 1 < p.n) d[1] = __float2bfloat16_rn(v1);
        }
      } else {
        float* d = static_cast<float*>(p.d) + offset;
        if (pairs && col + 1 < p.n) {
          *reinterpret_cast<float2*>(d) = make_float2(v0, v1);
        } else {
          d[0] = v0;
          if (col + 1 < p.n) d[1] = v1;
        }
      }
    }
  }
}

// The K loop of one tile: a kStages-deep cp.async ring; per step, decode B(kt) while the
// tensor cores still run step kt-1, then issue step kt and refill the slot step kt-1 used.
template <int kBN, bool kOutBf16>
__device__ __forceinline__ void run_tile(const Nvfp4GemmParams& p, const TileCoord& tile,
                                         uint8_t* smem_a, uint8_t* smem_b, uint8_t* smem_raw) {
  constexpr int kSlotA = kTileM * kTileK * 2, kSlotB = kBN * kTileK * 2;
  constexpr int kSlotRaw = kBN * kRawRowBytes;
  const int n_steps = p.kp / kTileK;
  float acc[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.0f;  // overwritten by the first wgmma (scale-d 0)
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_steps) load_stage<kBN>(p, tile, s, smem_a + s * kSlotA, smem_raw + s * kSlotRaw);
    cp_async_commit();
  }
  for (int kt = 0; kt < n_steps; ++kt) {
    const int slot = kt % kStages;
    cp_async_wait<kStages - 2>();
    __syncthreads();  // raw slot kt landed for every thread; wgmma kt-2 done in both warpgroups
    decode_b<kBN>(smem_raw + slot * kSlotRaw, smem_b + (kt % 2) * kSlotB);
    fence_proxy_async();
    __syncthreads();  // the decoded tile is visible to the tensor cores
    mma_stage<kBN>(smem_a + slot * kSlotA, smem_b + (kt % 2) * kSlotB, kt == 0, acc);
    wgmma_wait<1>();  // step kt-1 retired: its A slot and raw slot may be refilled
    const int next = kt + kStages - 1;
    if (next < n_steps) {
      load_stage<kBN>(p, tile, next, smem_a + (next % kStages) * kSlotA,
                      smem_raw + (next % kStages) * kSlotRaw);
    }
    cp_async_commit();
  }
  wgmma_wait<0>();
  store_tile<kBN, kOutBf16>(p, tile, acc);
  __syncthreads();  // the next tile's prologue overwrites the ring
}

template <int kBN, bool kOutBf16>
__global__ void __launch_bounds__(kThreads, 1)
    nvfp4_dequant_gemm_sm90_kernel(const __grid_constant__ Nvfp4GemmParams p) {
  static_assert(kBN == 128 || kBN == 256, "tile N is one wgmma: 128 or 256");
  static_assert(kThreads == 2 * 128 && kTileM == 2 * 64, "two warpgroups of 64 rows");
  static_assert(kTileK == 64, "one 128-byte swizzle row of bf16 per K step");
  extern __shared__ uint8_t smem_raw_bytes[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw_bytes) + kSmemAlign - 1) & ~uintptr_t{kSmemAlign - 1});
  uint8_t* smem_a = smem;
  uint8_t* smem_b = smem_a + WgmmaSmem<kBN>::kA;
  uint8_t* smem_ring = smem_b + WgmmaSmem<kBN>::kB;
  int* s_offsets = reinterpret_cast<int*>(smem_ring + WgmmaSmem<kBN>::kRaw);
  int* s_prefix = s_offsets + kMaxGroups + 1;

  const int n_groups = p.offsets == nullptr ? 1 : p.n_groups;
  const int n_tiles_n = (p.n + kBN - 1) / kBN;
  load_group_offsets(p, s_offsets);
  scan_tile_prefix(s_offsets, n_groups, kTileM, n_tiles_n, s_prefix);
  __syncthreads();
  const int n_tiles = s_prefix[n_groups];
  for (int t = blockIdx.x; t < n_tiles; t += gridDim.x) {
    const int g = find_group(s_prefix, n_groups, t);
    const int rows = s_offsets[g + 1] - s_offsets[g];
    const int m_tiles = (rows + kTileM - 1) / kTileM, local = t - s_prefix[g];
    TileCoord tile;
    tile.group = g;
    tile.row0 = s_offsets[g] + (local % m_tiles) * kTileM;
    tile.n_rows_tile = min(kTileM, s_offsets[g + 1] - tile.row0);
    tile.col0 = (local / m_tiles) * kBN;
    run_tile<kBN, kOutBf16>(p, tile, smem_a, smem_b, smem_ring);
  }
}

}  // namespace dsv4::kernels::cuda::sm90::two_warpgroup
