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

// kVec (2 or 4) neighbouring floats in one load or store (p aligned to the whole vector).
template <int kVec>
struct FloatVec;
template <>
struct FloatVec<2> {
  __device__ static void load(const float* p, float* x) {
    const float2 v = *reinterpret_cast<const float2*>(p);
    x[0] = v.x;
    x[1] = v.y;
  }
  __device__ static void store(float* p, const float* x) {
    *reinterpret_cast<float2*>(p) = make_float2(x[0], x[1]);
  }
};
template <>
struct FloatVec<4> {
  __device__ static void load(const float* p, float* x) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    x[0] = v.x;
    x[1] = v.y;
    x[2] = v.z;
    x[3] = v.w;
  }
  __device__ static void store(float* p, const float* x) {
    *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
  }
};

// The vector width a warp row of kLanes lanes a thread loads (warp_norm_rope_row).
template <int kLanes>
inline constexpr int kWarpRowVec = kLanes < 4 ? kLanes : 4;

// The same row by one warp, for calls of many rows (a prompt's heads), with coalesced loads and
// stores: lane t holds kVec neighbours in each of kSlabs slabs of 32 · kVec dims, dims
// kVec · t + 32 · kVec · s + c in x[s][c] (kLanes = kVec · kSlabs ≥ Dh / 32, a power of two;
// the row and Dh aligned to whole vectors, which the launch checks). rms_norm's tree over its
// 1024 lanes adds neighbours first, and a row of Dh ≤ 32 · kLanes fills its first 32 · kLanes
// (the other half adds an exact zero): pairwise over groups of kLanes neighbours, then over the
// 32 groups. A group is kSlabs lanes' vectors of one slab, group s · 32 / kSlabs + t / kSlabs,
// so a slab's vectors pairwise, then its 32 lanes pairwise (warp_pairwise_sum: first within the
// groups, then across them), then the slabs pairwise give the block's bits, with no barrier;
// and a slab's pairs are spread over its lanes, so the warp turns them in parallel.
template <int kLanes>
__device__ inline void warp_norm_rope_row(float* v, int64_t head_dim, int64_t n_pairs,
                                          const float* weight, float eps, int64_t position,
                                          const float* inv_freq) {
  static_assert(32 * kLanes <= kRmsNormLanes && (kLanes & (kLanes - 1)) == 0 && kLanes >= 2);
  constexpr int kVec = kWarpRowVec<kLanes>, kSlabs = kLanes / kVec;
  const int64_t first_pair = head_dim - 2 * n_pairs;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const auto dim = [&](int s) { return int64_t{kVec} * lane + int64_t{32 * kVec} * s; };
  float x[kSlabs][kVec];
#pragma unroll
  for (int s = 0; s < kSlabs; ++s) {
    if (dim(s) < head_dim) {
      FloatVec<kVec>::load(v + dim(s), x[s]);
    } else {
#pragma unroll
      for (int c = 0; c < kVec; ++c) x[s][c] = 0.0f;
    }
  }
  // The turns, which do not depend on the norm, before the reduction waits (norm_rope_held).
  Turn turns[kSlabs][kVec / 2];
#pragma unroll
  for (int s = 0; s < kSlabs; ++s) {
#pragma unroll
    for (int c = 0; c < kVec; c += 2) {
      const int64_t i = dim(s) + c;
      if (i < head_dim && i >= first_pair) {
        turns[s][c / 2] = turn_at(position, inv_freq[(i - first_pair) / 2], 1.0f);
      }
    }
  }
  double slabs[kSlabs];
#pragma unroll
  for (int s = 0; s < kSlabs; ++s) {
    double squares[kVec];
#pragma unroll
    for (int c = 0; c < kVec; ++c) squares[c] = static_cast<double>(x[s][c]) * x[s][c];
    slabs[s] = warp_pairwise_sum(pairwise_sum(squares));
  }
  const float inv_rms = inv_rms_of(pairwise_sum(slabs), head_dim, eps);
#pragma unroll
  for (int s = 0; s < kSlabs; ++s) {
    const int64_t i0 = dim(s);
    if (i0 >= head_dim) continue;
    float out[kVec];
#pragma unroll
    for (int c = 0; c < kVec; ++c) out[c] = x[s][c] * inv_rms * (weight ? weight[i0 + c] : 1.0f);
#pragma unroll
    for (int c = 0; c < kVec; c += 2) {
      if (i0 + c >= first_pair) turn_pair(out + c, out[c], out[c + 1], turns[s][c / 2]);
    }
    FloatVec<kVec>::store(v + i0, out);
  }
}

}  // namespace dsv4::kernels::cuda
