// RoPE's rotation and rms_norm_rope's row, as device functions: rope.cu's kernels and the decode
// rows' compressor step (decode_rows.cu), which norms and turns the entry it pools with exactly
// rms_norm_rope's arithmetic (its bits equal a one-row rms_norm_rope call's).
//
// Dimension letters: Dh head dim, P rope pairs.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/device/common.cuh"

namespace dsv4::kernels::cuda {

// The turn of a pair at position · inv_freq (sign −1: back).
struct Turn {
  float c, s;
};
__device__ __forceinline__ Turn turn_at(int64_t position, float inv_freq, float sign) {
  const float angle = __fmul_rn(static_cast<float>(position), inv_freq);
  return {cosf(angle), sign * sinf(angle)};
}

// Pair (a, b) turned by `turn`, into pair[0, 2).
__device__ __forceinline__ void turn_pair(float* pair, float a, float b, Turn turn) {
  pair[0] = __fadd_rn(__fmul_rn(a, turn.c), __fmul_rn(-b, turn.s));
  pair[1] = __fadd_rn(__fmul_rn(b, turn.c), __fmul_rn(a, turn.s));
}

// Pair (a, b) turned by position · inv_freq (sign −1: back).
__device__ __forceinline__ void rotate(float* pair, float a, float b, int64_t position,
                                       float inv_freq, float sign) {
  turn_pair(pair, a, b, turn_at(position, inv_freq, sign));
}

// One row v [Dh] normed (⊙ weight when given) and its trailing 2P dims turned at `position`, in
// place, by the whole block (kRowThreads threads: the reduction's tree is rms_norm's).
//
// A head row (Dh ≤ kRmsNormLanes: the attention's 512 at V4-Flash) is held in registers
// (BlockRow: thread t the four elements 4t .. 4t + 3, whole pairs when 2P starts at an even
// dim), and the turns, which do not depend on the norm, are computed before the reduction: one
// memory round trip, with cosf/sinf beside the block's barriers instead of after them. Other
// rows stream: normed and turned after their sum pass, reading the row again.
__device__ inline void norm_rope_row(float* v, int64_t head_dim, int64_t n_pairs,
                                     const float* weight, float eps, int64_t position,
                                     const float* inv_freq) {
  const int64_t first_pair = head_dim - 2 * n_pairs;
  if (head_dim <= kRmsNormLanes && first_pair % 2 == 0) {
    const BlockRow<kRowThreads, 1> row = block_row<kRowThreads, 1>(v, head_dim, weight);
    constexpr int kLanes = static_cast<int>(kRmsNormLanes / kRowThreads);
    static_assert(kLanes % 2 == 0, "a thread holds whole pairs");
    Turn turns[kLanes / 2];
#pragma unroll
    for (int l = 0; l < kLanes; l += 2) {
      const int64_t i = row.index(0, l);
      if (row.holds(0, l) && i >= first_pair) {
        turns[l / 2] = turn_at(position, inv_freq[(i - first_pair) / 2], 1.0f);
      }
    }
    const float inv_rms = block_inv_rms<kRowThreads>(row, eps);
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

}  // namespace dsv4::kernels::cuda
