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

// Pair (a, b) turned by position · inv_freq (sign −1: back).
__device__ __forceinline__ void rotate(float* pair, float a, float b, int64_t position,
                                       float inv_freq, float sign) {
  const float angle = __fmul_rn(static_cast<float>(position), inv_freq);
  const float c = cosf(angle);
  const float s = sign * sinf(angle);
  pair[0] = __fadd_rn(__fmul_rn(a, c), __fmul_rn(-b, s));
  pair[1] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
}

// One row v [Dh] normed (⊙ weight when given) and its trailing 2P dims turned at `position`, in
// place, by the whole block (kRowThreads threads: the reduction's tree is rms_norm's).
__device__ inline void norm_rope_row(float* v, int64_t head_dim, int64_t n_pairs,
                                     const float* weight, float eps, int64_t position,
                                     const float* inv_freq) {
  const float inv_rms =
      row_inv_rms<kRowThreads>(v, head_dim, eps);  // its reduction ends every read
  const auto normed = [&](int64_t i) { return v[i] * inv_rms * (weight ? weight[i] : 1.0f); };
  const int64_t first_pair = head_dim - 2 * n_pairs;
  for (int64_t i = threadIdx.x; i < first_pair; i += blockDim.x) v[i] = normed(i);
  for (int64_t p = threadIdx.x; p < n_pairs; p += blockDim.x) {
    const int64_t i = first_pair + 2 * p;
    rotate(v + i, normed(i), normed(i + 1), position, inv_freq[p], 1.0f);
  }
}

}  // namespace dsv4::kernels::cuda
