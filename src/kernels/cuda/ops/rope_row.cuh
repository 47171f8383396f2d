// rms_norm_rope's row, as device functions: rope.cu's kernels and the decode rows' compressor
// step (decode_rows.cu), which norms and turns the entry it pools with exactly rms_norm_rope's
// arithmetic (its bits equal a one-row rms_norm_rope call's).
//
// Dimension letters: Dh head dim, P rope pairs.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/rope_turn.cuh"

namespace dsv4::kernels::cuda {

// A row held in registers (`row`: this thread's lanes of it, whole pairs when 2P starts at an even
// dim) normed and its trailing 2P dims turned at `position`, in place. The turns, which do not
// depend on the norm, are computed before `inv_rms_of_row` reduces the row, so cosf/sinf run
// beside its shuffles and barriers instead of after them: one memory round trip.
template <int kLanes, typename InvRms>
__device__ __forceinline__ void norm_rope_held(float* v, const RegisterRow<kLanes, 1>& row,
                                               int64_t first_pair, int64_t position,
                                               const float* inv_freq, InvRms inv_rms_of_row) {
  static_assert(kLanes % 2 == 0, "a thread holds whole pairs");
  Turn turns[kLanes / 2];
#pragma unroll
  for (int l = 0; l < kLanes; l += 2) {
    const int64_t i = row.index(0, l);
    if (row.holds(0, l) && i >= first_pair) {
      turns[l / 2] = turn_at(position, inv_freq[(i - first_pair) / 2], 1.0f);
    }
  }
  const float inv_rms = inv_rms_of_row(row);
#pragma unroll
  for (int l = 0; l < kLanes; l += 2) {
    const int64_t i = row.index(0, l);
    if (!row.holds(0, l)) continue;
    if (i >= first_pair) {
      turn_pair(v + i, row.normed(0, l, inv_rms), row.normed(0, l + 1, inv_rms), turns[l / 2]);
      continue;
    }
    v[i] = row.normed(0, l, inv_rms);
    if (row.holds(0, l + 1)) v[i + 1] = row.normed(0, l + 1, inv_rms);
  }
}

// One row v [Dh] normed (⊙ weight when given) and its trailing 2P dims turned at `position`, in
// place, by the whole block (kRowThreads threads: the reduction's tree is rms_norm's).
//
// A head row (Dh ≤ kRmsNormLanes: the attention's 512 at V4-Flash) is held in registers
// (BlockRow: thread t the four elements 4t .. 4t + 3, whole pairs when 2P starts at an even
// dim): norm_rope_held. Other rows stream: normed and turned after their sum pass, reading the
// row again.
__device__ inline void norm_rope_row(float* v, int64_t head_dim, int64_t n_pairs,
                                     const float* weight, float eps, int64_t position,
                                     const float* inv_freq) {
  const int64_t first_pair = head_dim - 2 * n_pairs;
  if (head_dim <= kRmsNormLanes && first_pair % 2 == 0) {
    norm_rope_held(v, block_row<kRowThreads, 1>(v, head_dim, weight), first_pair, position,
                   inv_freq, [&](const auto& row) { return block_inv_rms<kRowThreads>(row, eps); });
    return;
  }
  const float inv_rms =
      row_inv_rms<kRowThreads>(v, head_dim, eps);  // its reduction ends every read
  const auto normed = [&](int64_t i) { return v[i] * inv_rms * (weight ? weight[i] : 1.0f); };
  for (int64_t i = threadIdx.x; i < first_pair; i += blockDim.x) v[i] = normed(i);
  for (int64_t p = threadIdx.x; p < n_pairs; p += blockDim.x) {
    const int64_t i = first_pair + 2 * p;
    rotate(v + i, normed(i), normed(i + 1), position, inv_freq[p], 1.0f);
  }
}

// The same row by one warp, for calls of many rows (a prompt's heads): lane t holds lanes
// kLanes·t … of the row, 32 · kLanes ≥ Dh a power of two. rms_norm's tree over its 1024 lanes
// adds neighbours first, so its sum over a row of Dh ≤ 32 · kLanes is the tree over the first
// 32 · kLanes lanes plus the other half's exact zero: a thread's lanes pairwise, then the warp's
// 32 sums pairwise (warp_pairwise_sum) give the block's bits with no barrier, and a block holds
// a row a warp, not a row.
template <int kLanes>
__device__ inline void warp_norm_rope_row(float* v, int64_t head_dim, int64_t n_pairs,
                                          const float* weight, float eps, int64_t position,
                                          const float* inv_freq) {
  static_assert(32 * kLanes <= kRmsNormLanes && (kLanes & (kLanes - 1)) == 0);
  const RegisterRow<kLanes, 1> row(v, int64_t{threadIdx.x % 32} * kLanes, head_dim, weight);
  norm_rope_held(v, row, head_dim - 2 * n_pairs, position, inv_freq, [&](const auto& held) {
    return inv_rms_of(warp_pairwise_sum(held.sum_of_squares()), held.n, eps);
  });
}

}  // namespace dsv4::kernels::cuda
