// RoPE's rotation of one pair, the expression every CUDA RoPE shares (the rope ops of ops/rope.cu
// and ops/rope_row.cuh, the fast attention's output turned back in its own epilogue): the angle
// the CPU's single f32 product, the turn the same rounded expression (only cosf/sinf may differ
// from the host's libm in the last ulp).
#pragma once

#include <cmath>
#include <cstdint>

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

}  // namespace dsv4::kernels::cuda
