// Which rows and weight matrix a CTA works on, read from the device offsets so that no host sync
// is needed: the offsets are copied to shared memory in one parallel load, then warp 0 scans
// them. Used by the warp-specialised and small-M kernels.
//
// Dimension letters: G groups (experts), T rows.
#pragma once

#include <cstdint>

#include "kernels/cuda/gemm/nvfp4/params.h"

namespace dsv4::kernels::cuda::sm90 {

// One output tile: rows [row0, row0 + n_rows_tile) of group g, columns [col0, col0 + kBN).
struct TileCoord {
  int group;
  int row0;
  int n_rows_tile;
  int col0;
};

// The weight row (of B's N) that row `row` of the weight tile at col0 holds, or -1 past the
// matrix. With the SwiGLU epilogue (p.swiglu_ffn = F) each 16 tile rows are 8 gate rows j and
// then their up rows F + j, j = col0 / 2 + 8 · (row / 16) + row % 8: a ws consumer thread's rows
// r and r + 8 are then the gate and up of one output column j.
__device__ __forceinline__ int tile_weight_row(const Nvfp4GemmParams& p, int col0, int row) {
  if (p.swiglu_ffn == 0) return col0 + row < p.n ? col0 + row : -1;
  const int j = col0 / 2 + 8 * (row / 16) + row % 8;
  if (j >= p.swiglu_ffn) return -1;
  return row % 16 < 8 ? j : p.swiglu_ffn + j;
}

// s_offsets[0..G] = the group row offsets (or {0, T} for a dense call). All threads call it;
// it ends with a barrier.
__device__ __forceinline__ void load_group_offsets(const Nvfp4GemmParams& p, int* s_offsets) {
  if (p.offsets == nullptr) {
    if (threadIdx.x == 0) {
      s_offsets[0] = 0;
      s_offsets[1] = p.n_rows;
    }
  } else {
    for (int g = threadIdx.x; g <= p.n_groups; g += blockDim.x) s_offsets[g] = p.offsets[g];
  }
  __syncthreads();
}

// Warp 0 writes s_prefix[g] = Σ_{j<g} tiles(j) for g in [0, G], tiles(j) = ceil(rows_j /
// tile_m) · n_tiles_n; the caller syncs afterwards.
__device__ __forceinline__ void scan_tile_prefix(const int* s_offsets, int n_groups, int tile_m,
                                                 int n_tiles_n, int* s_prefix) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  int carry = 0;
  if (lane == 0) s_prefix[0] = 0;
  for (int base = 0; base < n_groups; base += 32) {
    const int g = base + lane;
    const int rows = g < n_groups ? s_offsets[g + 1] - s_offsets[g] : 0;
    int sum = (rows + tile_m - 1) / tile_m * n_tiles_n;
    for (int step = 1; step < 32; step *= 2) {
      const int other = __shfl_up_sync(0xffffffffu, sum, step);
      if (lane >= step) sum += other;
    }
    if (g < n_groups) s_prefix[g + 1] = carry + sum;
    carry += __shfl_sync(0xffffffffu, sum, 31);
  }
}

// The group g with s_prefix[g] <= tile < s_prefix[g + 1] (empty groups have equal bounds).
__device__ __forceinline__ int find_group(const int* s_prefix, int n_groups, int tile) {
  int lo = 0, hi = n_groups - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (s_prefix[mid] <= tile) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// The index of the slot-th non-empty group, or -1 (warp 0 computes, all threads get it).
__device__ __forceinline__ int find_nonempty_group(const int* s_offsets, int n_groups, int slot,
                                                   int* s_result) {
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int seen = 0, found = -1;
    for (int base = 0; base < n_groups && found < 0; base += 32) {
      const int g = base + lane;
      const bool nonempty = g < n_groups && s_offsets[g + 1] > s_offsets[g];
      const uint32_t mask = __ballot_sync(0xffffffffu, nonempty);
      const int count = __popc(mask);
      if (slot < seen + count) found = base + __fns(mask, 0, slot - seen + 1);
      seen += count;
    }
    if (lane == 0) *s_result = found;
  }
  __syncthreads();
  return *s_result;
}

}  // namespace dsv4::kernels::cuda::sm90
